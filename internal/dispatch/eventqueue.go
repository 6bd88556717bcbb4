package dispatch

import (
	"sync"
	"sync/atomic"

	"github.com/titan-broker/titan/internal/dest"
	"github.com/titan-broker/titan/internal/message"
)

// EventQueue is the fanout-mode hand-off buffer of one events identity (reference 000's
// DispatcherQueue): a bounded FIFO drained by exactly one consumer goroutine, which exports
// each message to the subscriptions present at that moment. A message drained with no
// subscriber is dropped and counted; nothing is retained for later subscribers. An idle
// consumer ends and the next Enqueue starts a new one. Safe for concurrent use.
type EventQueue struct {
	id     dest.Identity
	engine *Engine

	mu       sync.Mutex // guards the fields below
	buf      []*message.Message
	bytes    int64
	settings QueueSettings
	paused   bool
	deleted  bool
	running  bool // a consumer goroutine is draining
	space    chan struct{}
	blocked  atomic.Int32 // producers waiting in admit for room

	Enqueued   atomic.Uint64
	Dispatched atomic.Uint64 // messages drained and exported
	NoSub      atomic.Uint64 // drained with no matching subscription (dropped)
	Dropped    atomic.Uint64 // refused by PolicyDrop
	Consumers  atomic.Int32  // 0 or 1: the draining consumer
}

func newEventQueue(id dest.Identity, s QueueSettings, e *Engine) *EventQueue {
	return &EventQueue{id: id, engine: e, settings: s, space: make(chan struct{})}
}

// dest.Identity returns the queue's identity.
func (q *EventQueue) Identity() dest.Identity { return q.id }

func (q *EventQueue) fullLocked(size int) bool {
	if q.paused {
		return true
	}
	if q.settings.Capacity > 0 && len(q.buf) >= q.settings.Capacity {
		return true
	}
	return q.settings.MaxPendingBytes > 0 && q.bytes > 0 && q.bytes+int64(size) > q.settings.MaxPendingBytes
}

// Enqueue adds m under the address-full policy and makes sure the consumer runs. Errors as
// PointQueue.Enqueue.
func (q *EventQueue) Enqueue(m *message.Message) (dropped bool, err error) {
	return q.enqueue(m, waitCancel{})
}

func (q *EventQueue) enqueue(m *message.Message, w waitCancel) (dropped bool, err error) {
	size := m.Size()
	q.mu.Lock()
	if dropped, err := admit(q, &q.mu, size, w); dropped || err != nil {
		return dropped, err
	}
	q.buf = append(q.buf, m)
	q.bytes += int64(size)
	q.Enqueued.Add(1)
	start := !q.running && !q.paused
	if start {
		q.running = true
	}
	q.mu.Unlock()
	if start {
		q.startConsumer()
	}
	return false, nil
}

func (q *EventQueue) startConsumer() {
	if !q.engine.goroutine("dispatch-consumer", q.drain) {
		q.mu.Lock()
		q.running = false
		q.mu.Unlock()
	}
}

// drain is the one consumer of this identity: it pops everything queued, exports it in FIFO
// order and exits when the queue is empty, paused or deleted.
func (q *EventQueue) drain() {
	q.Consumers.Store(1)
	defer q.Consumers.Store(0)
	var batch []*message.Message
	for {
		q.mu.Lock()
		if len(q.buf) == 0 || q.paused || q.deleted {
			q.running = false
			q.mu.Unlock()
			return
		}
		batch, q.buf = q.buf, batch[:0]
		for _, m := range batch {
			q.bytes -= int64(m.Size())
		}
		close(q.space)
		q.space = make(chan struct{})
		q.mu.Unlock()
		for i, m := range batch {
			if q.engine.fanout(q.id, m) == 0 {
				q.NoSub.Add(1)
			}
			q.Dispatched.Add(1)
			batch[i] = nil
		}
	}
}

// fullErrLocked says why an enqueue was refused: paused or full. q.mu held.
func (q *EventQueue) fullErrLocked() error {
	if q.paused {
		return ErrQueuePaused
	}
	return ErrQueueFull
}

func (q *EventQueue) deletedLocked() bool         { return q.deleted }
func (q *EventQueue) policyLocked() QueueSettings { return q.settings }
func (q *EventQueue) spaceLocked() chan struct{}  { return q.space }
func (q *EventQueue) countDrop()                  { q.Dropped.Add(1) }
func (q *EventQueue) blockedCount() *atomic.Int32 { return &q.blocked }
