//go:build !invariants

package lockorder

import (
	"sync"
	"testing"
)

// Without the tag the ranked locks are the sync types themselves: these assignments compile
// only while Mutex[R] and RWMutex[R] are aliases (no wrapper, no cost).
var (
	_ *sync.Mutex   = new(Mutex[QueueRank])
	_ *sync.RWMutex = new(RWMutex[DispatcherRank])
)

func TestDisabledWithoutTag(t *testing.T) {
	if Enabled {
		t.Fatal("Enabled without the invariants tag")
	}
	var c Mutex[ConnRank]
	var q Mutex[QueueRank]
	n := 0
	c.Lock()
	q.Lock() // an inversion, unchecked without the tag
	n++
	q.Unlock()
	c.Unlock()
	if n != 1 {
		t.Fatal("the critical section did not run")
	}
}
