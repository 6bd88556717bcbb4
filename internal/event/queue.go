package event

import (
	"sync/atomic"
	"time"

	"github.com/titan-broker/titan/internal/address"
	"github.com/titan-broker/titan/internal/dest"
	"github.com/titan-broker/titan/internal/dispatch"
	"github.com/titan-broker/titan/internal/lockorder"
	"github.com/titan-broker/titan/internal/message"
)

// Queue is the fanout-mode hand-off buffer of one events identity (reference 000's
// DispatcherQueue): a bounded FIFO drained by exactly one consumer goroutine, which exports
// each message to the subscriptions present at that moment. A message drained with no
// subscriber is dropped and counted; nothing is retained for later subscribers. The consumer
// stays for Options.ConsumerLinger after the queue empties, woken by the next Enqueue, so that a
// destination with steady traffic keeps one goroutine; it ends after that idle time (an
// idle destination holds no goroutine), when the queue is paused or deleted, and when the
// dispatcher closes (it never outlives the broker's shutdown). Safe for concurrent use.
type Queue struct {
	id dest.Identity
	p  *Pattern

	mu       lockorder.Mutex[lockorder.QueueRank] // guards the fields below
	buf      []*message.Message
	bytes    int64
	settings address.Settings
	paused   bool
	deleted  bool
	running  bool          // a consumer goroutine is draining or lingering
	idle     bool          // the consumer waits on wake for more messages
	wake     chan struct{} // buffered 1: Enqueue's signal to a lingering consumer
	space    chan struct{}
	blocked  atomic.Int32 // producers waiting in admit for room

	Enqueued   atomic.Uint64
	Dispatched atomic.Uint64 // messages drained and exported
	NoSub      atomic.Uint64 // drained with no matching subscription (dropped)
	Dropped    atomic.Uint64 // refused by PolicyDrop
	Consumers  atomic.Int32  // 0 or 1: the draining consumer
}

// Identity returns the queue's identity.
func (q *Queue) Identity() dest.Identity { return q.id }

// FullLocked implements dispatch.Admission. q.mu held.
func (q *Queue) FullLocked(size int) bool {
	if q.paused {
		return true
	}
	if q.settings.Capacity > 0 && len(q.buf) >= q.settings.Capacity {
		return true
	}
	return q.settings.MaxPendingBytes > 0 && q.bytes > 0 && q.bytes+int64(size) > q.settings.MaxPendingBytes
}

func (q *Queue) enqueue(m *message.Message, w dispatch.Wait) (dropped bool, err error) {
	size := m.Size()
	q.mu.Lock()
	if dropped, err := dispatch.Admit(q, &q.mu, size, w); dropped || err != nil {
		return dropped, err
	}
	q.buf = append(q.buf, m)
	q.bytes += int64(size)
	q.Enqueued.Add(1)
	start, wake := q.wantConsumerLocked()
	q.mu.Unlock()
	if start {
		q.startConsumer()
	} else if wake {
		q.signal()
	}
	return false, nil
}

