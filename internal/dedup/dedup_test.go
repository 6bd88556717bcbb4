package dedup

import (
	"errors"
	"testing"
	"time"

	"github.com/titan-broker/titan/internal/dest"
)

type memJournal struct {
	seq     uint64
	entries map[uint64]struct {
		key string
		at  time.Time
	}
	trimmedBefore uint64
	fail          error
}

func (j *memJournal) RecordDuplicateID(key string, at time.Time) (uint64, error) {
	if j.fail != nil {
		return 0, j.fail
	}
	if j.entries == nil {
		j.entries = map[uint64]struct {
			key string
			at  time.Time
		}{}
	}
	j.seq++
	j.entries[j.seq] = struct {
		key string
		at  time.Time
	}{key, at}
	return j.seq, nil
}

func (j *memJournal) ForgetDuplicateID(tok uint64) { delete(j.entries, tok) }

func (j *memJournal) LoadDuplicateIDs(fn func(uint64, string, time.Time)) error {
	for s := uint64(1); s <= j.seq; s++ {
		if e, ok := j.entries[s]; ok {
			fn(s, e.key, e.at)
		}
	}
	return nil
}

func (j *memJournal) TrimDuplicateIDs(before uint64) error {
	for s := range j.entries {
		if s < before {
			delete(j.entries, s)
		}
	}
	j.trimmedBefore = before
	return nil
}

var q = dest.Identity{Group: "default", Pattern: dest.PatternQueues, Channel: "a"}

func TestClaimWindowCapAndUndo(t *testing.T) {
	now := time.Unix(1000, 0)
	j := &memJournal{}
	c := New(Options{Window: time.Minute, Cap: 3, Journal: j, Now: func() time.Time { return now }})
	if dup, _, _ := c.Claim(q, "x", true); dup {
		t.Fatal("first claim is a duplicate")
	}
	if dup, _, _ := c.Claim(q, "x", true); !dup {
		t.Fatal("repeat is not a duplicate")
	}
	other := q
	other.Channel = "b"
	if dup, _, _ := c.Claim(other, "x", true); dup {
		t.Fatal("same id on another destination is a duplicate")
	}
	// undo: a refused SEND's id is forgotten, in memory and in the journal.
	_, undo, _ := c.Claim(q, "y", true)
	undo()
	if dup, _, _ := c.Claim(q, "y", true); dup {
		t.Fatal("undone id is still a duplicate")
	}
	// Cap 3: x, b/x, y remembered; one more forgets the oldest (x).
	c.Claim(q, "z", true)
	if c.Len() != 3 {
		t.Fatalf("Len %d, want 3 (cap)", c.Len())
	}
	if dup, _, _ := c.Claim(q, "x", true); dup {
		t.Fatal("x should have been forgotten by the cap")
	}
	// Window: everything older than a minute is forgotten.
	now = now.Add(2 * time.Minute)
	if dup, _, _ := c.Claim(q, "z", true); dup {
		t.Fatal("z should have expired")
	}
	// A journal failure remembers nothing.
	j.fail = errors.New("disk full")
	if _, _, err := c.Claim(q, "w", true); err == nil {
		t.Fatal("journal failure not returned")
	}
	j.fail = nil
	if dup, _, _ := c.Claim(q, "w", true); dup {
		t.Fatal("an id whose journal write failed is remembered")
	}
}

func TestLoadRestoresWindow(t *testing.T) {
	now := time.Unix(1000, 0)
	j := &memJournal{}
	c := New(Options{Window: time.Minute, Journal: j, Now: func() time.Time { return now }})
	c.Claim(q, "old", true)
	now = now.Add(50 * time.Second)
	c.Claim(q, "new", true)
	c.Claim(q, "memory-only", false)
	now = now.Add(20 * time.Second) // "old" is outside the window now
	r := New(Options{Window: time.Minute, Journal: j, Now: func() time.Time { return now }})
	if err := r.Load(); err != nil {
		t.Fatal(err)
	}
	if dup, _, _ := r.Claim(q, "new", true); !dup {
		t.Fatal("a journaled id inside the window was not restored")
	}
	if dup, _, _ := r.Claim(q, "old", true); dup {
		t.Fatal("an id outside the window was restored")
	}
	if dup, _, _ := r.Claim(q, "memory-only", true); dup {
		t.Fatal("a non-durable id survived the restart")
	}
}

func BenchmarkClaim(b *testing.B) {
	c := New(Options{})
	ids := make([]string, 1024)
	for i := range ids {
		ids[i] = string(rune('a'+i%26)) + string(rune(i))
	}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		c.Claim(q, ids[i%len(ids)], false)
	}
}
