package queue

import (
	"cmp"
	"math"
	"slices"
	"time"
)

// Message is one message held by a Queue: the queue's bookkeeping plus an opaque payload.
//
// The caller allocates it and passes the pointer to Enqueue; from then until the queue hands it
// back (Ack, or a Removed entry) the queue owns the Message's fields: Pop increments
// DeliveryCount and Nack with a redelivery delay rewrites DeliverAt. Value is never touched.
type Message struct {
	// Seq identifies the message within the queue. The caller assigns it, strictly increasing
	// in enqueue order (the queue does not check). It keys Ack, Cancel, Nack and Delivering,
	// and breaks ties between scheduled messages due at the same instant.
	Seq uint64
	// Size is the message's size in bytes, summed into Counts.Bytes for pending-bytes limits.
	// int32, like DeliveryCount, keeps a Message small (a queued message costs one); callers
	// clamp a size over 2 GiB to math.MaxInt32 (ClampSize).
	Size int32
	// DeliveryCount is the number of times the message has been delivered. Pop increments it
	// (saturating at math.MaxInt32); a caller re-enqueueing a recovered message may preset it.
	DeliveryCount int32
	// Priority is the message's priority, 0 (lowest) to 9 (highest; larger values count as
	// 9). Ready messages are delivered highest priority first, FIFO within a priority (JMS
	// 2.0 §3.4.10, Artemis): every "head" below is the head of the highest priority ready.
	// The caller sets it before Enqueue (DefaultPriority for a message naming none); the
	// queue never changes it.
	Priority uint8
	// Mark is the owner's, for its own bookkeeping on a ready message (pointqueue records
	// which set of selective consumers found that none of them selects it, so later walks
	// pass it at once); the queue never reads or writes it. It sits in padding: a Message
	// is no larger for it.
	Mark uint32
	// DeliverAt is when the message becomes deliverable. The zero time, or any time not after
	// the enqueue's now, means at once; a later time holds the message as scheduled until then.
	DeliverAt time.Time
	// ExpiresAt is when the message expires; the zero time means never. A message is expired
	// when now >= ExpiresAt; Pop removes it (ReasonExpired) when it reaches the head.
	ExpiresAt time.Time
	// Value is the caller's payload (for Titan, a *message.Message). The queue never reads it.
	Value any
}

// Undelivered reverses the increment of DeliveryCount by the Pop that returned m, for a
// message that was not delivered after all. A count saturated at math.MaxInt32 stays there
// (Pop may not have incremented it); a count at 0 stays 0.
func (m *Message) Undelivered() {
	if m.DeliveryCount > 0 && m.DeliveryCount < math.MaxInt32 {
		m.DeliveryCount--
	}
}

// ClampSize returns n as a Message.Size: n itself, or math.MaxInt32 for n over it.
func ClampSize(n int) int32 { return int32(min(n, math.MaxInt32)) }

// Options configures a Queue. The zero value is an unbounded queue with no delivery limit and
// immediate redelivery.
type Options struct {
	// RingSize is the ring size in messages. Zero or negative means no ring (the reference's
	// -1, Artemis "default-ring-size"). Reloadable with Queue.SetRingSize.
	RingSize int
	// MaxDeliveries is the number of deliveries after which a cancelled or nacked message is
	// removed with ReasonMaxDeliveries (to be dead-lettered) instead of being redelivered.
	// Zero or negative means unlimited. Fixed for the queue's life.
	MaxDeliveries int
	// RedeliveryDelay delays a nacked message: zero puts it straight back at the head; a
	// positive delay schedules it at now+RedeliveryDelay. Cancel ignores it. Negative is
	// treated as zero. Fixed for the queue's life.
	RedeliveryDelay time.Duration
}

// Counts is a snapshot of a Queue's size.
type Counts struct {
	// Messages is every message the queue holds, Ready+Delivering+Scheduled (Artemis
	// messageCount).
	Messages int
	// Ready is the messages waiting for a consumer, expired ones not yet removed included.
	Ready int
	// Delivering is the messages delivered and not yet acknowledged (Artemis deliveringCount).
	Delivering int
	// Scheduled is the messages held until their DeliverAt (Artemis scheduledCount).
	Scheduled int
	// Bytes is the sum of Message.Size over all Messages, in every state.
	Bytes int64
}

