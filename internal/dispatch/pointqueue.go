package dispatch

import (
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/titan-broker/titan/internal/dest"
	"github.com/titan-broker/titan/internal/message"
	"github.com/titan-broker/titan/internal/queue"
)

// Errors returned by queue operations.
var (
	// ErrQueueFull is returned by Publish when the queue is full under PolicyFail, or stayed
	// full (or paused) for the whole block timeout under PolicyBlock.
	ErrQueueFull = errors.New("dispatch: queue full")
	// ErrQueuePaused is returned by Publish when the queue stayed paused for the whole block
	// timeout, or at once under PolicyFail.
	ErrQueuePaused = errors.New("dispatch: queue paused")
	// ErrQueueDeleted is returned for operations on a queue that was deleted; a publisher
	// retries on the fresh queue the Dispatcher creates.
	ErrQueueDeleted = errors.New("dispatch: queue deleted")
	// ErrCanceled is returned by PublishUntil when the producer's wait for room ended because
	// its connection closed or the engine was closed.
	ErrCanceled = errors.New("dispatch: publish canceled")
	// ErrQueueNotEmpty is returned by Delete without force for a queue holding messages.
	ErrQueueNotEmpty = errors.New("dispatch: queue not empty")
	// ErrNoQueue is returned when no queue exists for an identity.
	ErrNoQueue = errors.New("dispatch: no such queue")
	// ErrUnknownAck is returned for an ACK or NACK naming no unacknowledged message.
	ErrUnknownAck = errors.New("dispatch: unknown ack id")
	// ErrDuplicateSubscription is returned for a SUBSCRIBE reusing an active id.
	ErrDuplicateSubscription = errors.New("dispatch: duplicate subscription id")
	// ErrUnknownSubscription is returned for an UNSUBSCRIBE naming no subscription.
	ErrUnknownSubscription = errors.New("dispatch: unknown subscription id")
	// ErrNotStored is returned when an events-store message or subscription needs the store
	// and none is configured (or the message was not persisted).
	ErrNotStored = errors.New("dispatch: events-store needs the store")
	// ErrTooManySubscriptions is returned when a connection exceeds its subscription limit.
	ErrTooManySubscriptions = errors.New("dispatch: too many subscriptions")
)

// retirer is told about messages a queue is done with, after its lock is released: acked
// ones (to delete from the store) and removed ones (ring, expiry, dead-letter).
type retirer interface {
	retire(q *PointQueue, acked []*message.Message, removed []queue.Removed)
}

// PointQueue is the queue of one queues-pattern identity: each message goes to one consumer
// (round-robin among those with credit) and stays until acknowledged. Safe for concurrent use.
type PointQueue struct {
	id  dest.Identity
	now func() time.Time
	ret retirer

	mu        sync.Mutex // guards every field below; taken before Conn.mu
	q         *queue.Queue
	settings  QueueSettings
	consumers []*Subscription
	rr        int
	seq       uint64
	paused    bool
	deleted   bool
	space     chan struct{} // closed and replaced when room appears, for blocked producers
	timer     *time.Timer
	timerAt   time.Time

	blocked atomic.Int32 // producers waiting in admit for room

	Enqueued   atomic.Uint64
	Dispatched atomic.Uint64
	Acked      atomic.Uint64
	Dropped    atomic.Uint64 // refused by PolicyDrop
	RemovedBy  [5]atomic.Uint64
}

func newPointQueue(id dest.Identity, s QueueSettings, now func() time.Time, ret retirer) *PointQueue {
	return &PointQueue{
		id: id, now: now, ret: ret, settings: s,
		q:     queue.New(queue.Options{RingSize: s.RingSize, MaxDeliveries: s.MaxDeliveries, RedeliveryDelay: s.RedeliveryDelay}),
		space: make(chan struct{}),
	}
}

// dest.Identity returns the queue's identity.
func (p *PointQueue) Identity() dest.Identity { return p.id }

