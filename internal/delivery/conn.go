package delivery

import (
	"sort"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/titan-broker/titan/internal/dest"
	"github.com/titan-broker/titan/internal/frame"
	"github.com/titan-broker/titan/internal/lockorder"
	"github.com/titan-broker/titan/internal/message"
	"github.com/titan-broker/titan/internal/selector"
)

// Subscription is one SUBSCRIBE of one connection.
type Subscription struct {
	ID       string           // the subscription id header (or the destination for STOMP 1.0)
	Conn     *Conn            // owning connection
	Group    string           // group the subscription matches
	Dest     dest.Destination // destination or (events only) wildcard filter
	Ack      AckMode
	Prefetch int // max unacknowledged deliveries in client modes; > 0

	// Start is where an events-store subscription begins (start-position header).
	Start StartPosition
	// DurableName makes an events-store subscription's position survive reconnects and
	// restarts (durable-name header); "" for none.
	DurableName string
	// Allow, when set, is asked per message on the events fan-out: a message whose concrete
	// channel it refuses is skipped (not delivered, not counted as dropped). Authorization
	// sets it on events subscriptions. Called concurrently from publishers; must be fast.
	Allow func(channel string) bool
	// Selector, when set, is the subscription's JMS message selector (the selector header,
	// compiled once): only messages it selects are delivered to it (Selects). Events skip
	// the others for it; a queue leaves them for its other consumers. Immutable once the
	// subscription is shared; nil selects everything.
	Selector *selector.Selector

	// Owner is the pattern the subscription belongs to; its Subscribe sets it before the
	// subscription is shared.
	Owner Owner

	feed atomic.Pointer[feedRef] // what delivers to it, kicked when credit frees up

	// guarded by Conn.mu
	pending []*delivery // unacknowledged deliveries in delivery order
	closed  bool
	stalled bool // a write was refused for outbound limits; resume on drain
	acking  int  // deliveries taken by an ACK/NACK that their source has not settled yet

	head  *frame.Buf    // constant MESSAGE head of an auto-ack first delivery (headLocked)
	headV frame.Version // the version head is encoded at

	// held are events messages fanned out while the (client-ack) subscription was at its
	// prefetch, in fan-out order, written as ACKs free credit (event.go); heldTimer is the
	// slow-consumer timer armed while any are held.
	held         []heldEvent
	heldTimer    *time.Timer
	heldProgress bool // an ACK wrote held messages since heldTimer was armed

	Delivered atomic.Uint64 // MESSAGE frames written
	Dropped   atomic.Uint64 // events not delivered because the subscription or connection was full
}

type feedRef struct{ f Feed }

// Selects reports whether s's Selector selects m (true when s has none). It allocates
// nothing and takes no lock; safe for concurrent use.
func (s *Subscription) Selects(m *message.Message) bool {
	if s.Selector == nil {
		return true
	}
	return s.Selector.Matches(selectable{m})
}

// Selectable returns m as a selector reads it (selector.Message; see selectable), for a
// selector evaluated outside a subscription (a durable topic subscription's, on what enters
// its queue). It allocates nothing.
func Selectable(m *message.Message) selector.Message { return selectable{m} }

// selectable is a message as a selector reads it (selector.Message): its headers, and the
// broker-set message-id, timestamp and persistence behind JMSMessageID, JMSTimestamp and
// JMSDeliveryMode, and its priority as message.Message.Priority reads it (JMSPriority). One pointer, so passing it as an interface allocates nothing.
type selectable struct{ m *message.Message }

func (v selectable) Header(key string) (string, bool) { return v.m.Header(key) }
func (v selectable) MessageID() string                { return v.m.ID }
func (v selectable) TimestampMs() int64               { return v.m.TimestampMs }
func (v selectable) Persistent() bool                 { return v.m.Persistent }
func (v selectable) Priority() int                    { return int(v.m.Priority()) }

