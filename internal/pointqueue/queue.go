package pointqueue

import (
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/titan-broker/titan/internal/address"
	"github.com/titan-broker/titan/internal/clock"
	"github.com/titan-broker/titan/internal/delivery"
	"github.com/titan-broker/titan/internal/dest"
	"github.com/titan-broker/titan/internal/dispatch"
	"github.com/titan-broker/titan/internal/lockorder"
	"github.com/titan-broker/titan/internal/message"
	"github.com/titan-broker/titan/internal/queue"
)

// Queue is the queue of one queues-pattern identity: each message goes to one consumer
// (round-robin among those with credit) and stays until acknowledged. Safe for concurrent use.
type Queue struct {
	id    dest.Identity
	clock clock.Clock      // arms the scheduling timer
	now   func() time.Time // clock.NowFunc(clock)
	p     *Pattern

	mu        lockorder.Mutex[lockorder.QueueRank] // guards every field below; taken before Conn.mu
	q         *queue.Queue
	settings  address.Settings
	consumers []*delivery.Subscription
	rr        int
	seq       uint64
	paused    bool
	deleted   bool
	space     chan struct{} // closed and replaced when room appears, for blocked producers
	timer     clock.Timer
	timerAt   time.Time
	stopped   bool // the pattern closed: no timer is armed again
	// timed is set once a message with a DeliverAt or an ExpiresAt was enqueued or a message
	// was nacked (a redelivery delay schedules it): until then nothing in q depends on the
	// time, so enqueue does not read the clock (one clock read per message less).
	timed bool
	// free holds queue.Messages that auto-acknowledged deliveries gave back (the queue keeps
	// no reference to a message it returned from Ack), for the next enqueues: a busy queue
	// with auto-ack consumers then allocates no wrapper per message. At most maxFree.
	free []*queue.Message
	// pick, picked and pickedNext are dispatchSelectiveLocked's consumer choice: pick is
	// made once per queue (a method value allocates) and records in picked the consumer it
	// accepted a message for and in pickedNext the round-robin cursor after it.
	pick       func(*queue.Message) bool
	picked     *delivery.Subscription
	pickedNext int
	// selGen numbers the current set of consumers (bumped on every add and remove; 0 is
	// never current). pickLocked sets a ready message's queue.Message.Mark to it when no
	// consumer of the set selects the message, whatever their credit, so later walks pass
	// it without evaluating a selector until the set changes. (After 2^32 changes a stale
	// mark could match again; a queue would need that many SUBSCRIBEs while one message
	// waits.)
	selGen uint32
	// selective is whether some consumer has a selector (dispatchSelectiveLocked), kept
	// with the set by consumersChangedLocked rather than looked for on every dispatch.
	selective bool

	blocked atomic.Int32 // producers waiting in admit for room

	Enqueued   atomic.Uint64
	Dispatched atomic.Uint64
	Acked      atomic.Uint64
	Dropped    atomic.Uint64 // refused by PolicyDrop
	RemovedBy  [5]atomic.Uint64
}

// Identity returns the queue's identity.
func (p *Queue) Identity() dest.Identity { return p.id }

