package dispatch

import (
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/titan-broker/titan/internal/dest"
	"github.com/titan-broker/titan/internal/frame"
	"github.com/titan-broker/titan/internal/message"
)

// Writer is the port to one client connection's outbound side (implemented by
// session.Session). Both methods must be safe for concurrent use and must never block.
type Writer interface {
	// Version is the negotiated STOMP version, fixed once the connection is established.
	Version() frame.Version
	// WriteMessage queues one MESSAGE made of a per-delivery prefix and a shared, read-only
	// tail. On true the writer owns prefix and returns it to the pool (frame.PutBuf) once
	// written; false means nothing was queued (connection closing or over its outbound
	// limit) and the caller keeps prefix.
	WriteMessage(prefix *frame.Buf, shared []byte) bool
	// QueuedBytes is the number of bytes queued and not yet written to the socket.
	QueuedBytes() int64
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

// Subscription is one SUBSCRIBE of one connection.
type Subscription struct {
	ID       string           // the subscription id header (or the destination for STOMP 1.0)
	Conn     *Conn            // owning connection
	Group    string           // group the subscription matches
	Dest     dest.Destination // destination or (events only) wildcard filter
	Ack      AckMode
	Prefetch int // max unacknowledged deliveries in client modes; > 0

	queue atomic.Pointer[PointQueue] // queues pattern only: the queue consuming for it, once one exists
	log   *logSub                    // events-store only: the log reader; set before the subscription is shared

	// Start is where an events-store subscription begins (start-position header).
	Start StartPosition
	// DurableName makes an events-store subscription's position survive reconnects and
	// restarts (durable-name header); "" for none.
	DurableName string
	// Allow, when set, is asked per message on the events fan-out: a message whose concrete
	// channel it refuses is skipped (not delivered, not counted as dropped). Authorization
	// sets it on wildcard subscriptions. Called concurrently from publishers; must be fast.
	Allow func(channel string) bool

	// guarded by Conn.mu
	pending []*delivery // unacknowledged deliveries in delivery order
	closed  bool
	stalled bool // a write was refused for outbound limits; resume on drain
	acking  int  // deliveries taken by an ACK/NACK that their queue has not applied yet

	Delivered atomic.Uint64 // MESSAGE frames written
	Dropped   atomic.Uint64 // events not delivered because the subscription or connection was full
}

// delivery is one unacknowledged MESSAGE.
type delivery struct {
	key string
	sub *Subscription
	msg *message.Message
	q   *PointQueue // queue the message came from; nil for events
	seq uint64      // sequence within q, or within the log for events-store
	log *logSub     // events-store subscription the message came from
}

// Conn is the delivery-side state of one connection: its subscriptions and unacknowledged
// deliveries. Safe for concurrent use; Conn.mu is taken after PointQueue.mu, never before.
type Conn struct {
	w Writer

	mu      sync.Mutex               // guards the fields below and every Subscription's guarded fields
	subs    map[string]*Subscription // by subscription id, guarded by mu
	pending map[string]*delivery     // by ack key, guarded by mu
	nextTag uint64                   // guarded by mu
	closed  bool                     // guarded by mu

	egressDropped *atomic.Uint64 // engine counter of headers left out on egress; may be nil
}

// NewConn returns the delivery state for a connection writing through w.
func NewConn(w Writer) *Conn {
	return &Conn{w: w, subs: make(map[string]*Subscription), pending: make(map[string]*delivery)}
}

// Writer returns the connection's writer.
func (c *Conn) Writer() Writer { return c.w }

// Subscription returns the subscription with id.
func (c *Conn) Subscription(id string) (*Subscription, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	s, ok := c.subs[id]
	return s, ok
}

// SubscriptionCount returns the number of active subscriptions.
func (c *Conn) SubscriptionCount() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.subs)
}

// PendingCount returns the number of unacknowledged deliveries.
func (c *Conn) PendingCount() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.pending)
}

// ackKey is the key a client uses to acknowledge: the ack header on 1.2; subscription and
// message-id on 1.0/1.1.
func ackKeyLocked(c *Conn, sub *Subscription, msgID string) (key, ackHeader string) {
	if c.w.Version() >= frame.V12 {
		c.nextTag++
		k := strconv.FormatUint(c.nextTag, 10)
		return k, k
	}
	return sub.ID + "\x00" + msgID, ""
}

