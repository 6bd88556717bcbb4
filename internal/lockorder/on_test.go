//go:build invariants

package lockorder

//lint:file-ignore SA2001 these tests take and release locks only to exercise the order checker

import (
	"fmt"
	"strings"
	"sync"
	"testing"
)

// mustPanic runs f and returns its panic message; the test fails when f does not panic.
func mustPanic(t *testing.T, f func()) (msg string) {
	t.Helper()
	defer func() {
		r := recover()
		if r == nil {
			t.Fatal("no panic: an acquisition against the LOCKS.md order went unnoticed")
		}
		msg, _ = r.(string)
	}()
	f()
	return ""
}

func TestIncreasingRanksPass(t *testing.T) {
	var d RWMutex[DispatcherRank]
	var q Mutex[QueueRank]
	var c Mutex[ConnRank]
	var s Mutex[SessionRank]
	d.RLock()
	q.Lock()
	c.Lock()
	s.Lock()
	s.Unlock()
	c.Unlock()
	q.Unlock()
	d.RUnlock()
	// Released in another order than taken is fine, and so is taking again after release.
	q.Lock()
	c.Lock()
	q.Unlock()
	c.Unlock()
	c.Lock()
	c.Unlock()
}

func TestInvertedOrderPanics(t *testing.T) {
	var q Mutex[QueueRank]
	var c Mutex[ConnRank]
	c.Lock()
	msg := mustPanic(t, func() { q.Lock() })
	c.Unlock()
	want := []string{fmt.Sprintf("rank %d", QueueRank{}.Rank()), fmt.Sprintf("rank %d", ConnRank{}.Rank())}
	if !strings.Contains(msg, want[0]) || !strings.Contains(msg, want[1]) {
		t.Fatalf("panic %q does not name both ranks", msg)
	}
	// The refused lock was not taken, and nothing is recorded as held any more.
	q.Lock()
	q.Unlock()
}

func TestSameRankPanics(t *testing.T) {
	// Two queues' locks never nest (LOCKS.md: retirement runs after the queue lock is released).
	var a, b Mutex[QueueRank]
	a.Lock()
	defer a.Unlock()
	mustPanic(t, func() { b.Lock() })
}

func TestReadLockInvertedPanics(t *testing.T) {
	var d RWMutex[DispatcherRank]
	var q Mutex[QueueRank]
	q.Lock()
	defer q.Unlock()
	mustPanic(t, func() { d.RLock() })
}

func TestTryLockRecordedNotChecked(t *testing.T) {
	var s Mutex[SessionRank]
	var c Mutex[ConnRank]
	s.Lock()
	if !c.TryLock() { // a backing-off TryLock of a lower rank: allowed
		t.Fatal("TryLock of a free lock failed")
	}
	c.Unlock()
	s.Unlock()
	if !c.TryLock() {
		t.Fatal("TryLock of a free lock failed")
	}
	defer c.Unlock()
	var q Mutex[QueueRank]
	mustPanic(t, func() { q.Lock() }) // checked against the lock TryLock took
}

func TestGoroutinesAreSeparate(t *testing.T) {
	var c Mutex[ConnRank]
	var q Mutex[QueueRank]
	c.Lock()
	defer c.Unlock()
	var wg sync.WaitGroup
	wg.Go(func() { // holds nothing: may take the queue lock
		q.Lock()
		q.Unlock()
	})
	wg.Wait()
}

func TestUnlockOnAnotherGoroutine(t *testing.T) {
	var q Mutex[QueueRank]
	var c Mutex[ConnRank]
	q.Lock()
	var wg sync.WaitGroup
	wg.Go(q.Unlock)
	wg.Wait()
	// q is forgotten on this goroutine: taking c then q is a fresh start, not an inversion.
	c.Lock()
	c.Unlock()
	q.Lock()
	q.Unlock()
}