// FullLocked implements dispatch.Admission. p.mu held.
func (p *Queue) FullLocked(size int) bool {
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

func (p *Queue) enqueue(m *message.Message, w dispatch.Wait) (dropped bool, err error) {
	size := queue.ClampSize(m.Size()) // admitted as counted: the queue keeps an int32
	p.mu.Lock()
	if dropped, err := dispatch.Admit(p, &p.mu, int(size), w); dropped || err != nil {
		return dropped, err
	}
	p.enqueueAndUnlock(m, size, 0)
	return false, nil
}

// restore enqueues a recovered message without admission checks (see Pattern.Restore). It
// counts as delivered once: nobody knows whether it was before the restart.
func (p *Queue) restore(m *message.Message) {
	p.mu.Lock()
	p.enqueueAndUnlock(m, queue.ClampSize(m.Size()), 1)
}

// enqueueAndUnlock adds m to the queue, dispatches, releases p.mu and retires what the ring
// or dispatch removed. p.mu held on entry.
func (p *Queue) enqueueAndUnlock(m *message.Message, size, deliveryCount int32) {
	if m.DeliverAtMs > 0 || m.ExpiresMs > 0 {
		p.timed = true
	}
	var now time.Time // zero while nothing is timed: Enqueue, Pop and armTimerLocked then ignore it
	if p.timed {
		now = p.now()
	}
	p.seq++
	var qm *queue.Message
	if n := len(p.free); n > 0 {
		qm, p.free = p.free[n-1], p.free[:n-1]
		*qm = queue.Message{Seq: p.seq, Size: size, Value: m, DeliveryCount: deliveryCount, Priority: m.Priority()}
	} else {
		qm = &queue.Message{Seq: p.seq, Size: size, Value: m, DeliveryCount: deliveryCount, Priority: m.Priority()}
	}
	if m.DeliverAtMs > 0 {
		qm.DeliverAt = time.UnixMilli(m.DeliverAtMs)
	}
	if m.ExpiresMs > 0 {
		qm.ExpiresAt = time.UnixMilli(m.ExpiresMs)
	}
	removed := cloneRemoved(p.q.Enqueue(qm, now))
	p.Enqueued.Add(1)
	bp := ackedBufs.Get().(*[]*message.Message)
	acked, removed := p.dispatchLocked(now, (*bp)[:0], removed)
	p.mu.Unlock()
	p.finish(acked, removed)
	putAcked(bp, acked)
}

// maxFree bounds Queue.free.
const maxFree = 64

// ackedBufs holds the slices enqueueAndUnlock and ack collect acknowledged messages in: the Retirer
// reads them during the call and keeps none, so a slice is free again once finish returns.
var ackedBufs = sync.Pool{New: func() any { s := make([]*message.Message, 0, 8); return &s }}

// putAcked returns acked (grown from *bp) to ackedBufs, cleared so that it keeps no message.
func putAcked(bp *[]*message.Message, acked []*message.Message) {
	if cap(acked) > 1024 {
		return
	}
	clear(acked)
	*bp = acked[:0]
	ackedBufs.Put(bp)
}

func cloneRemoved(r []queue.Removed) []queue.Removed {
	if len(r) == 0 {
		return nil
	}
	return append([]queue.Removed(nil), r...)
}

// finish hands retired messages to the retirer and counts removals. No lock held.
func (p *Queue) finish(acked []*message.Message, removed []queue.Removed) {
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
	if len(acked) > 0 || len(removed) > 0 {
		p.p.retire(p, acked, removed)
	}
}

func (p *Queue) signalSpace() {
	p.mu.Lock()
	close(p.space)
	p.space = make(chan struct{})
	p.mu.Unlock()
}

// dispatchLocked hands ready messages to consumers with credit, round-robin, and returns
// what it retired (auto-acked and removed messages) appended to acked and removed; the caller
// passes them to finish after releasing p.mu. When a consumer has a selector, each message
// goes to the next consumer in round-robin order with credit whose selector selects it, and
// a message none selects stays in place for later consumers (dispatchSelectiveLocked).
// p.mu held.
func (p *Queue) dispatchLocked(now time.Time, acked []*message.Message, removed []queue.Removed) ([]*message.Message, []queue.Removed) {
	if p.selective {
		return p.dispatchSelectiveLocked(now, acked, removed)
	}
	for len(p.consumers) > 0 {
		var sub *delivery.Subscription
		next := p.rr
		n := len(p.consumers)
		for i := 0; i < n; i++ {
			s := p.consumers[(p.rr+i)%n]
			if s.HasCredit() {
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
		if !sub.Conn.Deliver(sub, m, p, qm.Seq, int(qm.DeliveryCount)) {
			qm.Undelivered() // not delivered after all
			removed = append(removed, p.q.Cancel([]uint64{qm.Seq}, now)...)
			continue
		}
		acked = p.deliveredLocked(sub, qm, acked)
	}
	p.armTimerLocked(now)
	return acked, removed
}

// deliveredLocked counts a delivered message and, for an auto-ack consumer, acknowledges it
// at once, appending it to acked. p.mu held.
func (p *Queue) deliveredLocked(sub *delivery.Subscription, qm *queue.Message, acked []*message.Message) []*message.Message {
	p.Dispatched.Add(1)
	if sub.Ack == delivery.AckAuto {
		if am, ok := p.q.Ack(qm.Seq); ok {
			acked = append(acked, am.Value.(*message.Message))
			if len(p.free) < maxFree { // nothing refers to am any more: reuse it
				*am = queue.Message{}
				p.free = append(p.free, am)
			}
		}
	}
	return acked
}

// dispatchSelectiveLocked is dispatchLocked when some consumer has a JMS selector (Artemis
// semantics): the ready messages are walked in delivery order (priority, then FIFO), each
// goes to the first consumer from the round-robin cursor that has credit and selects it,
// and a message that no consumer with credit selects keeps its place, so nothing is lost,
// reordered or kept from a consumer that would take it. A walk stops when no consumer has
// credit. One call walks the ready list once, however many messages it delivers: a message
// passed had no consumer with credit selecting it, and its deliveries only take credit
// away (credit an ACK frees meanwhile comes with that ACK's own dispatch, which walks from
// the head). Messages no consumer selects are passed again by every later call, as in
// Artemis. p.mu held.
func (p *Queue) dispatchSelectiveLocked(now time.Time, acked []*message.Message, removed []queue.Removed) ([]*message.Message, []queue.Removed) {
	if p.pick == nil {
		p.pick = p.pickLocked
	}
	var cur queue.Cursor // one walk over the ready list for all the deliveries of this call
	for {
		credit := false
		for _, c := range p.consumers {
			if c.HasCredit() {
				credit = true
				break
			}
		}
		if !credit {
			break
		}
		qm, rem := p.q.PopFuncFrom(&cur, now, p.pick)
		removed = append(removed, rem...)
		if qm == nil {
			break // nothing ready that a consumer with credit selects
		}
		sub := p.picked
		p.picked = nil
		p.rr = p.pickedNext
		m := qm.Value.(*message.Message)
		if !sub.Conn.Deliver(sub, m, p, qm.Seq, int(qm.DeliveryCount)) {
			qm.Undelivered() // not delivered after all
			removed = append(removed, p.q.Cancel([]uint64{qm.Seq}, now)...)
			cur = queue.Cursor{} // back at the head of its priority
			continue
		}
		acked = p.deliveredLocked(sub, qm, acked)
	}
	p.armTimerLocked(now)
	return acked, removed
}

// pickLocked is PopFunc's pick for dispatchSelectiveLocked: it accepts qm when a consumer,
// from the round-robin cursor on, has credit and selects it, and records that consumer.
// A message no consumer selects is marked with selGen and passed at once until the set of
// consumers changes. p.mu held.
func (p *Queue) pickLocked(qm *queue.Message) bool {
	if qm.Mark == p.selGen {
		return false // no consumer of this set selects it
	}
	m := qm.Value.(*message.Message)
	n := len(p.consumers)
	selected := false
	for i := 0; i < n; i++ {
		s := p.consumers[(p.rr+i)%n]
		if !s.Selects(m) {
			continue
		}
		selected = true
		if s.HasCredit() {
			p.picked, p.pickedNext = s, (p.rr+i+1)%n
			return true
		}
	}
	if !selected {
		qm.Mark = p.selGen
	}
	return false
}

// consumersChangedLocked starts a new consumer-set generation, after every change to
// p.consumers: marks of the old one no longer hold, and selective is found again. p.mu
// held.
func (p *Queue) consumersChangedLocked() {
	p.selGen++
	if p.selGen == 0 {
		p.selGen = 1
	}
	p.selective = slices.ContainsFunc(p.consumers, func(c *delivery.Subscription) bool { return c.Selector != nil })
}

// armTimerLocked schedules a wake-up for the next scheduled message. p.mu held.
func (p *Queue) armTimerLocked(now time.Time) {
	due, ok := p.q.NextDue()
	if !ok || p.deleted || p.stopped {
		return
	}
	if p.timer != nil && !p.timerAt.After(due) && p.timerAt.After(now) {
		return
	}
	if p.timer != nil {
		p.timer.Stop()
	}
	p.timerAt = due
	p.timer = p.clock.AfterFunc(due.Sub(now), p.timerFired)
}

// timerFired is the scheduling timer's callback: a Kick, unless the pattern closed. The
// pattern's Close waits for a callback already running.
func (p *Queue) timerFired() {
	if !p.p.timers.Enter() {
		return
	}
	defer p.p.timers.Leave()
	p.Kick()
}

// Kick promotes due messages and dispatches to consumers with credit.
func (p *Queue) Kick() {
	p.mu.Lock()
	if p.deleted || p.stopped {
		p.mu.Unlock()
		return
	}
	now := p.now()
	acked, removed := p.dispatchLocked(now, nil, cloneRemoved(p.q.Promote(now)))
	p.mu.Unlock()
	p.finish(acked, removed)
}

// addConsumer adds s (once: a subscription may be found both by the factory and by its
// Subscribe) and dispatches to it.
func (p *Queue) addConsumer(s *delivery.Subscription) {
	p.mu.Lock()
	for _, c := range p.consumers {
		if c == s {
			p.mu.Unlock()
			return
		}
	}
	p.consumers = append(p.consumers, s)
	p.consumersChangedLocked()
	acked, removed := p.dispatchLocked(p.now(), nil, nil)
	p.mu.Unlock()
	p.finish(acked, removed)
}

// removeConsumer detaches s and cancels its unacknowledged messages back to the head in
// reverse order of consumption (reference 002, "Messages in Delivery & Rollbacks").
func (p *Queue) removeConsumer(s *delivery.Subscription, seqs []uint64) {
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
	p.consumersChangedLocked()
	now := p.now()
	var removed []queue.Removed
	if len(seqs) > 0 && !p.deleted {
		removed = cloneRemoved(p.q.Cancel(seqs, now))
	}
	acked, removed := p.dispatchLocked(now, nil, removed)
	p.mu.Unlock()
	p.finish(acked, removed)
}

func (p *Queue) ack(seqs []uint64) {
	p.mu.Lock()
	bp := ackedBufs.Get().(*[]*message.Message)
	acked := (*bp)[:0]
	for _, s := range seqs {
		if m, ok := p.q.Ack(s); ok {
			acked = append(acked, m.Value.(*message.Message))
		}
	}
	acked, removed := p.dispatchLocked(p.now(), acked, nil)
	p.mu.Unlock()
	p.finish(acked, removed)
	putAcked(bp, acked)
}

func (p *Queue) nack(seqs []uint64) {
	p.mu.Lock()
	p.timed = true // a redelivery delay schedules the message
	now := p.now()
	var removed []queue.Removed
	for _, s := range seqs {
		removed = append(removed, p.q.Nack(s, now)...)
	}
	acked, removed := p.dispatchLocked(now, nil, removed)
	p.mu.Unlock()
	p.finish(acked, removed)
}

// Settle implements delivery.Source: an ACK or NACK of seqs. A NACKed message is redelivered
// (after the redelivery delay) or dead-lettered after max-deliveries.
func (p *Queue) Settle(seqs []uint64, nack bool) {
	if nack {
		p.nack(seqs)
	} else {
		p.ack(seqs)
	}
}

// SettleOne implements delivery.Source for one sequence.
func (p *Queue) SettleOne(seq uint64, nack bool) {
	seqs := [1]uint64{seq}
	p.Settle(seqs[:], nack)
}

// FullErrLocked implements dispatch.Admission: paused or full. p.mu held.
func (p *Queue) FullErrLocked() error {
	if p.paused {
		return dispatch.ErrQueuePaused
	}
	return dispatch.ErrQueueFull
}

// DeletedLocked implements dispatch.Admission.
func (p *Queue) DeletedLocked() bool { return p.deleted }

// PolicyLocked implements dispatch.Admission.
func (p *Queue) PolicyLocked() address.Settings { return p.settings }

// SpaceLocked implements dispatch.Admission.
func (p *Queue) SpaceLocked() chan struct{} { return p.space }

// CountDrop implements dispatch.Admission.
func (p *Queue) CountDrop() { p.Dropped.Add(1) }

// BlockedCount implements dispatch.Admission.
func (p *Queue) BlockedCount() *atomic.Int32 { return &p.blocked }

// Stats implements dispatch.Queue.
func (p *Queue) Stats() dispatch.QueueStats {
	p.mu.Lock()
	c := p.q.Counts()
	st := dispatch.QueueStats{
		Group: p.id.Group, Destination: p.id.Destination(), Pattern: p.id.Pattern.String(),
		Messages: c.Messages, Delivering: c.Delivering, Scheduled: c.Scheduled, PendingBytes: c.Bytes,
		Consumers: len(p.consumers), Paused: p.paused, Settings: p.settings,
	}
	st.Settings.RingSize = p.q.RingSize()
	p.mu.Unlock()
	st.Enqueued, st.Dispatched, st.Acked = p.Enqueued.Load(), p.Dispatched.Load(), p.Acked.Load()
	st.Dropped = p.Dropped.Load()
	st.RingRemoved = p.RemovedBy[queue.ReasonRing].Load()
	st.Expired = p.RemovedBy[queue.ReasonExpired].Load()
	st.DeadLettered = p.RemovedBy[queue.ReasonMaxDeliveries].Load()
	return st
}

// SetPaused implements dispatch.Queue.
func (p *Queue) SetPaused(paused bool) {
	p.mu.Lock()
	p.paused = paused
	close(p.space)
	p.space = make(chan struct{})
	p.mu.Unlock()
}

// SetRingSize implements dispatch.Queue (reference 002: lowering it removes nothing at
// once, it stops growth).
func (p *Queue) SetRingSize(n int) (address.Settings, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.q.SetRingSize(n)
	p.settings.RingSize = n
	return p.settings, nil
}

// Purge implements dispatch.Queue: pending messages are removed (and retired), the
// scheduling timer stops, blocked producers are woken to see the deletion.
func (p *Queue) Purge() {
	p.mu.Lock()
	p.deleted = true
	removed := cloneRemoved(p.q.Purge())
	p.stopTimerLocked()
	close(p.space)
	p.space = make(chan struct{})
	p.mu.Unlock()
	p.finish(nil, removed)
}

// stop ends the queue's timer for good (the pattern closed). Messages stay held.
func (p *Queue) stop() {
	p.mu.Lock()
	p.stopped = true
	p.stopTimerLocked()
	p.mu.Unlock()
}

func (p *Queue) stopTimerLocked() {
	if p.timer != nil {
		p.timer.Stop()
		p.timer = nil
	}
}