// Identity returns the identity the subscription consumes (for events, its filter).
func (s *Subscription) Identity() dest.Identity { return dest.IdentityOf(s.Group, s.Dest) }

// SetFeed records what delivers to s (nil for none).
func (s *Subscription) SetFeed(f Feed) {
	if f == nil {
		s.feed.Store(nil)
		return
	}
	s.feed.Store(&feedRef{f})
}

// Feed returns what delivers to s, or nil.
func (s *Subscription) Feed() Feed {
	if r := s.feed.Load(); r != nil {
		return r.f
	}
	return nil
}

// hasCreditLocked reports whether sub may take another delivery. Conn.mu held.
func (s *Subscription) hasCreditLocked() bool {
	if s.closed || s.stalled {
		return false
	}
	if s.Ack == AckAuto {
		return true
	}
	return len(s.pending)+s.acking < s.Prefetch
}

// headLocked returns the MESSAGE head of a delivery to s that carries no per-delivery
// header (auto ack, first delivery, no sequence): "MESSAGE", then the subscription header,
// encoded at v. It is made once (per version) and shared by every such delivery as a static
// frame.Buf, so that a delivery neither takes a pooled Buf nor encodes a head. Conn.mu held.
func (s *Subscription) headLocked(v frame.Version) *frame.Buf {
	if s.head == nil || s.headV != v {
		d := message.Delivery{Subscription: s.ID}
		s.head = frame.StaticBuf(func(b []byte) []byte { return message.AppendPrefix(b, &d, v) })
		s.headV = v
	}
	return s.head
}

// HasCredit reports whether s may take another delivery now: it is open, its writer did not
// refuse the last one, and (client ack modes) fewer than Prefetch deliveries are
// unacknowledged.
func (s *Subscription) HasCredit() bool {
	s.Conn.mu.Lock()
	defer s.Conn.mu.Unlock()
	return s.hasCreditLocked()
}

// delivery is one unacknowledged MESSAGE.
type delivery struct {
	key string
	sub *Subscription
	src Source // where the message came from; nil when nothing settles (events, requests)
	seq uint64 // sequence within src
}

// Conn is the delivery-side state of one connection: its subscriptions and unacknowledged
// deliveries. Safe for concurrent use; Conn.mu is taken after a queue's lock, never before.
type Conn struct {
	w Writer

	mu      lockorder.Mutex[lockorder.ConnRank] // guards the fields below and every Subscription's guarded fields
	subs    map[string]*Subscription            // by subscription id, made by the first subscribe (idle connections hold none); guarded by mu
	pending map[string]*delivery                // by ack key, made by the first delivery awaiting an ACK; guarded by mu
	nextTag uint64                              // guarded by mu
	closed  bool                                // guarded by mu
	// heldBytes is the size of the events messages held for the subscriptions' credit
	// (event.go); slow is set once delivery closed the connection as a slow consumer.
	heldBytes int64 // guarded by mu
	slow      bool  // guarded by mu

	// PendingRequests is the number of requests (commands, queries) this connection sent
	// that await their response or timeout; the request/response pattern keeps it to bound
	// them per connection.
	PendingRequests atomic.Int64

	egressDropped *atomic.Uint64   // counter of headers left out on egress; may be nil
	latency       Observer         // publish-to-deliver seconds; may be nil
	now           func() time.Time // latency's clock (Registry.Now)
}

