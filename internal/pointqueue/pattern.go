// Package pointqueue is the queues pattern (DESIGN §2, §4; references 000 and 002):
// durable point-to-point delivery. Each message goes to one consumer (round-robin among
// those with credit) and stays until acknowledged; NACK and disconnect redeliver (after the
// redelivery delay), max-deliveries dead-letters, a ring size bounds the count by removing
// from the head, expires removes, delay schedules. Temp-queues (/temp-queue/) are queues of
// this kind too, owned by one connection.
//
// # Lifecycle
//
// A Queue arms one timer for its next scheduled or delayed message. Close stops every
// timer for good; nothing the pattern owns fires after Close returns.
//
// # Concurrency
//
// Everything exported is safe for concurrent use. Lock order: Queue.mu before
// delivery.Conn.mu; Pattern.mu is never held while taking either. No lock is held while
// calling the Retirer or Persister.
package pointqueue

import (
	"log/slog"
	"strconv"

	"github.com/titan-broker/titan/internal/address"
	"github.com/titan-broker/titan/internal/clock"
	"github.com/titan-broker/titan/internal/delivery"
	"github.com/titan-broker/titan/internal/dest"
	"github.com/titan-broker/titan/internal/dispatch"
	"github.com/titan-broker/titan/internal/frame"
	"github.com/titan-broker/titan/internal/lockorder"
	"github.com/titan-broker/titan/internal/message"
	"github.com/titan-broker/titan/internal/queue"
)

// Retirer is told (without locks held) about queue messages that were acknowledged or
// removed, so that their durable copies can be deleted (implemented by durable.Log).
type Retirer interface {
	// Retire may read acked and removed during the call only: the queue reuses them.
	Retire(id dest.Identity, acked []*message.Message, removed []queue.Removed)
}

// Persister durably stores a message the pattern itself publishes (a dead letter) before it
// is queued (implemented by durable.Log).
type Persister interface {
	Persist(id dest.Identity, m *message.Message) error
}

// Options configure a Pattern. Zero fields take the documented defaults.
type Options struct {
	// Clock tells the time and arms the queues' timers (default clock.Real).
	Clock clock.Clock
	// Retirer, when set, is told about retired messages.
	Retirer Retirer
	// Persister, when set, stores persistent dead letters before they are queued.
	Persister Persister
	// Logger receives the pattern's events; nil discards them.
	Logger *slog.Logger
}

// Pattern is the queues pattern: the queues' consumers and the factory of its queues
// (dest.PatternQueues and dest.PatternTempQueue). Create with New.
type Pattern struct {
	d    *dispatch.Dispatcher
	opts Options
	log  *slog.Logger

	mu      lockorder.Mutex[lockorder.QueuesPatternRank] // guards the fields below
	waiting map[dest.Identity][]*delivery.Subscription   // consumers by identity, also for identities without a queue yet
	closed  bool                                         // Close ran: new queues start stopped

	timers clock.Callbacks // running timer callbacks, waited for by Close
}

// New returns the queues pattern over d and registers its factory for queues (operator
// settings stored) and temp-queues.
func New(d *dispatch.Dispatcher, o Options) *Pattern {
	if o.Clock == nil {
		o.Clock = clock.Real
	}
	p := &Pattern{d: d, opts: o, log: o.Logger, waiting: make(map[dest.Identity][]*delivery.Subscription)}
	if p.log == nil {
		p.log = slog.New(slog.DiscardHandler)
	}
	d.Register(dest.PatternQueues, p, true)
	d.Register(dest.PatternTempQueue, p, false)
	return p
}

// NewQueue implements dispatch.Factory. The identity's waiting consumers become the new
// queue's consumers. Called with the Dispatcher's lock held.
func (p *Pattern) NewQueue(id dest.Identity, s address.Settings) dispatch.Queue {
	q := &Queue{
		id: id, clock: p.opts.Clock, now: clock.NowFunc(p.opts.Clock), p: p, settings: s,
		q:     queue.New(queue.Options{RingSize: s.RingSize, MaxDeliveries: s.MaxDeliveries, RedeliveryDelay: s.RedeliveryDelay}),
		space: make(chan struct{}),
	}
	p.mu.Lock()
	q.consumers = append(q.consumers, p.waiting[id]...)
	q.consumersChangedLocked() // q is not shared yet: its lock is not needed
	q.stopped = p.closed
	p.mu.Unlock()
	for _, sub := range q.consumers {
		sub.SetFeed(q)
	}
	return q
}

// Publish enqueues m on id's queue (created with the address settings when absent) under
// the address-full policy. A wait for room under PolicyBlock ends with dispatch.ErrCanceled
// when cancel closes or the dispatcher closes. dropped reports a PolicyDrop discard. Errors:
// dispatch.ErrQueueFull, dispatch.ErrQueuePaused, dispatch.ErrCanceled,
// dispatch.ErrQueueDeleted (deleted three times in a row while publishing).
func (p *Pattern) Publish(id dest.Identity, m *message.Message, cancel <-chan struct{}) (dropped bool, err error) {
	p.d.Published.Add(1)
	for range 3 {
		q, err := p.d.Get(id)
		if err != nil {
			return false, err
		}
		dropped, err = q.(*Queue).enqueue(m, dispatch.Wait{Cancel: cancel, Stop: p.d.Stop()})
		if err != dispatch.ErrQueueDeleted {
			return dropped, err
		}
	}
	return false, dispatch.ErrQueueDeleted
}

// Restore puts a recovered stored message back on its queue at start-up, bypassing the
// address-full policy (it was accepted before the restart). It counts as delivered once, so
// its next delivery carries redelivered:true (DESIGN §5). Scheduled messages keep their due
// time.
func (p *Pattern) Restore(id dest.Identity, m *message.Message) {
	q, err := p.d.Restore(id)
	if err != nil {
		return
	}
	q.(*Queue).restore(m)
}