// deliver writes m to sub. It records an unacknowledged delivery for client ack modes. It
// returns false when the connection refused the write (closing or over its outbound limit);
// nothing is recorded then. q and seq locate the message in its PointQueue (nil, 0 for events). Must be called
// without c.mu held.
func (c *Conn) deliver(sub *Subscription, m *message.Message, q *PointQueue, seq uint64, deliveryCount int) bool {
	return c.deliverFrom(sub, m, q, nil, seq, deliveryCount)
}

// deliverFrom is deliver with the events-store origin (ls) when there is one; such a delivery
// carries a sequence header.
func (c *Conn) deliverFrom(sub *Subscription, m *message.Message, q *PointQueue, ls *logSub, seq uint64, deliveryCount int) bool {
	c.mu.Lock()
	if c.closed || sub.closed {
		c.mu.Unlock()
		return false
	}
	d := message.Delivery{Subscription: sub.ID, Redelivered: deliveryCount > 1}
	var dl *delivery
	if sub.Ack != AckAuto {
		key, hdr := ackKeyLocked(c, sub, m.ID)
		d.AckID = hdr
		dl = &delivery{key: key, sub: sub, msg: m, q: q, seq: seq, log: ls}
	}
	if deliveryCount > 1 {
		d.Extra = []frame.Header{{Key: "delivery-count", Value: strconv.Itoa(deliveryCount)}}
	}
	if ls != nil {
		d.Extra = append(d.Extra, frame.Header{Key: "sequence", Value: strconv.FormatUint(seq, 10)})
	}
	v := c.w.Version()
	shared, dropped := m.Shared(v)
	if dropped > 0 && c.egressDropped != nil {
		c.egressDropped.Add(uint64(dropped))
	}
	prefix := frame.GetBuf()
	prefix.B = message.AppendPrefix(prefix.B, &d, v)
	if !c.w.WriteMessage(prefix, shared) {
		frame.PutBuf(prefix)
		sub.stalled = true
		c.mu.Unlock()
		return false
	}
	if dl != nil {
		c.pending[dl.key] = dl
		sub.pending = append(sub.pending, dl)
	}
	c.mu.Unlock()
	sub.Delivered.Add(1)
	return true
}

// hasCreditLocked reports whether sub may take another delivery. c.mu must be held.
func (sub *Subscription) hasCreditLocked() bool {
	if sub.closed || sub.stalled {
		return false
	}
	if sub.Ack == AckAuto {
		return true
	}
	return len(sub.pending)+sub.acking < sub.Prefetch
}

func (sub *Subscription) hasCredit() bool {
	sub.Conn.mu.Lock()
	defer sub.Conn.mu.Unlock()
	return sub.hasCreditLocked()
}

// removePendingLocked removes d from its subscription's pending list. c.mu must be held.
func removePendingLocked(c *Conn, d *delivery) {
	delete(c.pending, d.key)
	p := d.sub.pending
	for i, x := range p {
		if x == d {
			copy(p[i:], p[i+1:])
			p[len(p)-1] = nil
			d.sub.pending = p[:len(p)-1]
			return
		}
	}
}

// resolved is the outcome of an ACK or NACK for one message.
type resolved struct {
	sub *Subscription
	q   *PointQueue
	seq uint64
	log *logSub
}

// takeAckLocked finds the deliveries an ACK/NACK of key resolves. For AckClient ACK it is
// every earlier pending delivery of the subscription too (cumulative). c.mu must be held.
func (c *Conn) takeAckLocked(key, subID string, cumulative bool) ([]resolved, bool) {
	d, ok := c.lookupLocked(key, subID)
	if !ok {
		return nil, false
	}
	var out []resolved
	if cumulative && d.sub.Ack == AckClient {
		p := d.sub.pending
		n := 0
		for i, x := range p {
			out = append(out, resolved{x.sub, x.q, x.seq, x.log})
			delete(c.pending, x.key)
			if x == d {
				n = i + 1
				break
			}
		}
		copy(p, p[n:])
		clear(p[len(p)-n:])
		d.sub.pending = p[:len(p)-n]
		return out, true
	}
	removePendingLocked(c, d)
	return []resolved{{d.sub, d.q, d.seq, d.log}}, true
}

func (c *Conn) lookupLocked(key, subID string) (*delivery, bool) {
	if c.w.Version() >= frame.V12 {
		d, ok := c.pending[key]
		return d, ok
	}
	if subID != "" {
		d, ok := c.pending[subID+"\x00"+key]
		return d, ok
	}
	for id := range c.subs { // STOMP 1.0 ACK names only the message-id
		if d, ok := c.pending[id+"\x00"+key]; ok {
			return d, true
		}
	}
	return nil, false
}
