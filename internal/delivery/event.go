package delivery

import (
	"strconv"
	"time"

	"github.com/titan-broker/titan/internal/frame"
	"github.com/titan-broker/titan/internal/message"
)

// Events delivery (DESIGN §9, issue 30): a slow subscriber is isolated. An events message is
// never refused to a subscriber for its connection's high watermark and nobody waits for a
// subscriber: past the high watermark the connection's own buffer keeps taking messages
// (the session's slow-consumer timer runs; a subscriber that stays over it without reading
// for slow-consumer-timeout is closed), up to a hard bound (EventPolicy.MaxBytes) at which
// it is closed as a slow consumer at once. A client-ack subscription at its prefetch is
// written nothing more: its messages are held, in order, and written as its ACKs free
// credit; held past slow-consumer-timeout without an ACK, it is closed. Under
// slow-consumer-policy DROP, a message the subscriber has no room or no credit for is
// dropped instead (the caller counts it). Producers and the other subscribers go on in
// every case; they pause only at the broker-wide heap watermarks (package flow).

// SlowCloser is implemented by writers (the session) that can close their connection as a
// slow consumer: an ERROR carrying detail is written and the connection closes. It must
// not block and may be called more than once.
type SlowCloser interface {
	CloseSlowConsumer(detail string)
}

// DefaultEventMaxBytes is EventPolicy.MaxBytes when it is 0: 64 MiB, four times the
// default high watermark (flow-control.subscriber.max-pending-bytes).
const DefaultEventMaxBytes = 64 << 20

// eventHeadBytes is what a held message is accounted for beyond its shared tail: its
// per-delivery head (MESSAGE, subscription, ack) and bookkeeping.
const eventHeadBytes = 96

// EventPolicy is how DeliverEvent treats a subscriber that cannot take a message now. The
// events pattern builds one per publication from the destination's address settings and the
// flow-control configuration.
type EventPolicy struct {
	// Drop is slow-consumer-policy DROP: a message the connection has no room for (over its
	// high watermark) or the client-ack subscription no credit for (at its prefetch) is not
	// delivered (EventDropped). Otherwise (CLOSE, the default) it is queued or held.
	Drop bool
	// MaxBytes bounds, in bytes, what one connection may hold for its events subscriptions
	// (queued for its writer plus held for credit) before a CLOSE-policy subscriber is
	// closed as a slow consumer at once (EventOverflow). A message that finds nothing
	// queued or held always goes through, whatever its size. 0 means DefaultEventMaxBytes.
	MaxBytes int64
	// SlowAfter is how long messages may stay held for a client-ack subscription without an
	// ACK freeing credit before its connection is closed as a slow consumer (0: never).
	SlowAfter time.Duration
}

func (p EventPolicy) maxBytes() int64 {
	if p.MaxBytes <= 0 {
		return DefaultEventMaxBytes
	}
	return p.MaxBytes
}

// EventResult is what DeliverEvent did with a message.
type EventResult int8

const (
	// EventWritten: the MESSAGE was queued on the connection.
	EventWritten EventResult = iota
	// EventHeld: the client-ack subscription is at its prefetch (or already holds messages);
	// the message is held and written, in order, once ACKs free credit.
	EventHeld
	// EventDropped: under EventPolicy.Drop the connection is over its limit or the
	// subscription at its prefetch; nothing was written. The caller counts the drop.
	EventDropped
	// EventRefused: nothing was written because the subscription or its connection is
	// closed or closing.
	EventRefused
	// EventOverflow: the connection reached EventPolicy.MaxBytes; nothing was written and
	// the connection is being closed as a slow consumer (SlowCloser).
	EventOverflow
)

// heldEvent is one message held for a client-ack subscription's credit.
type heldEvent struct {
	m *message.Message
	n int64 // bytes accounted in Conn.heldBytes
}

