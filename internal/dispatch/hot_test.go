package dispatch

import (
	"sync"
	"testing"

	"github.com/titan-broker/titan/internal/dest"
)

// The hot entry never outlives its queue: after a Delete, Exists is false and Get makes a
// fresh queue, even for the identity looked up last; lookups of other identities in
// between still find their own queues.
func TestHotEntryForgottenOnDelete(t *testing.T) {
	d := New(Options{})
	d.Register(dest.PatternQueues, &stubFactory{made: map[dest.Identity]*stubQueue{}}, false)
	a1, err := d.Get(qid("a"))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := d.Get(qid("b"))
	if q, _ := d.Get(qid("a")); q != a1 || !d.Exists(qid("a")) {
		t.Fatal("a's queue not found again")
	}
	if err := d.Delete(qid("a"), true); err != nil {
		t.Fatal(err)
	}
	if d.Exists(qid("a")) {
		t.Fatal("a exists after its Delete")
	}
	a2, _ := d.Get(qid("a"))
	if a2 == a1 {
		t.Fatal("Get returned the deleted queue")
	}
	if q, _ := d.Get(qid("b")); q != b {
		t.Fatal("b's queue changed")
	}
	if q, ok := d.Lookup(qid("a")); !ok || q != a2 {
		t.Fatal("the map does not hold a's fresh queue")
	}
}

// Concurrent Gets, Exists and Deletes of the same identities (run with -race): a Get that
// returns after a Delete returned never hands out the deleted queue.
func TestHotEntryConcurrentDelete(t *testing.T) {
	d := New(Options{})
	d.Register(dest.PatternQueues, &stubFactory{made: map[dest.Identity]*stubQueue{}}, false)
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			for i := range 2000 {
				id := qid([]string{"x", "y"}[(i+w)%2])
				_, _ = d.Get(id)
				_ = d.Exists(id)
			}
		})
	}
	wg.Go(func() {
		for i := range 500 {
			id := qid([]string{"x", "y"}[i%2])
			q, ok := d.Lookup(id)
			if !ok {
				continue
			}
			if err := d.Delete(id, true); err != nil {
				continue // deleted meanwhile
			}
			if got, _ := d.Get(id); got == q {
				t.Error("Get after Delete returned the deleted queue")
				return
			}
		}
	})
	wg.Wait()
}