// HonoursSelectors implements router.Selecting: a consumer with a selector receives only
// the messages it selects; the others stay for other consumers (Artemis semantics).
func (p *Pattern) HonoursSelectors() bool { return true }

// Subscribe registers sub (validated: no wildcards) on its connection and as a consumer of
// its identity's queue, now or once the queue exists. Errors:
// delivery.ErrDuplicateSubscription.
func (p *Pattern) Subscribe(sub *delivery.Subscription) error {
	sub.Owner = p
	if err := sub.Conn.Add(sub); err != nil {
		return err
	}
	id := sub.Identity()
	p.mu.Lock()
	p.waiting[id] = append(p.waiting[id], sub)
	p.mu.Unlock()
	if q, ok := p.d.Lookup(id); ok {
		pq := q.(*Queue)
		sub.SetFeed(pq)
		pq.addConsumer(sub)
	}
	return nil
}

// Detach implements delivery.Owner: sub stops consuming, and its unacknowledged messages go
// back to the head of their queues in reverse order of consumption (reference 002,
// "Messages in Delivery & Rollbacks").
func (p *Pattern) Detach(sub *delivery.Subscription, unacked []delivery.Unacked) {
	id := sub.Identity()
	p.mu.Lock()
	delivery.RemoveFromList(p.waiting, id, sub)
	p.mu.Unlock()
	var queues []*Queue
	var seqs [][]uint64
outer:
	for _, u := range unacked {
		q, ok := u.Source.(*Queue)
		if !ok {
			continue
		}
		for i, x := range queues {
			if x == q {
				seqs[i] = append(seqs[i], u.Seq)
				continue outer
			}
		}
		queues = append(queues, q)
		seqs = append(seqs, []uint64{u.Seq})
	}
	cur, _ := sub.Feed().(*Queue)
	if cur != nil {
		var mine []uint64
		for i, q := range queues {
			if q == cur {
				mine = seqs[i]
				queues[i] = nil
			}
		}
		cur.removeConsumer(sub, mine)
	}
	for i, q := range queues { // deliveries from a queue deleted and recreated since
		if q != nil {
			q.removeConsumer(sub, seqs[i])
		}
	}
}

// DropOwned deletes every temp-queue of the connection with session id (it closed):
// pending replies are discarded, as the queue lives only as long as its connection
// (RabbitMQ temp-queue semantics).
func (p *Pattern) DropOwned(session string) {
	p.d.DeleteWhere(dest.PatternTempQueue, session+".")
}

// Close stops every queue's timer for good (scheduled and delayed messages stay held, to be
// recovered from the store). After Close returns no timer of the pattern fires into the
// store. Idempotent.
func (p *Pattern) Close() {
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	p.timers.Close()
	for _, q := range p.d.Queues() {
		if pq, ok := q.(*Queue); ok {
			pq.stop()
		}
	}
}

// retire dead-letters, counts and forwards to the Retirer. No lock held.
func (p *Pattern) retire(q *Queue, acked []*message.Message, removed []queue.Removed) {
	for _, r := range removed {
		switch r.Reason {
		case queue.ReasonExpired:
			p.d.Expired.Add(1)
		case queue.ReasonMaxDeliveries:
			p.deadLetter(q, r.Msg)
		}
	}
	if p.opts.Retirer != nil {
		p.opts.Retirer.Retire(q.id, acked, removed)
	}
}

// deadLetter publishes a message that exhausted its deliveries to the queue's dead-letter
// destination (default /queue/DLQ.<channel>) with headers saying why. Messages already on a
// dead-letter queue are dropped rather than looped.
func (p *Pattern) deadLetter(q *Queue, qm *queue.Message) {
	m := qm.Value.(*message.Message)
	q.mu.Lock()
	target := q.settings.DeadLetter
	q.mu.Unlock()
	var id dest.Identity
	if target != "" {
		d, err := dest.Parse(target, dest.PatternQueues)
		if err != nil || d.Pattern != dest.PatternQueues {
			p.log.Warn("invalid dead-letter destination; message dropped", "queue", q.id.String(), "dead_letter", target)
			return
		}
		id = dest.IdentityOf(q.id.Group, d)
	} else {
		id = dest.Identity{Group: q.id.Group, Pattern: dest.PatternQueues, Channel: "DLQ." + q.id.Channel}
	}
	if id == q.id || len(q.id.Channel) > 4 && q.id.Channel[:4] == "DLQ." {
		p.log.Warn("dead letter from a dead-letter queue dropped", "queue", q.id.String())
		return
	}
	dl := &message.Message{
		ID: m.ID, Group: m.Group, Destination: id.Destination(), Body: m.Body,
		TimestampMs: m.TimestampMs, Persistent: m.Persistent,
		Headers: append(append(make([]frame.Header, 0, len(m.Headers)+3), m.Headers...),
			frame.Header{Key: "dlq-original-destination", Value: m.Destination},
			frame.Header{Key: "dlq-reason", Value: "max-deliveries"},
			frame.Header{Key: "dlq-delivery-count", Value: strconv.Itoa(int(qm.DeliveryCount))}),
	}
	if p.opts.Persister != nil && dl.Persistent {
		if err := p.opts.Persister.Persist(id, dl); err != nil {
			p.log.Error("dead letter not stored; it stays on its queue's store until restart", "queue", id.String(), "err", err)
			return
		}
	}
	if _, err := p.Publish(id, dl, nil); err != nil {
		p.log.Warn("dead letter refused", "queue", id.String(), "err", err)
		return
	}
	p.d.DeadLettered.Add(1)
}