// DeliverEvent delivers an events message m to sub (auto or client ack; nothing to settle)
// according to pol (see the top of this file and EventResult). It never blocks on the
// subscriber: one lock of c per call, and the writer's WriteEvent never waits. Safe for
// concurrent use; must be called without c.mu held.
func (c *Conn) DeliverEvent(sub *Subscription, m *message.Message, pol EventPolicy) EventResult {
	c.mu.Lock()
	if c.closed || c.slow || sub.closed {
		c.mu.Unlock()
		return EventRefused
	}
	if sub.Ack != AckAuto && (len(sub.held) > 0 || len(sub.pending)+sub.acking >= sub.Prefetch) {
		if pol.Drop {
			c.mu.Unlock()
			return EventDropped
		}
		return c.holdUnlock(sub, m, pol)
	}
	v := c.w.Version()
	if !pol.Drop {
		// A message that finds nothing queued or held always goes through: its size is
		// only needed when something is.
		if q := c.w.QueuedBytes() + c.heldBytes; q > 0 {
			if n := eventBytes(m, v); q+n > pol.maxBytes() {
				return c.overflowUnlock(q+n, pol)
			}
		}
	}
	ok := c.writeEventLocked(sub, m, v, !pol.Drop)
	c.mu.Unlock()
	switch {
	case ok:
		return EventWritten
	case pol.Drop:
		return EventDropped
	}
	return EventRefused
}

// LoseEvents is DeliverEvent for events meant for sub that never reached this connection:
// in cluster mode, the node's NATS subscription dropped them at its pending limits because
// the node fell behind (cluster/events). Under pol.Drop they are dropped like any event the
// subscriber had no room for (EventDropped; the caller counts them). Otherwise (CLOSE) the
// connection is closed as a slow consumer with an ERROR carrying detail (EventOverflow): a
// subscriber under CLOSE never misses an event without being told. EventRefused when sub or
// its connection is closed or closing. Never blocks; must be called without c.mu held.
func (c *Conn) LoseEvents(sub *Subscription, pol EventPolicy, detail string) EventResult {
	c.mu.Lock()
	if c.closed || c.slow || sub.closed {
		c.mu.Unlock()
		return EventRefused
	}
	if pol.Drop {
		c.mu.Unlock()
		return EventDropped
	}
	return c.closeSlowUnlock(detail)
}

// eventBytes is what m accounts for in a connection's events bound at version v.
func eventBytes(m *message.Message, v frame.Version) int64 {
	shared, _ := m.Shared(v)
	return int64(len(shared)) + eventHeadBytes
}

// writeEventLocked writes m to sub at c's version v (force: never refused for the
// connection's limit, only when it is closing) and records it unacknowledged in client ack
// modes. c.mu held.
func (c *Conn) writeEventLocked(sub *Subscription, m *message.Message, v frame.Version, force bool) bool {
	var prefix *frame.Buf
	var dl *delivery
	if sub.Ack == AckAuto {
		prefix = sub.headLocked(v)
	} else {
		d := message.Delivery{Subscription: sub.ID}
		key, hdr := ackKeyLocked(c, sub, m.ID)
		d.AckID = hdr
		dl = &delivery{key: key, sub: sub}
		prefix = frame.GetBuf()
		prefix.B = message.AppendPrefix(prefix.B, &d, v)
	}
	shared, dropped := m.Shared(v)
	if dropped > 0 && c.egressDropped != nil {
		c.egressDropped.Add(uint64(dropped))
	}
	if ok, _ := c.w.WriteEvent(prefix, shared, force); !ok {
		frame.PutBuf(prefix)
		return false
	}
	if dl != nil {
		if c.pending == nil {
			c.pending = make(map[string]*delivery)
		}
		c.pending[dl.key] = dl
		sub.pending = append(sub.pending, dl)
	}
	sub.Delivered.Add(1)
	return true
}