// delivery is one message in delivery and its consumption order (the Pop that delivered it).
type delivery struct {
	m     *Message
	order uint64
}

// Queue is the store of one point-to-point queue: messages in three states and the ring rule.
//
// A message is ready (on a FIFO deque, head first), delivering (popped, awaiting Ack, Cancel or
// Nack) or scheduled (on a min-heap by due time). The owner decides which consumer receives
// what; the Queue only keeps messages and their states.
//
// A Queue is not safe for concurrent use: its owner serialises every call, usually under the
// owning dispatcher's mutex. Every method that takes now first promotes the scheduled messages
// due at now (see Promote), so the state seen is the state at now.
type Queue struct {
	ring            int // ring size in messages; -1: no ring
	maxDeliveries   int // 0: unlimited
	redeliveryDelay time.Duration

	ready      readyList
	scheduled  schedHeap
	delivering map[uint64]delivery // by Seq
	popCount   uint64              // Pops so far; the consumption order of the latest delivery
	bytes      int64               // sum of Size over all three states

	removed []Removed  // the result buffer, reused by every call that returns []Removed
	due     []*Message // Promote's scratch
	cancel  []delivery // Cancel's scratch
}

// New returns an empty Queue configured by o.
func New(o Options) *Queue {
	q := &Queue{
		maxDeliveries:   min(max(o.MaxDeliveries, 0), math.MaxInt32), // a DeliveryCount's top
		redeliveryDelay: max(o.RedeliveryDelay, 0),
		// delivering is made at the first delivery (deliver): a broker restored with many
		// queues nobody consumes from does not hold an empty map for each.
	}
	q.SetRingSize(o.RingSize)
	return q
}

// deliver records m, just popped, as in delivery in consumption order.
func (q *Queue) deliver(m *Message) {
	if q.delivering == nil {
		q.delivering = make(map[uint64]delivery)
	}
	q.popCount++
	q.delivering[m.Seq] = delivery{m: m, order: q.popCount}
}

// Enqueue adds m: at the tail when m.DeliverAt is zero or not after now, otherwise to the
// scheduled messages until then. Adding to the tail applies the ring rule (see package doc):
// when the ring is full, the message at the head of the ready list is removed, never m itself,
// so when every other message on the ring is in delivery the queue grows past its ring size.
//
// The returned slice lists the messages removed, in removal order; it is nil when none was.
// It is owned by the Queue and valid until the next call to any of its methods that returns
// a []Removed; copy it to keep it.
func (q *Queue) Enqueue(m *Message, now time.Time) []Removed {
	if len(q.scheduled) > 0 || !m.DeliverAt.IsZero() {
		return q.enqueueTimed(m, now)
	}
	// The fast path: nothing is scheduled and m is ready at once, so now is not needed.
	q.bytes += int64(m.Size)
	if q.ringFull() {
		// The previous result is overwritten in place rather than cleared and appended to.
		old := q.ready.rotate(m)
		q.bytes -= int64(old.Size)
		if len(q.removed) != 1 {
			q.resetRemoved()
			q.removed = append(q.removed, Removed{})
		}
		q.removed[0] = Removed{Msg: old, Reason: ReasonRing}
		return q.removed
	}
	q.resetRemoved()
	q.ready.pushBack(m)
	return nil
}

// enqueueTimed is Enqueue when time matters: scheduled messages may be due, or m has a
// DeliverAt.
func (q *Queue) enqueueTimed(m *Message, now time.Time) []Removed {
	now = now.Round(0) // wall clock only; see the package doc
	q.resetRemoved()
	q.promote(now)
	q.bytes += int64(m.Size)
	if m.DeliverAt.After(now) {
		q.scheduled.push(m)
		return q.result()
	}
	if q.ringFull() {
		q.drop(q.ready.rotate(m), ReasonRing)
		return q.result()
	}
	q.ready.pushBack(m)
	return q.result()
}

// ringFull is the ring rule for one message added at the tail, which only pushes out a message
// ahead of it: it reports whether the ring is full (or over) and a message is ready, in which
// case the head must go as the new message joins (deque.rotate does both in one step).
func (q *Queue) ringFull() bool {
	return q.ring > 0 && q.ready.n > 0 && q.ready.n+len(q.delivering) >= q.ring
}