// fullLocked reports whether a message of size bytes may not be enqueued now. p.mu held.
func (p *PointQueue) fullLocked(size int) bool {
	if p.paused {
		return true
	}
	if p.settings.RingSize > 0 {
		return false // a ring never refuses (reference 002)
	}
	c := p.q.Counts()
	if p.settings.Capacity > 0 && c.Messages >= p.settings.Capacity {
		return true
	}
	return p.settings.MaxPendingBytes > 0 && c.Bytes > 0 && c.Bytes+int64(size) > p.settings.MaxPendingBytes
}

// Enqueue adds m, applying the address-full policy. It returns dropped=true when PolicyDrop
// discarded it, ErrQueueFull when it was refused, ErrQueueDeleted when the queue was deleted.
func (p *PointQueue) Enqueue(m *message.Message) (dropped bool, err error) {
	return p.enqueue(m, waitCancel{})
}

func (p *PointQueue) enqueue(m *message.Message, w waitCancel) (dropped bool, err error) {
	size := m.Size()
	p.mu.Lock()
	if dropped, err := admit(p, &p.mu, size, w); dropped || err != nil {
		return dropped, err
	}
	p.enqueueAndUnlock(m, size, 0)
	return false, nil
}

// restore enqueues a recovered message without admission checks (see Engine.Restore). It
// counts as delivered once: nobody knows whether it was before the restart.
func (p *PointQueue) restore(m *message.Message) {
	p.mu.Lock()
	p.enqueueAndUnlock(m, m.Size(), 1)
}

// enqueueAndUnlock adds m to the queue, dispatches, releases p.mu and retires what the ring
// or dispatch removed. p.mu held on entry.
func (p *PointQueue) enqueueAndUnlock(m *message.Message, size, deliveryCount int) {
	now := p.now()
	p.seq++
	qm := &queue.Message{Seq: p.seq, Size: size, Value: m, DeliveryCount: deliveryCount}
	if m.DeliverAtMs > 0 {
		qm.DeliverAt = time.UnixMilli(m.DeliverAtMs)
	}
	if m.ExpiresMs > 0 {
		qm.ExpiresAt = time.UnixMilli(m.ExpiresMs)
	}
	removed := cloneRemoved(p.q.Enqueue(qm, now))
	p.Enqueued.Add(1)
	acked, removed := p.dispatchLocked(now, nil, removed)
	p.mu.Unlock()
	p.finish(acked, removed)
}

func cloneRemoved(r []queue.Removed) []queue.Removed {
	if len(r) == 0 {
		return nil
	}
	return append([]queue.Removed(nil), r...)
}

// finish hands retired messages to the retirer and counts removals. No lock held.
func (p *PointQueue) finish(acked []*message.Message, removed []queue.Removed) {
	for _, r := range removed {
		if int(r.Reason) < len(p.RemovedBy) {
			p.RemovedBy[r.Reason].Add(1)
		}
	}
	if len(acked) > 0 {
		p.Acked.Add(uint64(len(acked)))
	}
	if (len(acked) > 0 || len(removed) > 0) && p.blocked.Load() > 0 {
		p.signalSpace() // a blocked producer may go on now
	}
	if p.ret != nil && (len(acked) > 0 || len(removed) > 0) {
		p.ret.retire(p, acked, removed)
	}
}

func (p *PointQueue) signalSpace() {
	p.mu.Lock()
	close(p.space)
	p.space = make(chan struct{})
	p.mu.Unlock()
}

// dispatchLocked hands ready messages to consumers with credit, round-robin, and returns
// what it retired (auto-acked and removed messages) appended to acked and removed; the caller
// passes them to finish after releasing p.mu. p.mu held.
func (p *PointQueue) dispatchLocked(now time.Time, acked []*message.Message, removed []queue.Removed) ([]*message.Message, []queue.Removed) {
	for len(p.consumers) > 0 {
		var sub *Subscription
		next := p.rr
		n := len(p.consumers)
		for i := 0; i < n; i++ {
			s := p.consumers[(p.rr+i)%n]
			if s.hasCredit() {
				sub = s
				next = (p.rr + i + 1) % n
				break
			}
		}
		if sub == nil {
			break
		}
		qm, rem := p.q.Pop(now)
		removed = append(removed, rem...)
		if qm == nil {
			break // nothing ready: the cursor stays, so the next message goes to sub
		}
		p.rr = next
		m := qm.Value.(*message.Message)
		if !sub.Conn.deliver(sub, m, p, qm.Seq, qm.DeliveryCount) {
			qm.DeliveryCount-- // not delivered after all
			removed = append(removed, p.q.Cancel([]uint64{qm.Seq}, now)...)
			continue
		}
		p.Dispatched.Add(1)
		if sub.Ack == AckAuto {
			if am, ok := p.q.Ack(qm.Seq); ok {
				acked = append(acked, am.Value.(*message.Message))
			}
		}
	}
	p.armTimerLocked(now)
	return acked, removed
}