// NewConn returns the delivery state for a connection writing through w. egressDropped,
// when not nil, counts headers left out of MESSAGE frames that w's STOMP version cannot
// represent.
func NewConn(w Writer, egressDropped *atomic.Uint64) *Conn {
	return &Conn{w: w, egressDropped: egressDropped}
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

// Subscribed reports whether one of c's active subscriptions consumes exactly id (same
// group, pattern and channel; a wildcard filter does not count). It scans c's subscriptions
// (at most the per-connection subscription limit); the router asks it when a SEND's reply-to
// names one of the connection's own temp-queues.
func (c *Conn) Subscribed(id dest.Identity) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, s := range c.subs {
		if s.Group == id.Group && s.Dest.Pattern == id.Pattern && s.Dest.Channel == id.Channel {
			return true
		}
	}
	return false
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

// Add registers sub on its connection (before its pattern starts delivering). It also
// defaults a zero Prefetch. Errors: ErrDuplicateSubscription.
func (c *Conn) Add(sub *Subscription) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, dup := c.subs[sub.ID]; dup {
		return ErrDuplicateSubscription
	}
	if sub.Prefetch <= 0 {
		sub.Prefetch = DefaultPrefetch
	}
	if c.subs == nil {
		c.subs = make(map[string]*Subscription)
	}
	c.subs[sub.ID] = sub
	return nil
}

// DefaultPrefetch is the unacknowledged-delivery limit of a subscription added without one.
const DefaultPrefetch = 1000

// Unsubscribe removes the subscription id and detaches it from its pattern; its
// unacknowledged messages are handed back (queues redeliver them). Errors:
// ErrUnknownSubscription.
func (c *Conn) Unsubscribe(id string) error {
	c.mu.Lock()
	sub, ok := c.subs[id]
	if ok {
		delete(c.subs, id)
	}
	c.mu.Unlock()
	if !ok {
		return ErrUnknownSubscription
	}
	c.Detach(sub)
	return nil
}

// Remove forgets sub without telling its Owner (a SUBSCRIBE its pattern refused).
func (c *Conn) Remove(sub *Subscription) {
	c.mu.Lock()
	if c.subs[sub.ID] == sub {
		delete(c.subs, sub.ID)
	}
	c.mu.Unlock()
}

// Detach ends sub: no more deliveries are recorded for it, and its Owner is told, with its
// unacknowledged deliveries in consumption order.
func (c *Conn) Detach(sub *Subscription) {
	c.mu.Lock()
	if c.subs[sub.ID] == sub {
		delete(c.subs, sub.ID)
	}
	sub.closed = true
	sub.dropHeldLocked()
	var unacked []Unacked
	for _, d := range sub.pending { // consumption order
		delete(c.pending, d.key)
		if d.src != nil {
			unacked = append(unacked, Unacked{Source: d.src, Seq: d.seq})
		}
	}
	sub.pending = nil
	c.mu.Unlock()
	if sub.Owner != nil {
		sub.Owner.Detach(sub, unacked)
	}
}

// Close detaches every subscription of c, in subscription-id order so that redelivery
// order is deterministic. Later deliveries to c are refused.
func (c *Conn) Close() {
	c.mu.Lock()
	c.closed = true
	subs := make([]*Subscription, 0, len(c.subs))
	for _, s := range c.subs {
		subs = append(subs, s)
	}
	c.mu.Unlock()
	sort.Slice(subs, func(i, j int) bool { return subs[i].ID < subs[j].ID })
	for _, s := range subs {
		c.Detach(s)
	}
}

// Resume is called when c's writer drained below its limit: the feeds of subscriptions
// whose deliveries were refused are kicked.
func (c *Conn) Resume() {
	c.mu.Lock()
	var feeds []Feed
	for _, s := range c.subs {
		if s.stalled {
			s.stalled = false
			if f := s.Feed(); f != nil {
				feeds = append(feeds, f)
			}
		}
	}
	c.mu.Unlock()
	for _, f := range feeds {
		f.Kick()
	}
}

// Deliver writes m to sub. It records an unacknowledged delivery for client ack modes, to be
// settled by src (nil: nothing to settle) as sequence seq. deliveryCount > 1 marks a
// redelivery. It returns false when the connection refused the write (closing or over its
// outbound limit): nothing is recorded then and sub is stalled until Resume. Must be called
// without c.mu held.
func (c *Conn) Deliver(sub *Subscription, m *message.Message, src Source, seq uint64, deliveryCount int) bool {
	return c.deliver(sub, m, src, seq, deliveryCount, false)
}