// Pop delivers the message at the head of the ready list: it moves to delivering and its
// DeliveryCount is incremented. Scheduled messages due at now are promoted first, and expired
// messages found at the head (now >= ExpiresAt) are removed with ReasonExpired on the way.
// Pop returns a nil *Message when no message is ready.
//
// The []Removed follows Enqueue's rules: nil when empty, valid until the next call that
// returns one.
func (q *Queue) Pop(now time.Time) (*Message, []Removed) {
	now = now.Round(0) // wall clock only; see the package doc
	q.resetRemoved()
	if len(q.scheduled) > 0 {
		q.promote(now)
	}
	for q.ready.n > 0 {
		m := q.ready.popFront()
		if !m.ExpiresAt.IsZero() && !now.Before(m.ExpiresAt) {
			q.drop(m, ReasonExpired)
			continue
		}
		if m.DeliveryCount < math.MaxInt32 { // saturates: a message NACKed forever stays at the top
			m.DeliveryCount++
		}
		q.deliver(m)
		return m, q.result()
	}
	return nil, q.result()
}

// PopFunc is Pop for consumers that take only some messages (JMS selectors): it delivers the
// first ready message, in delivery order (priority, then FIFO), for which pick returns
// true, and leaves the others where they are, so that their order is kept for other
// consumers (Artemis semantics). Expired messages it passes are removed (ReasonExpired).
// pick is called at most once per ready message, under the owner's lock, and must not call
// the Queue. The cost is O(messages passed): a message no consumer picks is passed again
// by every later walk. The []Removed follows Enqueue's rules.
func (q *Queue) PopFunc(now time.Time, pick func(*Message) bool) (*Message, []Removed) {
	var c Cursor
	return q.PopFuncFrom(&c, now, pick)
}

// Cursor is where a PopFuncFrom walk resumes. The zero value is the head of the ready list.
type Cursor struct {
	lv int // priorities walked past: the walk is at priority Priorities-1-lv
	i  int // index within that priority
}

// PopFuncFrom is PopFunc starting at c, which it leaves where the delivered message was (or
// at the end), so that a dispatcher delivering several messages in one go walks the ready
// list once rather than once per message. The messages before c were passed by earlier
// walks; resuming is right only while nothing but PopFuncFrom changed the ready list and
// no pick would now accept a message it refused: start again from a zero Cursor after any
// other call on the Queue (Cancel, Nack, Enqueue …) or a change in what pick accepts
// other than the delivery it was just told of.
func (q *Queue) PopFuncFrom(c *Cursor, now time.Time, pick func(*Message) bool) (*Message, []Removed) {
	now = now.Round(0) // wall clock only; see the package doc
	q.resetRemoved()
	if len(q.scheduled) > 0 && q.scheduled[0].dueAt(wallKey(now)) {
		q.promote(now)
		*c = Cursor{} // promoted messages joined the heads
	}
	for ; c.lv < Priorities; c.lv, c.i = c.lv+1, 0 {
		p := Priorities - 1 - c.lv
		if q.ready.mask&(1<<p) == 0 {
			continue
		}
		for d := q.ready.lv(p); c.i < d.n; {
			m := d.at(c.i)
			if !m.ExpiresAt.IsZero() && !now.Before(m.ExpiresAt) {
				q.drop(q.ready.removeAt(p, c.i), ReasonExpired)
				continue
			}
			if !pick(m) {
				c.i++
				continue
			}
			q.ready.removeAt(p, c.i)
			if m.DeliveryCount < math.MaxInt32 {
				m.DeliveryCount++
			}
			q.deliver(m)
			return m, q.result()
		}
	}
	return nil, q.result()
}

// Ack removes the message in delivery with the given Seq and returns it. It returns nil, false
// when no such message is in delivery (already acknowledged, cancelled or never delivered).
func (q *Queue) Ack(seq uint64) (*Message, bool) {
	d, ok := q.delivering[seq]
	if !ok {
		return nil, false
	}
	delete(q.delivering, seq)
	q.bytes -= int64(d.m.Size)
	return d.m, true
}