// holdUnlock holds m for sub until ACKs free credit, or overflows; it releases c.mu.
func (c *Conn) holdUnlock(sub *Subscription, m *message.Message, pol EventPolicy) EventResult {
	n := eventBytes(m, c.w.Version())
	if q := c.w.QueuedBytes() + c.heldBytes; q > 0 && q+n > pol.maxBytes() {
		return c.overflowUnlock(q+n, pol)
	}
	sub.held = append(sub.held, heldEvent{m: m, n: n})
	c.heldBytes += n
	if pol.SlowAfter > 0 && len(sub.held) == 1 {
		sub.heldProgress = false
		if sub.heldTimer == nil {
			after := pol.SlowAfter
			sub.heldTimer = time.AfterFunc(after, func() { c.heldExpired(sub, after) })
		} else {
			sub.heldTimer.Reset(pol.SlowAfter)
		}
	}
	c.mu.Unlock()
	return EventHeld
}

// heldExpired runs when sub's slow-consumer timer fires: if messages are still held and no
// ACK wrote any of them since the timer was armed, the connection is closed as a slow
// consumer; if some were written (the client acknowledges, slowly) the timer is re-armed.
func (c *Conn) heldExpired(sub *Subscription, after time.Duration) {
	c.mu.Lock()
	if len(sub.held) == 0 || sub.closed || c.closed || c.slow {
		c.mu.Unlock()
		return
	}
	if sub.heldProgress {
		sub.heldProgress = false
		sub.heldTimer.Reset(after)
		c.mu.Unlock()
		return
	}
	c.closeSlowUnlock("subscription " + sub.ID + " kept " + strconv.Itoa(sub.Prefetch) +
		" messages unacknowledged (its prefetch) for " + after.String() +
		" while messages for it were held (flow-control slow-consumer-timeout)")
}

// overflowUnlock closes the connection as a slow consumer: total bytes would be queued or
// held for it, over pol's bound. It releases c.mu.
func (c *Conn) overflowUnlock(total int64, pol EventPolicy) EventResult {
	return c.closeSlowUnlock("the connection's pending events output reached " + strconv.FormatInt(total, 10) +
		" bytes, over " + strconv.FormatInt(pol.maxBytes(), 10) +
		" (flow-control subscriber max-buffer-bytes), without the client reading")
}

// closeSlowUnlock marks c slow, releases c.mu and closes the connection as a slow consumer
// with detail (SlowCloser). c.mu held on entry.
func (c *Conn) closeSlowUnlock(detail string) EventResult {
	c.slow = true
	c.mu.Unlock()
	if sc, ok := c.w.(SlowCloser); ok {
		sc.CloseSlowConsumer(detail)
	}
	return EventOverflow
}

// drainHeldLocked writes sub's held messages, in order, while it has credit (an ACK just
// freed some). c.mu held.
func (c *Conn) drainHeldLocked(sub *Subscription) {
	if len(sub.held) == 0 {
		return
	}
	i, v := 0, c.w.Version()
	for ; i < len(sub.held) && !sub.closed && len(sub.pending)+sub.acking < sub.Prefetch; i++ {
		h := sub.held[i]
		sub.held[i] = heldEvent{}
		c.heldBytes -= h.n
		if !c.writeEventLocked(sub, h.m, v, true) {
			sub.Dropped.Add(1) // the connection is closing
		}
	}
	if i == 0 {
		return
	}
	sub.heldProgress = true
	sub.held = sub.held[i:]
	if len(sub.held) == 0 {
		sub.held = nil
		if sub.heldTimer != nil {
			sub.heldTimer.Stop()
		}
	}
}

// dropHeldLocked forgets sub's held messages (it ended), counting them as dropped. c.mu held.
func (sub *Subscription) dropHeldLocked() {
	for _, h := range sub.held {
		sub.Conn.heldBytes -= h.n
	}
	if n := len(sub.held); n > 0 {
		sub.Dropped.Add(uint64(n))
	}
	sub.held = nil
	if sub.heldTimer != nil {
		sub.heldTimer.Stop()
	}
}

// HeldCount returns how many events messages are held for s's credit. For tools and tests.
func (s *Subscription) HeldCount() int {
	s.Conn.mu.Lock()
	defer s.Conn.mu.Unlock()
	return len(s.held)
}
