package durable

import (
	"sync"
	"time"

	"github.com/titan-broker/titan/internal/store"
)

// Commit latency: PersistAsync's timed wait and the clock it reads.

// timedWait is PersistAsync's wait when CommitLatency is observed: the store's wait, then the
// observation. Pooled, with its method value made once, so that it costs no allocation; it
// returns to the pool when called (wait is called exactly once).
type timedWait struct {
	l     *Log
	start time.Duration // sinceEpoch at the append
	w     func() error
	cc    store.CommitClock // the store's, when it has one: the end time without a clock read
	fn    func() error      // tw.wait, bound once
}

var timedWaits sync.Pool // of *timedWait; New is set in init (it refers to wait, which puts)

func init() {
	timedWaits.New = func() any { tw := &timedWait{}; tw.fn = tw.wait; return tw }
}

func (tw *timedWait) wait() error {
	err := tw.w() // the store's error (its Refusal text is what a client sees)
	// The commit's landing (at or after it landed, not after now) rather than now: the
	// store read the clock once for its whole group.
	var end time.Duration
	if tw.cc != nil {
		end = tw.cc.LastCommit()
	}
	if end < tw.start {
		end = sinceEpoch() // no CommitClock, or the wait failed before any commit landed
	}
	tw.l.CommitLatency.Observe((end - tw.start).Seconds())
	tw.l, tw.w, tw.cc = nil, nil, nil
	timedWaits.Put(tw)
	return err
}

// observeSince observes the time since start, in seconds, on o.
func observeSince(o interface{ Observe(float64) }, start time.Time) {
	o.Observe(time.Since(start).Seconds())
}

// sinceEpoch returns the monotonic time since store.Epoch, never 0: one clock read where
// time.Now takes two (wall and monotonic), for latencies measured per message; the time base
// of store.CommitClock.
func sinceEpoch() time.Duration { return store.Since() }
