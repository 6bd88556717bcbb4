package dispatch

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/titan-broker/titan/internal/address"
	"github.com/titan-broker/titan/internal/clock"
	"github.com/titan-broker/titan/internal/dest"
)

type stubQueue struct {
	id    dest.Identity
	stats QueueStats
}

func (q *stubQueue) Identity() dest.Identity                   { return q.id }
func (q *stubQueue) Stats() QueueStats                         { return q.stats }
func (q *stubQueue) SetPaused(bool)                            {}
func (q *stubQueue) SetRingSize(int) (address.Settings, error) { return address.Settings{}, ErrNoQueue }
func (q *stubQueue) Purge()                                    {}

type stubFactory struct{ made map[dest.Identity]*stubQueue }

func (f *stubFactory) NewQueue(id dest.Identity, _ address.Settings) Queue {
	q := &stubQueue{id: id}
	f.made[id] = q
	return q
}

type forgot []dest.Identity

func (f *forgot) ForgetDestination(id dest.Identity) { *f = append(*f, id) }

type fakeClock struct {
	clock.Clock
	now time.Time
}

func (c *fakeClock) Now() time.Time { return c.now }

func qid(ch string) dest.Identity {
	return dest.Identity{Group: "default", Pattern: dest.PatternQueues, Channel: ch}
}

func TestMaxDestinations(t *testing.T) {
	d := New(Options{MaxDestinations: 3})
	d.Register(dest.PatternQueues, &stubFactory{made: map[dest.Identity]*stubQueue{}}, false)
	d.RegisterLog(dest.PatternEventsStore)
	for _, ch := range []string{"a", "b"} {
		if _, err := d.Get(qid(ch)); err != nil {
			t.Fatal(err)
		}
	}
	log := dest.Identity{Group: "default", Pattern: dest.PatternEventsStore, Channel: "l"}
	if created, err := d.Ensure(log); err != nil || !created {
		t.Fatalf("Ensure log: %v %v", created, err)
	}
	if _, err := d.Get(qid("c")); !errors.Is(err, ErrDestinationLimit) {
		t.Fatalf("4th destination: %v, want ErrDestinationLimit", err)
	}
	if _, err := d.Ensure(dest.Identity{Group: "default", Pattern: dest.PatternEventsStore, Channel: "m"}); !errors.Is(err, ErrDestinationLimit) {
		t.Fatalf("4th (a log): %v, want ErrDestinationLimit", err)
	}
	if d.Exists(qid("c")) || d.Destinations() != 3 || d.DestinationRefusals.Load() != 2 {
		t.Fatalf("after refusals: exists %v, destinations %d, refusals %d", d.Exists(qid("c")), d.Destinations(), d.DestinationRefusals.Load())
	}
	// Existing ones stay reachable; operators and recovery are not bounded.
	if _, err := d.Get(qid("a")); err != nil {
		t.Fatal(err)
	}
	if _, _, err := d.GetOrPut(qid("op"), address.Settings{}); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Restore(qid("restored")); err != nil {
		t.Fatal(err)
	}
}

func TestReclaimIdle(t *testing.T) {
	clk := &fakeClock{Clock: clock.Real, now: time.Unix(1000, 0)}
	var f forgot
	fac := &stubFactory{made: map[dest.Identity]*stubQueue{}}
	d := New(Options{Clock: clk, Forget: &f})
	d.Register(dest.PatternQueues, fac, false)
	for i := range 4 {
		if _, err := d.Get(qid(fmt.Sprint(i))); err != nil {
			t.Fatal(err)
		}
	}
	_, _, _ = d.GetOrPut(qid("operator"), address.Settings{})
	fac.made[qid("1")].stats.Messages = 1  // holds a message
	fac.made[qid("2")].stats.Consumers = 1 // has a consumer
	if n := d.Reclaim(time.Minute); n != 0 {
		t.Fatalf("first pass reclaimed %d (it only marks)", n)
	}
	clk.now = clk.now.Add(30 * time.Second)
	fac.made[qid("3")].stats.Enqueued = 1 // a SEND since the mark: idle again from now
	d.Reclaim(time.Minute)
	clk.now = clk.now.Add(31 * time.Second)
	if n := d.Reclaim(time.Minute); n != 1 {
		t.Fatalf("reclaimed %d, want 1 (queue 0)", n)
	}
	if d.Exists(qid("0")) || !d.Exists(qid("1")) || !d.Exists(qid("2")) || !d.Exists(qid("3")) || !d.Exists(qid("operator")) {
		t.Fatal("wrong queues reclaimed")
	}
	if len(f) != 1 || f[0] != qid("0") {
		t.Fatalf("forgotten in the store: %v", f)
	}
}