// Cancel returns messages in delivery to the queue, as a closing consumer or a transaction
// rollback does (reference 002, "Messages in Delivery & Rollbacks"). They go back to the head
// in reverse order of consumption, so the one consumed first ends up at the head; the ring
// rule then removes up to len(seqs) messages from the head. Seqs not in delivery, and repeats,
// are ignored. seqs is normally in consumption order, but any order gives the same result:
// the queue orders them by the Pop that delivered each. seqs is only read.
//
// A message already delivered Options.MaxDeliveries times is removed with ReasonMaxDeliveries
// instead; those removals come first in the result, in consumption order. RedeliveryDelay does
// not apply. The []Removed follows Enqueue's rules.
func (q *Queue) Cancel(seqs []uint64, now time.Time) []Removed {
	now = now.Round(0) // wall clock only; see the package doc
	q.resetRemoved()
	q.promote(now)
	sc := q.cancel[:0]
	sorted := true
	for _, seq := range seqs {
		d, ok := q.delivering[seq]
		if !ok {
			continue
		}
		delete(q.delivering, seq)
		if len(sc) > 0 && d.order < sc[len(sc)-1].order {
			sorted = false
		}
		sc = append(sc, d)
	}
	if !sorted {
		slices.SortFunc(sc, func(a, b delivery) int { return cmp.Compare(a.order, b.order) })
	}
	for i := range sc {
		if q.exhausted(sc[i].m) {
			q.drop(sc[i].m, ReasonMaxDeliveries)
			sc[i].m = nil
		}
	}
	n := 0
	for i := len(sc) - 1; i >= 0; i-- {
		if m := sc[i].m; m != nil {
			q.ready.pushFront(m)
			n++
		}
	}
	q.enforceRing(n)
	clear(sc)
	q.cancel = sc[:0]
	return q.result()
}

// Nack returns one message in delivery to the queue, like Cancel with a single Seq, except
// that with a positive Options.RedeliveryDelay the message is scheduled at now+RedeliveryDelay
// (its DeliverAt is overwritten) instead of going back to the head. Exhausted messages are
// removed with ReasonMaxDeliveries. An unknown seq is ignored. The []Removed follows Enqueue's
// rules.
func (q *Queue) Nack(seq uint64, now time.Time) []Removed {
	now = now.Round(0) // wall clock only; see the package doc
	q.resetRemoved()
	q.promote(now)
	d, ok := q.delivering[seq]
	if !ok {
		return q.result()
	}
	delete(q.delivering, seq)
	switch m := d.m; {
	case q.exhausted(m):
		q.drop(m, ReasonMaxDeliveries)
	case q.redeliveryDelay > 0:
		m.DeliverAt = now.Add(q.redeliveryDelay)
		q.scheduled.push(m)
	default:
		q.ready.pushFront(m)
		q.enforceRing(1)
	}
	return q.result()
}

// Promote moves the scheduled messages due at now (DeliverAt <= now) to the head of the ready
// list, in due order: the one due first ends up at the head (reference 002, "Scheduled
// Messages"). The ring rule then removes up to that many messages from the head, so a
// promoted message may be removed at once. The owner calls it when the time NextDue reports
// comes; every method taking now also calls it. The []Removed follows Enqueue's rules.
func (q *Queue) Promote(now time.Time) []Removed {
	now = now.Round(0) // wall clock only; see the package doc
	q.resetRemoved()
	q.promote(now)
	return q.result()
}

// NextDue returns the DeliverAt of the scheduled message due first, and false when none is
// scheduled. The owner arms its timer for it.
func (q *Queue) NextDue() (time.Time, bool) {
	if len(q.scheduled) == 0 {
		return time.Time{}, false
	}
	return q.scheduled[0].m.DeliverAt, true
}

// SetRingSize changes the ring size at run time; n <= 0 removes the ring. It removes nothing at
// once: when the new size is below the current ring count, each later addition removes one
// message from the head, so the queue stops growing but shrinks only as consumers drain it
// (reference 002, "Configuration").
func (q *Queue) SetRingSize(n int) {
	if n <= 0 {
		n = -1
	}
	q.ring = n
}

// RingSize returns the ring size in messages, or -1 when the queue has no ring (whatever
// non-positive value was set), as the reference reports it.
func (q *Queue) RingSize() int { return q.ring }

