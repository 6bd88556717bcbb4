// Package delivery is what every pattern shares on the consuming side: a connection's
// subscriptions, the credit each one has (prefetch, stalled writers), the MESSAGE it writes
// and the bookkeeping of unacknowledged deliveries that ACK and NACK resolve (STOMP 1.2,
// "SUBSCRIBE ack Header").
//
// It knows no pattern. A pattern package sets itself as a Subscription's Owner (told when
// the subscription goes away) and passes a Source with each delivery (told when it is
// acknowledged or rejected); a Subscription's Feed is kicked when credit frees up.
//
// # Concurrency
//
// Everything exported is safe for concurrent use. Conn.mu guards the connection's
// subscriptions and every Subscription's guarded fields; it is taken after a queue's lock,
// never before, and no Owner, Source or Feed is called with it held.
package delivery

import (
	"errors"
	"strconv"

	"github.com/titan-broker/titan/internal/frame"
)

// Errors of the subscription and acknowledgement bookkeeping.
var (
	// ErrUnknownAck is returned for an ACK or NACK naming no unacknowledged message.
	ErrUnknownAck = errors.New("delivery: unknown ack id")
	// ErrDuplicateSubscription is returned for a SUBSCRIBE reusing an active id.
	ErrDuplicateSubscription = errors.New("delivery: duplicate subscription id")
	// ErrUnknownSubscription is returned for an UNSUBSCRIBE naming no subscription.
	ErrUnknownSubscription = errors.New("delivery: unknown subscription id")
)

// Writer is the port to one client connection's outbound side (implemented by
// session.Session). Both methods must be safe for concurrent use and must never block.
type Writer interface {
	// Version is the negotiated STOMP version, fixed once the connection is established.
	Version() frame.Version
	// WriteMessage queues one MESSAGE made of a per-delivery prefix and a shared, read-only
	// tail. On true the writer owns prefix and returns it to the pool (frame.PutBuf) once
	// written; false means nothing was queued (connection closing or over its outbound
	// limit) and the caller keeps prefix. prefix may be a static Buf (frame.StaticBuf, a
	// subscription's constant head) queued many times at once: writers only read it.
	WriteMessage(prefix *frame.Buf, shared []byte) bool
	// WriteEvent queues an events MESSAGE like WriteMessage, except that with force it is
	// refused only when the connection is closing, never for its outbound limit (the events
	// pattern bounds a subscriber's buffer itself, EventPolicy.MaxBytes; issue 30).
	// congested, when not nil, is closed once the connection's output is back at its low
	// watermark or the connection closed; no producer waits for it since issue 30
	// (DeliverEvent ignores it).
	WriteEvent(prefix *frame.Buf, shared []byte, force bool) (ok bool, congested <-chan struct{})
	// QueuedBytes is the number of bytes queued and not yet written to the socket.
	QueuedBytes() int64
}

// Source is where a delivery came from (a queue, an events-store log reader): it is told,
// without Conn.mu held, which of its sequences were acknowledged or rejected.
type Source interface {
	// Settle applies an ACK (nack false) or NACK of seqs, in consumption order.
	Settle(seqs []uint64, nack bool)
	// SettleOne is Settle of one sequence (the common case, without a slice to allocate).
	SettleOne(seq uint64, nack bool)
}

// Feed is what delivers to a subscription; Kick makes it try again (credit freed, writer
// drained). It must not block.
type Feed interface {
	Kick()
}

// Owner is the pattern a subscription belongs to. Detach is called once, without Conn.mu
// held, when the subscription ends (UNSUBSCRIBE, connection close, failed SUBSCRIBE after
// it was registered); unacked are its deliveries not acknowledged, in consumption order,
// to be returned for redelivery where the pattern redelivers.
type Owner interface {
	Detach(sub *Subscription, unacked []Unacked)
}

// Unacked is one unacknowledged delivery handed back at detach.
type Unacked struct {
	Source Source
	Seq    uint64
}

// AckMode is a subscription's acknowledgement mode (STOMP 1.2, "SUBSCRIBE ack Header").
type AckMode uint8

// Ack modes.
const (
	AckAuto             AckMode = iota // the broker considers a message acknowledged once sent
	AckClient                          // cumulative: ACK of one message acknowledges every earlier one of the subscription
	AckClientIndividual                // each message acknowledged on its own
)

// ParseAckMode maps the ack header ("" is auto) to an AckMode.
func ParseAckMode(s string) (AckMode, bool) {
	switch s {
	case "", "auto":
		return AckAuto, true
	case "client":
		return AckClient, true
	case "client-individual":
		return AckClientIndividual, true
	}
	return 0, false
}

// String returns the header spelling.
func (m AckMode) String() string {
	switch m {
	case AckClient:
		return "client"
	case AckClientIndividual:
		return "client-individual"
	}
	return "auto"
}

// ackKeyLocked returns the key a client uses to acknowledge: the ack header on 1.2;
// subscription and message-id on 1.0/1.1. c.mu held.
func ackKeyLocked(c *Conn, sub *Subscription, msgID string) (key, ackHeader string) {
	if c.w.Version() >= frame.V12 {
		c.nextTag++
		k := strconv.FormatUint(c.nextTag, 10)
		return k, k
	}
	return sub.ID + "\x00" + msgID, ""
}
