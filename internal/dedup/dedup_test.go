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

// accept claims dupID on id and settles it as accepted, as a SEND that got its RECEIPT.
func accept(t *testing.T, c *Cache, id dest.Identity, dupID string, durable bool) (dup bool) {
	t.Helper()
	dup, settle, err := c.Claim(id, dupID, durable)
	if err != nil {
		t.Fatal(err)
	}
	if settle != nil {
		settle(true)
	}
	return dup
}

func TestClaimWindowCapAndUndo(t *testing.T) {
	now := time.Unix(1000, 0)
	j := &memJournal{}
	c := New(Options{Window: time.Minute, Cap: 3, Journal: j, Now: func() time.Time { return now }})
	dup, settle, err := c.Claim(q, "x", true)
	if dup || err != nil {
		t.Fatal("first claim is a duplicate")
	}
	// A repeat while the first SEND is unanswered is refused, never answered as a duplicate.
	if _, _, err := c.Claim(q, "x", true); !errors.Is(err, ErrInFlight) {
		t.Fatalf("repeat in flight: err %v, want ErrInFlight", err)
	}
	if len(j.entries) != 0 {
		t.Fatal("the id was journaled before its SEND was accepted")
	}
	settle(true)
	if len(j.entries) != 1 {
		t.Fatal("an accepted id was not journaled")
	}
	if dup := accept(t, c, q, "x", true); !dup {
		t.Fatal("repeat is not a duplicate")
	}
	other := q
	other.Channel = "b"
	if dup := accept(t, c, other, "x", true); dup {
		t.Fatal("same id on another destination is a duplicate")
	}
	// A refused SEND's id is forgotten: its retry is stored.
	_, settle, _ = c.Claim(q, "y", true)
	settle(false)
	if dup := accept(t, c, q, "y", true); dup {
		t.Fatal("a refused SEND's id is still a duplicate")
	}
	// Cap 3: x, b/x, y remembered; one more forgets the oldest (x).
	accept(t, c, q, "z", true)
	if c.Len() != 3 {
		t.Fatalf("Len %d, want 3 (cap)", c.Len())
	}
	if dup := accept(t, c, q, "x", true); dup {
		t.Fatal("x should have been forgotten by the cap")
	}
	// Window: everything older than a minute is forgotten.
	now = now.Add(2 * time.Minute)
	if dup := accept(t, c, q, "z", true); dup {
		t.Fatal("z should have expired")
	}
	// A journal failure keeps an accepted id in memory (no restart protection).
	j.fail = errors.New("disk full")
	accept(t, c, q, "w", true)
	j.fail = nil
	if dup := accept(t, c, q, "w", true); !dup {
		t.Fatal("an accepted id whose journal write failed is not remembered in memory")
	}
}

func TestLoadRestoresWindow(t *testing.T) {
	now := time.Unix(1000, 0)
	j := &memJournal{}
	c := New(Options{Window: time.Minute, Journal: j, Now: func() time.Time { return now }})
	accept(t, c, q, "old", true)
	now = now.Add(50 * time.Second)
	accept(t, c, q, "new", true)
	accept(t, c, q, "memory-only", false)
	now = now.Add(20 * time.Second) // "old" is outside the window now
	r := New(Options{Window: time.Minute, Journal: j, Now: func() time.Time { return now }})
	if err := r.Load(); err != nil {
		t.Fatal(err)
	}
	if dup := accept(t, r, q, "new", true); !dup {
		t.Fatal("a journaled id inside the window was not restored")
	}
	if dup := accept(t, r, q, "old", true); dup {
		t.Fatal("an id outside the window was restored")
	}
	if dup := accept(t, r, q, "memory-only", true); dup {
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
		if _, settle, _ := c.Claim(q, ids[i%len(ids)], false); settle != nil {
			settle(true)
		}
	}
}