// Counts returns the queue's current counts.
func (q *Queue) Counts() Counts {
	r, d, s := q.ready.len(), len(q.delivering), len(q.scheduled)
	return Counts{Messages: r + d + s, Ready: r, Delivering: d, Scheduled: s, Bytes: q.bytes}
}

// Purge removes every ready and scheduled message with ReasonPurged and returns them: ready
// ones head to tail, then scheduled ones in due order. Messages in delivery stay. Unlike the
// other methods, Purge returns a newly allocated slice owned by the caller (nil when the queue
// held nothing to purge), and releases the memory of large internal buffers.
func (q *Queue) Purge() []Removed {
	n := q.ready.len() + len(q.scheduled)
	if n == 0 {
		return nil
	}
	out := make([]Removed, 0, n)
	for i := range q.ready.len() {
		m := q.ready.at(i)
		q.bytes -= int64(m.Size)
		out = append(out, Removed{Msg: m, Reason: ReasonPurged})
	}
	q.ready.reset()
	slices.SortFunc(q.scheduled, func(a, b schedEntry) int {
		if a.less(&b) {
			return -1
		}
		return 1
	})
	for _, e := range q.scheduled {
		q.bytes -= int64(e.m.Size)
		out = append(out, Removed{Msg: e.m, Reason: ReasonPurged})
	}
	if cap(q.scheduled) > minDequeCap {
		q.scheduled = nil
	} else {
		clear(q.scheduled)
		q.scheduled = q.scheduled[:0]
	}
	return out
}

// Delivering returns the message in delivery with the given Seq, and false when there is none.
func (q *Queue) Delivering(seq uint64) (*Message, bool) {
	d, ok := q.delivering[seq]
	return d.m, ok
}

// promote moves the scheduled messages due at now to the head of the ready list, due first at
// the head, then applies the ring rule for them. Removals go to q.removed.
func (q *Queue) promote(now time.Time) {
	sec, nsec := wallKey(now)
	if len(q.scheduled) == 0 || !q.scheduled[0].dueAt(sec, nsec) {
		return
	}
	due := q.due[:0]
	for len(q.scheduled) > 0 && q.scheduled[0].dueAt(sec, nsec) {
		due = append(due, q.scheduled.pop())
	}
	for i := len(due) - 1; i >= 0; i-- {
		q.ready.pushFront(due[i])
	}
	q.enforceRing(len(due))
	clear(due)
	q.due = due[:0]
}

// enforceRing is the ring rule, applied after n messages joined the head of the ready list:
// while the ring count (ready + delivering; scheduled messages are not on the ring) is over the
// ring size, remove the head of the ready list, at most n times. Messages in delivery are never
// removed. (Enqueue applies the rule for its one tail message inline: there the new message is
// not a candidate, as Artemis enforces the ring before adding at the tail and polls nothing
// when no message is ready.)
func (q *Queue) enforceRing(n int) {
	if q.ring <= 0 {
		return
	}
	for ; n > 0 && q.ready.n > 0 && q.ready.n+len(q.delivering) > q.ring; n-- {
		q.drop(q.ready.popFront(), ReasonRing)
	}
}

// exhausted reports whether m has been delivered the maximum number of times.
func (q *Queue) exhausted(m *Message) bool {
	return q.maxDeliveries > 0 && int(m.DeliveryCount) >= q.maxDeliveries
}

// drop accounts for m leaving the queue for reason r and records it in the result buffer.
func (q *Queue) drop(m *Message, r Reason) {
	q.bytes -= int64(m.Size)
	q.removed = append(q.removed, Removed{Msg: m, Reason: r})
}

// resetRemoved empties the result buffer (the previous call's result) without freeing it.
func (q *Queue) resetRemoved() {
	if len(q.removed) > 0 {
		// Dropping the pointers one by one is cheaper than clear's bulk memclr for the one
		// or two entries a call usually leaves.
		for i := range q.removed {
			q.removed[i].Msg = nil
		}
		q.removed = q.removed[:0]
	}
}

// result returns the result buffer, or nil when it is empty.
func (q *Queue) result() []Removed {
	if len(q.removed) == 0 {
		return nil
	}
	return q.removed
}
