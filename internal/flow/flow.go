// Package flow is Titan's flow control (DESIGN §9): the watermarks of a subscriber's
// output and of the heap.
//
// A subscriber's connection carries an Outbound: the bytes queued for its writer, with a
// high and a low watermark. Crossing the high one makes the connection congested and arms
// the slow-consumer timer: a subscriber that stays over the high watermark without its queue
// shrinking for SlowAfter is a slow consumer, and its owner closes it with an ERROR. No
// producer waits for a congested subscriber (issue 30: a slow subscriber is isolated; the
// events pattern bounds what it buffers for one, delivery.EventPolicy).
//
// Heap is the broker-wide pair of watermarks over the Go heap: over the high mark every
// producer pauses before publishing (Stats.Wait), until the heap falls under the low mark.
// It is the only place producers pause for flow control.
//
// # Concurrency
//
// Outbound has no lock of its own: its owner (the session) calls it under the lock that
// guards its queue. Stats and Heap are safe for concurrent use.
package flow

import (
	"sync/atomic"
	"time"
)

// Stats counts flow-control events for metrics. The zero value is ready; every field is
// safe for concurrent use.
type Stats struct {
	// Pauses counts producer pauses (a producer waited for a congested subscriber or for
	// the heap); Resumes counts the ends of those waits; Paused is how many producers wait now.
	Pauses, Resumes atomic.Uint64
	Paused          atomic.Int64
	// SlowConsumers counts connections closed as slow consumers (close reason
	// slow_consumer, whatever detected it; the session counts them when it records the
	// reason).
	SlowConsumers atomic.Uint64
	// Dropped counts events deliveries dropped under slow-consumer-policy DROP.
	Dropped atomic.Uint64
}

// Wait pauses the calling producer until every channel in waits is closed (the heap's
// Congested, or a congested connection's Outbound.Congested, closed at its low watermark or
// when the connection closes), or until cancel or stop closes. nil channels are skipped. It reports
// false when cancel or stop ended the wait. It counts one pause and one resume when it
// waited at all. st may be nil (nothing is counted).
func (st *Stats) Wait(waits []<-chan struct{}, cancel, stop <-chan struct{}) bool {
	paused := false
	defer func() {
		if paused && st != nil {
			st.Resumes.Add(1)
			st.Paused.Add(-1)
		}
	}()
	for _, w := range waits {
		if w == nil {
			continue
		}
		select {
		case <-w:
			continue
		default:
		}
		if !paused {
			paused = true
			if st != nil {
				st.Pauses.Add(1)
				st.Paused.Add(1)
			}
		}
		select {
		case <-w:
		case <-cancel:
			return false
		case <-stop:
			return false
		}
	}
	return true
}

// Outbound is the flow-control state of one connection's outbound queue: its bytes and
// whether it is over its high watermark. Its owner guards it with its own lock (every
// method must be called with that lock held) and calls Grow after queuing and Shrink after
// writing.
type Outbound struct {
	// High is the high watermark in bytes (> 0); Low the low watermark (0 <= Low < High).
	High, Low int64
	// SlowAfter is how long the queue may stay over High without shrinking before the
	// owner's slow function is called (0: never).
	SlowAfter time.Duration

	bytes  int64
	over   bool
	resume chan struct{} // closed when the queue falls to Low (or the connection closes)
	timer  *time.Timer
	mark   int64 // bytes when the slow-consumer timer was last armed
	closed bool
	slow   func()
}

// NewOutbound returns the state of a queue with watermarks high and low (low is clamped
// into [0, high)); slow (may be nil) is called from a timer goroutine, without the owner's
// lock, when the queue stayed over high without shrinking for slowAfter.
func NewOutbound(high, low int64, slowAfter time.Duration, slow func()) *Outbound {
	if high <= 0 {
		high = 16 << 20
	}
	if low < 0 || low >= high {
		low = high / 2
	}
	return &Outbound{High: high, Low: low, SlowAfter: slowAfter, slow: slow}
}

// Bytes returns the bytes queued. Owner's lock held.
func (o *Outbound) Bytes() int64 { return o.bytes }

// Over reports whether the queue is over its high watermark and has not yet fallen back to
// the low one. Owner's lock held.
func (o *Outbound) Over() bool { return o.over }

// Grow records n more bytes queued; it reports whether this write made the queue congested.
// Owner's lock held.
func (o *Outbound) Grow(n int64) bool {
	o.bytes += n
	if o.over || o.closed || o.bytes <= o.High {
		return false
	}
	o.over = true
	o.resume = make(chan struct{})
	o.mark = o.bytes
	if o.SlowAfter > 0 && o.slow != nil {
		if o.timer == nil {
			o.timer = time.AfterFunc(o.SlowAfter, o.slow)
		} else {
			o.timer.Reset(o.SlowAfter)
		}
	}
	return true
}

// Shrink records n bytes written; it reports whether the queue fell to its low watermark
// (the producers waiting on it are released). Owner's lock held.
func (o *Outbound) Shrink(n int64) bool {
	o.bytes -= n
	if !o.over || o.bytes > o.Low {
		return false
	}
	o.release()
	return true
}

func (o *Outbound) release() {
	o.over = false
	close(o.resume)
	o.resume = nil
	if o.timer != nil {
		o.timer.Stop()
	}
}

// Congested returns nil when the queue is under its high watermark, else a channel closed
// when it falls to the low watermark or the connection closes. Owner's lock held.
func (o *Outbound) Congested() <-chan struct{} {
	if !o.over {
		return nil
	}
	return o.resume
}

// CheckSlow is what the owner's slow function calls (with the owner's lock held) when the
// timer fires: it reports true when the queue is still over its high watermark and has not
// shrunk since the timer was armed — a slow consumer. When it has shrunk (the client reads,
// only slowly) the timer is armed again from the current size.
func (o *Outbound) CheckSlow() bool {
	if !o.over || o.closed {
		return false
	}
	if o.bytes < o.mark {
		o.mark = o.bytes
		o.timer.Reset(o.SlowAfter)
		return false
	}
	return true
}

// Close ends flow control for a closed connection: waiting producers are released and the
// timer is stopped. Later Grow calls never congest. Owner's lock held; idempotent.
func (o *Outbound) Close() {
	if o.closed {
		return
	}
	o.closed = true
	if o.over {
		o.release()
	} else if o.timer != nil {
		o.timer.Stop()
	}
}
