package dispatch

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/titan-broker/titan/internal/address"
)

// Admission is what the address-full policy consults on a dispatcher queue (implemented by
// the events and queues patterns' queues). Every method but CountDrop and BlockedCount runs
// with the queue's mutex held.
type Admission interface {
	// DeletedLocked reports whether the queue was deleted.
	DeletedLocked() bool
	// FullLocked reports whether a message of size bytes may not be enqueued now.
	FullLocked(size int) bool
	// FullErrLocked says why: ErrQueuePaused or ErrQueueFull.
	FullErrLocked() error
	// PolicyLocked returns the queue's settings.
	PolicyLocked() address.Settings
	// SpaceLocked returns the channel closed when room appears.
	SpaceLocked() chan struct{}
	// CountDrop counts a PolicyDrop discard.
	CountDrop()
	// BlockedCount is the number of producers waiting for room.
	BlockedCount() *atomic.Int32
}

// Wait ends a PolicyBlock wait early: Cancel when the producer's connection closes, Stop when
// the dispatcher closes. Nil channels never fire.
type Wait struct {
	Cancel <-chan struct{}
	Stop   <-chan struct{}
}

// Admit applies the address-full policy (DESIGN §4) to a message of size bytes. mu, the
// queue's mutex, is held on entry. It returns with mu still held, and (false, nil), when the
// message may be enqueued; otherwise mu is released and it reports a PolicyDrop discard
// (dropped) or the refusal: ErrQueueDeleted, ErrQueueFull, ErrQueuePaused, ErrCanceled. Under
// PolicyBlock it waits, with mu released, for room (a close of the queue's space channel) up
// to the block timeout, or until w cancels it: the producer's connection is not read
// meanwhile.
func Admit(q Admission, mu sync.Locker, size int, w Wait) (dropped bool, err error) {
	var deadline time.Time
	for {
		if q.DeletedLocked() {
			mu.Unlock()
			return false, ErrQueueDeleted
		}
		if !q.FullLocked(size) {
			return false, nil
		}
		s := q.PolicyLocked()
		switch s.FullPolicy {
		case address.PolicyDrop:
			mu.Unlock()
			q.CountDrop()
			return true, nil
		case address.PolicyFail:
			err := q.FullErrLocked()
			mu.Unlock()
			return false, err
		}
		if deadline.IsZero() {
			deadline = time.Now().Add(s.BlockTimeoutInForce())
		}
		wait := time.Until(deadline)
		if wait <= 0 {
			err := q.FullErrLocked()
			mu.Unlock()
			return false, err
		}
		ch := q.SpaceLocked()
		q.BlockedCount().Add(1)
		mu.Unlock()
		t := time.NewTimer(wait)
		canceled := false
		select {
		case <-ch:
		case <-t.C:
		case <-w.Cancel:
			canceled = true
		case <-w.Stop:
			canceled = true
		}
		t.Stop()
		q.BlockedCount().Add(-1)
		if canceled {
			return false, ErrCanceled
		}
		mu.Lock()
	}
}