// armTimerLocked schedules a wake-up for the next scheduled message. p.mu held.
func (p *PointQueue) armTimerLocked(now time.Time) {
	due, ok := p.q.NextDue()
	if !ok || p.deleted {
		return
	}
	if p.timer != nil && !p.timerAt.After(due) && p.timerAt.After(now) {
		return
	}
	if p.timer != nil {
		p.timer.Stop()
	}
	p.timerAt = due
	p.timer = time.AfterFunc(due.Sub(now), p.Kick)
}

// Kick promotes due messages and dispatches to consumers with credit.
func (p *PointQueue) Kick() {
	p.mu.Lock()
	if p.deleted {
		p.mu.Unlock()
		return
	}
	now := p.now()
	acked, removed := p.dispatchLocked(now, nil, cloneRemoved(p.q.Promote(now)))
	p.mu.Unlock()
	p.finish(acked, removed)
}

func (p *PointQueue) addConsumer(s *Subscription) {
	p.mu.Lock()
	p.consumers = append(p.consumers, s)
	acked, removed := p.dispatchLocked(p.now(), nil, nil)
	p.mu.Unlock()
	p.finish(acked, removed)
}

// removeConsumer detaches s and cancels its unacknowledged messages back to the head in
// reverse order of consumption (reference 002, "Messages in Delivery & Rollbacks").
func (p *PointQueue) removeConsumer(s *Subscription, seqs []uint64) {
	p.mu.Lock()
	for i, c := range p.consumers {
		if c == s {
			p.consumers = append(p.consumers[:i], p.consumers[i+1:]...)
			break
		}
	}
	if p.rr >= len(p.consumers) {
		p.rr = 0
	}
	now := p.now()
	var removed []queue.Removed
	if len(seqs) > 0 && !p.deleted {
		removed = cloneRemoved(p.q.Cancel(seqs, now))
	}
	acked, removed := p.dispatchLocked(now, nil, removed)
	p.mu.Unlock()
	p.finish(acked, removed)
}

func (p *PointQueue) ack(seqs []uint64) {
	p.mu.Lock()
	var acked []*message.Message
	for _, s := range seqs {
		if m, ok := p.q.Ack(s); ok {
			acked = append(acked, m.Value.(*message.Message))
		}
	}
	acked, removed := p.dispatchLocked(p.now(), acked, nil)
	p.mu.Unlock()
	p.finish(acked, removed)
}

func (p *PointQueue) nack(seqs []uint64) {
	p.mu.Lock()
	now := p.now()
	var removed []queue.Removed
	for _, s := range seqs {
		removed = append(removed, p.q.Nack(s, now)...)
	}
	acked, removed := p.dispatchLocked(now, nil, removed)
	p.mu.Unlock()
	p.finish(acked, removed)
}

// fullErrLocked says why an enqueue was refused: paused or full. p.mu held.
func (p *PointQueue) fullErrLocked() error {
	if p.paused {
		return ErrQueuePaused
	}
	return ErrQueueFull
}

func (p *PointQueue) deletedLocked() bool         { return p.deleted }
func (p *PointQueue) policyLocked() QueueSettings { return p.settings }
func (p *PointQueue) spaceLocked() chan struct{}  { return p.space }
func (p *PointQueue) countDrop()                  { p.Dropped.Add(1) }
func (p *PointQueue) blockedCount() *atomic.Int32 { return &p.blocked }