// DeliverSequenced is Deliver for a message read from a log: the MESSAGE carries its
// sequence header.
func (c *Conn) DeliverSequenced(sub *Subscription, m *message.Message, src Source, seq uint64) bool {
	return c.deliver(sub, m, src, seq, 1, true)
}

func (c *Conn) deliver(sub *Subscription, m *message.Message, src Source, seq uint64, deliveryCount int, sequenced bool) bool {
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
		dl = &delivery{key: key, sub: sub, src: src, seq: seq}
	}
	if deliveryCount > 1 {
		d.Extra = []frame.Header{{Key: "delivery-count", Value: strconv.Itoa(deliveryCount)}}
	}
	if sequenced {
		d.Sequence = seq
	}
	v := c.w.Version()
	shared, dropped := m.Shared(v)
	if dropped > 0 && c.egressDropped != nil {
		c.egressDropped.Add(uint64(dropped))
	}
	var prefix *frame.Buf
	if dl == nil && d.Extra == nil && !d.Redelivered && !sequenced {
		prefix = sub.headLocked(v)
	} else {
		prefix = frame.GetBuf()
		prefix.B = message.AppendPrefix(prefix.B, &d, v)
	}
	if !c.w.WriteMessage(prefix, shared) {
		frame.PutBuf(prefix)
		sub.stalled = true
		c.mu.Unlock()
		return false
	}
	if c.latency != nil && m.TimestampMs > 0 {
		c.latency.Observe(max(0, float64(c.now().UnixMilli()-m.TimestampMs)/1e3))
	}
	if dl != nil {
		if c.pending == nil {
			c.pending = make(map[string]*delivery)
		}
		c.pending[dl.key] = dl
		sub.pending = append(sub.pending, dl)
	}
	c.mu.Unlock()
	sub.Delivered.Add(1)
	return true
}

// Registry creates connections' delivery state and forwards the router's per-connection
// operations to them (the router's Deliveries port). The zero value is ready; EgressDropped
// may be set to count headers left out on egress.
type Registry struct {
	EgressDropped *atomic.Uint64
	// Latency, when set, observes each MESSAGE's publish-to-deliver time in seconds: from
	// the broker's acceptance (message timestamp, ms resolution) to its hand-off to the
	// connection's writer.
	Latency Observer
	// Now is the clock Latency is measured with (default time.Now; the broker passes a
	// millisecond clock.Coarse, as precise as the message timestamp it is compared with).
	Now func() time.Time
}

// Observer takes one observation (prometheus.Histogram implements it).
type Observer interface{ Observe(float64) }

// NewConn returns the delivery state of a connection writing through w.
func (r *Registry) NewConn(w Writer) *Conn {
	c := NewConn(w, r.EgressDropped)
	c.latency = r.Latency
	c.now = r.Now
	if c.now == nil {
		c.now = time.Now
	}
	return c
}

// Unsubscribe is c.Unsubscribe(id).
func (r *Registry) Unsubscribe(c *Conn, id string) error { return c.Unsubscribe(id) }

// Ack is c.Ack(key, subID, nack).
func (r *Registry) Ack(c *Conn, key, subID string, nack bool) error { return c.Ack(key, subID, nack) }

// CloseConn is c.Close().
func (r *Registry) CloseConn(c *Conn) { c.Close() }

// OldestPending returns the ack key of s's oldest unacknowledged delivery (what its client
// would ACK next in order); ok is false when none is pending. For tools and tests.
func (s *Subscription) OldestPending() (key string, ok bool) {
	s.Conn.mu.Lock()
	defer s.Conn.mu.Unlock()
	if len(s.pending) == 0 {
		return "", false
	}
	return s.pending[0].key, true
}