// signal wakes a lingering consumer (a pending signal is enough).
func (q *Queue) signal() {
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

// wantConsumerLocked reports, for a queue with messages, whether a consumer must be started
// or a lingering one woken, and records it. q.mu held.
func (q *Queue) wantConsumerLocked() (start, wake bool) {
	switch {
	case q.paused || len(q.buf) == 0:
	case !q.running:
		q.running, start = true, true
	case q.idle:
		q.idle, wake = false, true
	}
	return start, wake
}

// DefaultConsumerLinger is how long a fanout-mode consumer waits for more messages once its
// queue is empty before it ends (Options.ConsumerLinger).
const DefaultConsumerLinger = 100 * time.Millisecond

func (q *Queue) startConsumer() {
	if !q.p.goroutine("events-consumer", q.drain) {
		q.mu.Lock()
		q.running = false
		q.mu.Unlock()
	}
}

// drain is the one consumer of this identity: it pops everything queued and exports it in
// FIFO order; when the queue is empty it lingers (see Queue). It exits when the queue is
// paused or deleted, when it stayed empty for Options.ConsumerLinger, and once the dispatcher closed
// and the queue is empty.
func (q *Queue) drain() {
	q.Consumers.Store(1)
	defer q.Consumers.Store(0)
	var (
		batch []*message.Message
		timer *time.Timer
	)
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	stop := q.p.d.Stop()
	for {
		q.mu.Lock()
		if q.paused || q.deleted {
			q.running, q.idle = false, false
			q.mu.Unlock()
			return
		}
		if len(q.buf) == 0 {
			if !q.linger(&timer, stop) {
				return
			}
			continue
		}
		batch, q.buf = q.buf, batch[:0]
		for _, m := range batch {
			q.bytes -= int64(m.Size())
		}
		if q.blocked.Load() > 0 { // producers wait for room (they count under q.mu)
			close(q.space)
			q.space = make(chan struct{})
		}
		q.mu.Unlock()
		for i, m := range batch {
			if q.p.fanout(q.id, m) == 0 {
				q.NoSub.Add(1)
			}
			q.Dispatched.Add(1)
			batch[i] = nil
		}
	}
}

// linger waits, with q.mu held on entry and released, for Enqueue's wake, the idle timeout
// or the dispatcher's stop. It reports whether the consumer goes on; when it does not, it
// has recorded that none runs.
func (q *Queue) linger(timer **time.Timer, stop <-chan struct{}) bool {
	select {
	case <-stop:
		q.running, q.idle = false, false
		q.mu.Unlock()
		return false
	default:
	}
	q.idle = true
	q.mu.Unlock()
	if *timer == nil {
		*timer = time.NewTimer(q.p.opts.ConsumerLinger)
	} else {
		(*timer).Reset(q.p.opts.ConsumerLinger)
	}
	select {
	case <-q.wake:
		return true
	case <-(*timer).C:
	case <-stop:
	}
	q.mu.Lock()
	if len(q.buf) > 0 && !q.paused && !q.deleted {
		q.idle = false // an Enqueue raced the timeout: its wake, if sent, is harmless
		q.mu.Unlock()
		return true
	}
	q.running, q.idle = false, false
	q.mu.Unlock()
	return false
}

// FullErrLocked implements dispatch.Admission: paused or full. q.mu held.
func (q *Queue) FullErrLocked() error {
	if q.paused {
		return dispatch.ErrQueuePaused
	}
	return dispatch.ErrQueueFull
}

// DeletedLocked implements dispatch.Admission.
func (q *Queue) DeletedLocked() bool { return q.deleted }

// PolicyLocked implements dispatch.Admission.
func (q *Queue) PolicyLocked() address.Settings { return q.settings }

// SpaceLocked implements dispatch.Admission.
func (q *Queue) SpaceLocked() chan struct{} { return q.space }

// CountDrop implements dispatch.Admission.
func (q *Queue) CountDrop() { q.Dropped.Add(1) }

// BlockedCount implements dispatch.Admission.
func (q *Queue) BlockedCount() *atomic.Int32 { return &q.blocked }

// Stats implements dispatch.Queue.
func (q *Queue) Stats() dispatch.QueueStats {
	q.mu.Lock()
	st := dispatch.QueueStats{
		Group: q.id.Group, Destination: q.id.Destination(), Pattern: q.id.Pattern.String(),
		Messages: len(q.buf), PendingBytes: q.bytes, Paused: q.paused, Settings: q.settings,
	}
	q.mu.Unlock()
	st.Consumers = int(q.Consumers.Load())
	st.Enqueued, st.Dispatched = q.Enqueued.Load(), q.Dispatched.Load()
	st.Dropped = q.Dropped.Load() + q.NoSub.Load()
	return st
}

// SetPaused implements dispatch.Queue; resuming restarts the consumer when messages wait.
func (q *Queue) SetPaused(paused bool) {
	q.mu.Lock()
	q.paused = paused
	close(q.space)
	q.space = make(chan struct{})
	start, wake := q.wantConsumerLocked()
	if paused && q.idle {
		q.idle, wake = false, true // the lingering consumer ends now
	}
	q.mu.Unlock()
	if start {
		q.startConsumer()
	} else if wake {
		q.signal()
	}
}

// SetRingSize implements dispatch.Queue: an events queue has no ring (dispatch.ErrNoQueue).
func (q *Queue) SetRingSize(int) (address.Settings, error) {
	return address.Settings{}, dispatch.ErrNoQueue
}

// Purge implements dispatch.Queue: buffered messages are discarded and the consumer ends.
func (q *Queue) Purge() {
	q.mu.Lock()
	if !q.deleted {
		q.p.queues.Add(-1)
	}
	wake := q.idle
	q.idle = false
	q.deleted = true
	q.buf = nil
	q.bytes = 0
	close(q.space)
	q.space = make(chan struct{})
	q.mu.Unlock()
	if wake {
		q.signal() // the lingering consumer ends now
	}
}
