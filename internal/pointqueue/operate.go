package pointqueue

import (
	"time"

	"github.com/titan-broker/titan/internal/message"
)

// Operator actions on a live queue (monitor API: purge, browse, re-drive). Unlike Purge
// (dispatch.Queue, used by delete) they keep the queue, its consumers and its limits.

// Clear removes every ready and scheduled message (retired from the store, counted as
// purged) and returns how many; messages in delivery stay with their consumers. Blocked
// producers are woken (there is room now).
func (p *Queue) Clear() int {
	p.mu.Lock()
	removed := cloneRemoved(p.q.Purge())
	p.stopTimerLocked()
	close(p.space)
	p.space = make(chan struct{})
	p.mu.Unlock()
	p.finish(nil, removed)
	return len(removed)
}

// Peeked is one message seen by Peek.
type Peeked struct {
	// Message is the stored message (shared and immutable: read only).
	Message *message.Message
	// DeliveryCount is how many times it was delivered so far.
	DeliveryCount int
	// DeliverAt is when a scheduled message becomes deliverable (zero when ready).
	DeliverAt time.Time
}

// Peek returns up to max messages without consuming them: ready ones head first, then
// scheduled ones in due order (messages in delivery are not shown).
func (p *Queue) Peek(max int) []Peeked {
	p.mu.Lock()
	defer p.mu.Unlock()
	qms := p.q.Peek(max)
	out := make([]Peeked, len(qms))
	now := p.now()
	for i, qm := range qms {
		out[i] = Peeked{Message: qm.Value.(*message.Message), DeliveryCount: int(qm.DeliveryCount)}
		if qm.DeliverAt.After(now) {
			out[i].DeliverAt = qm.DeliverAt
		}
	}
	return out
}

// MoveHead takes the message at the head of the ready list (expired ones on the way are
// removed as usual) and calls fn with it, without p's lock held. When fn returns nil the
// message is removed from this queue (and its store), as an acknowledgement; otherwise it
// goes back to the head, not counted as a delivery, and fn's error is returned. moved is
// false when nothing was ready. Used to re-drive dead letters: fn publishes a copy to the
// message's original queue, so a crash between the two leaves a duplicate, never a loss.
func (p *Queue) MoveHead(fn func(m *message.Message) error) (moved bool, err error) {
	p.mu.Lock()
	now := p.now()
	qm, rem := p.q.Pop(now)
	removed := cloneRemoved(rem)
	if qm == nil {
		p.mu.Unlock()
		p.finish(nil, removed)
		return false, nil
	}
	qm.Undelivered() // not a delivery
	p.mu.Unlock()
	err = fn(qm.Value.(*message.Message))
	p.mu.Lock()
	var acked []*message.Message
	if err == nil {
		if am, ok := p.q.Ack(qm.Seq); ok {
			acked = append(acked, am.Value.(*message.Message))
		}
	} else {
		removed = append(removed, p.q.Cancel([]uint64{qm.Seq}, now)...)
		acked, removed = p.dispatchLocked(now, acked, removed)
	}
	p.mu.Unlock()
	p.finish(acked, removed)
	return err == nil, err
}
