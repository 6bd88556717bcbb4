package dedup

import (
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/titan-broker/titan/internal/dest"
)

// memJournal stands in for the store's id records (durable.Log writes them with the
// messages; here the test appends them as a store would).
type memJournal struct {
	keys    []string
	ats     []time.Time
	trimmed time.Time
}

func (j *memJournal) store(key string, at time.Time) {
	j.keys, j.ats = append(j.keys, key), append(j.ats, at)
}

func (j *memJournal) LoadDuplicateIDs(fn func(string, time.Time)) error {
	for i, k := range j.keys {
		fn(k, j.ats[i])
	}
	return nil
}

func (j *memJournal) TrimDuplicateIDs(before time.Time) error {
	n := 0
	for n < len(j.ats) && j.ats[n].Before(before) {
		n++
	}
	j.keys, j.ats = j.keys[n:], j.ats[n:]
	j.trimmed = before
	return nil
}

var q = dest.Identity{Group: "default", Pattern: dest.PatternQueues, Channel: "a"}

// accept claims dupID on id and settles it as accepted, as a SEND that got its RECEIPT.
func accept(t *testing.T, c *Cache, id dest.Identity, dupID string) (dup bool) {
	t.Helper()
	dup, settle, err := c.Claim(id, dupID)
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
	c := New(Options{Window: time.Minute, Cap: 3, Now: func() time.Time { return now }})
	dup, settle, err := c.Claim(q, "x")
	if dup || err != nil {
		t.Fatal("first claim is a duplicate")
	}
	// A repeat while the first SEND is unanswered is refused, never answered as a duplicate.
	if _, _, err := c.Claim(q, "x"); !errors.Is(err, ErrInFlight) {
		t.Fatalf("repeat in flight: err %v, want ErrInFlight", err)
	}
	settle(true)
	if dup := accept(t, c, q, "x"); !dup {
		t.Fatal("repeat is not a duplicate")
	}
	other := q
	other.Channel = "b"
	if dup := accept(t, c, other, "x"); dup {
		t.Fatal("same id on another destination is a duplicate")
	}
	// A refused SEND's id is forgotten: its retry is stored.
	_, settle, _ = c.Claim(q, "y")
	settle(false)
	if dup := accept(t, c, q, "y"); dup {
		t.Fatal("a refused SEND's id is still a duplicate")
	}
	// Cap 3: x, b/x, y remembered; one more forgets the oldest (x).
	accept(t, c, q, "z")
	if c.Len() != 3 {
		t.Fatalf("Len %d, want 3 (cap)", c.Len())
	}
	if dup := accept(t, c, q, "x"); dup {
		t.Fatal("x should have been forgotten by the cap")
	}
	// Window: everything older than a minute is forgotten.
	now = now.Add(2 * time.Minute)
	if dup := accept(t, c, q, "z"); dup {
		t.Fatal("z should have expired")
	}
	if c.DuplicatesSeen() != 1 {
		t.Fatalf("DuplicatesSeen %d, want 1", c.DuplicatesSeen())
	}
}

// TestLoadRebuildsFromStoredIDs: after a restart the cache holds exactly the stored ids
// inside the window, whether or not their SENDs were answered before the crash, and the
// journal is trimmed behind the window.
func TestLoadRebuildsFromStoredIDs(t *testing.T) {
	now := time.Unix(1000, 0)
	j := &memJournal{}
	j.store(Key(q, "old"), now)
	j.store(Key(q, "new"), now.Add(50*time.Second)) // stored, its RECEIPT never sent
	now = now.Add(70 * time.Second)                 // "old" is outside the window now
	r := New(Options{Window: time.Minute, Journal: j, Now: func() time.Time { return now }})
	if err := r.Load(); err != nil {
		t.Fatal(err)
	}
	if dup := accept(t, r, q, "new"); !dup {
		t.Fatal("a stored id inside the window was not restored")
	}
	if dup := accept(t, r, q, "old"); dup {
		t.Fatal("an id outside the window was restored")
	}
	if dup := accept(t, r, q, "never-stored"); dup {
		t.Fatal("an id that was not stored is a duplicate")
	}
	if len(j.keys) != 1 || !j.trimmed.Equal(now.Add(-time.Minute)) {
		t.Fatalf("journal after Load: %q trimmed before %v; want only the id inside the window", j.keys, j.trimmed)
	}
}

// TestCapTrimsJournal: ids the cap forgets are trimmed from the journal, so what a restart
// loads stays bounded by the cap, not only by the window.
func TestCapTrimsJournal(t *testing.T) {
	now := time.Unix(1000, 0)
	j := &memJournal{}
	c := New(Options{Window: time.Hour, Cap: 10, Journal: j, Now: func() time.Time { return now }})
	for i := range 2 * trimEvery {
		now = now.Add(time.Millisecond)
		id := strconv.Itoa(i)
		accept(t, c, q, id)
		j.store(Key(q, id), now)
	}
	if len(j.keys) > trimEvery+10 {
		t.Fatalf("journal holds %d ids after %d claims with cap 10; want it trimmed", len(j.keys), 2*trimEvery)
	}
	if c.Len() != 10 {
		t.Fatalf("Len %d, want 10", c.Len())
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
		if _, settle, _ := c.Claim(q, ids[i%len(ids)]); settle != nil {
			settle(true)
		}
	}
}

// TestKeyForm: the cache key, stored in every duplicate-id record, is the identity's
// "group:/destination" form, NUL, the id; AppendKey writes the same bytes as Key.
func TestKeyForm(t *testing.T) {
	for _, id := range []dest.Identity{
		{Group: "default", Pattern: dest.PatternQueues, Channel: "orders.eu"},
		{Group: "g", Pattern: dest.PatternEventsStore, Channel: "log"},
		{Group: "default", Pattern: dest.PatternQueues, Channel: "a.b", Bare: true},
	} {
		want := id.String() + "\x00" + "id-1"
		if got := Key(id, "id-1"); got != want {
			t.Errorf("Key(%v) = %q, want %q", id, got, want)
		}
		if got := string(AppendKey([]byte("x"), id, "id-1")); got != "x"+want {
			t.Errorf("AppendKey(%v) = %q, want %q", id, got, "x"+want)
		}
	}
}
