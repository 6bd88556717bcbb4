package router

import (
	"fmt"

	"errors"
	"strconv"
	"strings"

	"github.com/titan-broker/titan/internal/delivery"
	"github.com/titan-broker/titan/internal/dest"
	"github.com/titan-broker/titan/internal/frame"
	"github.com/titan-broker/titan/internal/message"
	"github.com/titan-broker/titan/internal/selector"
)

// groupStage resolves the group header (DESIGN §3): absent or empty is "default"; a name
// outside ^[a-zA-Z0-9_-]{1,64}$ is an error that closes the connection. On a scoped route
// (temp-queues, scoped by their owning connection) the header is ignored.
type groupStage struct{ scoped bool }

func (s groupStage) Apply(c *Context) {
	g := dest.DefaultGroup
	if !s.scoped {
		var ok bool
		if g, ok = FrameGroup(c.Frame); !ok {
			failGroup(c)
			return
		}
	}
	c.Identity = dest.IdentityOf(g, c.Dest)
}

// FrameGroup returns the group f names (DESIGN §3): its group header, dest.DefaultGroup when
// the header is absent or empty; ok is false for a name outside ^[a-zA-Z0-9_-]{1,64}$, which
// the router refuses with the ERROR "invalid group" (on SEND, SUBSCRIBE and an UNSUBSCRIBE
// that deletes a durable subscription). For stages that read the group of a frame before the
// router does (authorization).
func FrameGroup(f *frame.Frame) (group string, ok bool) {
	g := f.Value(frame.HdrGroup)
	if g == "" {
		return dest.DefaultGroup, true
	}
	return g, dest.ValidGroup(g)
}

// failGroup records the ERROR for an invalid group header.
func failGroup(c *Context) { c.fail("invalid group", "group names match ^[a-zA-Z0-9_-]{1,64}$") }

// maxDelayMs bounds the delay header: one year, in milliseconds.
const maxDelayMs = 365 * 24 * 3600 * 1000

// messageStage builds the Message of a SEND: header mapping (DESIGN §6), then the native
// metadata of an in-process publisher (Context.Native), broker-assigned message-id and
// timestamp, persistence, expiry and scheduling (read from the mapped headers).
type messageStage struct {
	clock    Clock // scheduled delivery times
	stamp    Clock // the message timestamp (millisecond precision)
	idPrefix string
}

func (s messageStage) Apply(c *Context) {
	f := c.Frame
	var scratch [16]frame.Header
	hdrs := MapIngress(scratch[:0], f.Headers)
	for _, h := range c.Native() {
		hdrs = setHeader(hdrs, h.Key, h.Value)
	}
	now := s.stamp().UnixMilli()
	var destBuf [128]byte
	parts := message.Parts{
		IDPrefix:    s.idPrefix,
		Group:       c.Identity.Group,
		Destination: c.Identity.AppendOwnerDestination(destBuf[:0]), // a temp-queue's owner sees the name it used
		Headers:     hdrs,
		Body:        f.Body,
		TimestampMs: now,
		Persistent:  headerValue(hdrs, frame.HdrPersistent) != "false",
	}
	if v := headerValue(hdrs, frame.HdrExpires); v != "" && v != "0" {
		ms, err := strconv.ParseInt(v, 10, 64)
		if err != nil || ms < 0 {
			c.failWith("invalid expires header", "expires is an absolute time in Unix milliseconds", message.ErrInvalidHeader)
			return
		}
		parts.ExpiresMs = ms
	}
	if v, ok := getHeader(hdrs, frame.HdrPriority); ok {
		if _, ok := message.ParsePriority(v); !ok {
			c.failWith("invalid priority header", "priority is a number from 0 (lowest) to 9 (highest); 4 when absent", message.ErrInvalidHeader)
			return
		}
	}
	if parts.ExpiresMs == 0 { // RabbitMQ's per-message TTLs (controlStage checked them)
		for _, k := range [...]string{hdrMessageTTL, hdrExpiration} {
			if v := headerValue(hdrs, k); v != "" {
				if ms, err := strconv.ParseInt(v, 10, 64); err == nil && ms > 0 {
					parts.ExpiresMs = now + ms
					break
				}
			}
		}
	}
	if v := headerValue(hdrs, "delay"); v != "" {
		ms, err := strconv.ParseInt(v, 10, 64)
		if err != nil || ms < 0 || ms > maxDelayMs {
			c.failWith("invalid delay header", "delay is a number of milliseconds from 0 to 31536000000 (one year)", message.ErrInvalidHeader)
			return
		}
		if ms > 0 {
			// The exact clock: a coarse one may lag, and the message would be due early.
			parts.DeliverAtMs = s.clock().UnixMilli() + ms
		}
	}
	m := message.Pack(&parts)
	// The identity's strings are the connection's detached copies, not slices of m: the
	// patterns may keep an Identity (a queue's map key) far longer than m.
	id := c.Identity
	id.Group, id.Channel = c.Conn.intern(id.Group), c.Conn.intern(id.Channel)
	if id.Group != "" {
		m.Group = id.Group // before m is shared: the same value, without holding m's block
	}
	c.Message = m
	c.Identity = id
}

// duplicateStage is duplicate detection (DESIGN: Durability): a SEND whose duplicate id
// header (Options.DuplicateHeader) repeats an id seen on the same destination within the
// window is not stored, created or delivered; it halts with success, so its RECEIPT is
// still written and a producer retrying after a lost RECEIPT cannot create a duplicate. A
// new id is remembered before the store stage (journaled with the message's durability)
// and forgotten again if the SEND then fails.
type duplicateStage struct {
	port   Duplicates
	header string
}

func (s duplicateStage) Apply(c *Context) {
	dupID, ok := c.Message.Header(s.header)
	if !ok || dupID == "" {
		return
	}
	dup, settle, err := s.port.Claim(c.Identity, dupID)
	switch {
	case err != nil:
		c.failWith(storeRefusal(err), "the message was not accepted: "+err.Error(), err)
	case dup:
		if p := c.Conn.pipe; p != nil {
			p.drain() // its RECEIPT must not overtake earlier deferred SENDs'
		}
		c.Halt = true // answered (RECEIPT) without being stored or delivered again
	default:
		c.settle = settle
		c.Message.DuplicateClaimed = true // before m is shared: the store writes the id with it
	}
}

// destinationStage creates the SEND's destination (queue, temp-queue, events-store log)
// before anything is stored for it, under the broker-wide bound (the Destinations port:
// dispatch.Options.MaxDestinations) and the connection's (MaxDestinationsPerConnection, or
// MaxTempQueuesPerConnection for its own temp-queues). A refusal is an ERROR naming the
// limit ("destination limit reached", "temp-queue limit reached") and nothing is created:
// no queue, no stream, no metadata. An existing destination costs one map lookup.
type destinationStage struct {
	port Destinations
	opts *Options
	temp bool
}

func (s destinationStage) Apply(c *Context) {
	admitDestination(c, s.port, s.opts, c.Identity, s.temp)
}

// admitDestination creates id's destination for c's connection unless it exists, under the
// broker-wide bound and the connection's (MaxDestinationsPerConnection, or
// MaxTempQueuesPerConnection for its own temp-queues: temp); it reports false after failing
// c with the ERROR naming the limit (nothing created). Every destination a frame makes —
// a SEND's, a request's reply-to — is admitted here.
func admitDestination(c *Context, port Destinations, opts *Options, id dest.Identity, temp bool) bool {
	if port.Exists(id) {
		return true
	}
	counter, max, name := &c.Conn.created, opts.MaxDestinationsPerConnection, "destination"
	if temp {
		first, _, _ := strings.Cut(id.Channel, ".")
		if first != c.Conn.Client.ID() {
			counter = nil // a reply to another connection's temp-queue: the broker-wide bound only
		} else {
			counter, max, name = &c.Conn.tempMade, opts.MaxTempQueuesPerConnection, "temp-queue"
		}
	}
	if counter != nil && max > 0 && counter.Load() >= int64(max) {
		if r, ok := port.(interface{ CountRefusal() }); ok {
			r.CountRefusal()
		}
		c.failWith(name+" limit reached", "this connection may create at most "+strconv.Itoa(max)+" "+name+"s (max-"+name+"s-by-client)",
			fmt.Errorf("%w: per connection", ErrDestinationLimit))
		return false
	}
	created, err := port.Ensure(id)
	if err != nil {
		failPublish(c, err, "the destination")
		return false
	}
	if created && counter != nil {
		counter.Add(1)
	}
	return true
}

// storeStage is durable acceptance (DESIGN §5): a persistent message of a durable pattern is
// committed to the store, fsync'd, before it is published, so the RECEIPT the final stage
// writes means the message survives a crash. A SEND with persistent:false skips it, unless
// the route stores always (events-store: it is a log).
//
// A queue SEND without a receipt is stored lazily when the Persister allows it
// (LazyPersister): it is published before its commit (see deferTail), and its commit starts
// only when the connection's pipeline awaits it, so a consumer that takes and acknowledges
// it meanwhile spares its write and fsync. A SEND that asked for a receipt starts its commit
// at once: its RECEIPT, which waits for the commit, is not delayed.
type storeStage struct {
	store  Persister
	lazy   LazyPersister // store, when it implements LazyPersister and the route publishes early; else nil
	always bool
}

// newStoreStage returns the store stage of a route; always is set for a route that stores
// every SEND (events-store), which is published only after its commit.
func newStoreStage(p Persister, always bool) storeStage {
	s := storeStage{store: p, always: always}
	if lp, ok := p.(LazyPersister); ok && !always {
		s.lazy = lp
	}
	return s
}

func (s storeStage) Apply(c *Context) {
	if s.store == nil || (!c.Message.Persistent && !s.always) {
		// Not stored. Earlier deferred SENDs of this connection must be published first.
		if p := c.Conn.pipe; p != nil {
			p.drain()
		}
		return
	}
	if !c.Replay && (c.Conn.unpublished || (c.Conn.pipe != nil && c.Conn.pipe.failed())) {
		// An earlier SEND of this connection failed fatally: this one is neither published
		// nor answered (the connection closes on that ERROR), so it is not stored either —
		// a crash would otherwise deliver a message its producer never saw accepted.
		c.durable = notStored
		return
	}
	if c.Replay || !c.Conn.pipelined {
		if err := s.store.Persist(c.Identity, c.Message); err != nil {
			c.failWith(storeRefusal(err), "the broker could not store the message; it was not accepted", fmt.Errorf("%w: %w", ErrNotStored, err))
		}
		return
	}
	var (
		wait func() error
		err  error
	)
	if s.lazy != nil && c.Receipt == "" {
		wait, err = s.lazy.PersistLazy(c.Identity, c.Message)
	} else {
		wait, err = s.store.PersistAsync(c.Identity, c.Message)
	}
	if err != nil {
		c.failWith(storeRefusal(err), "the broker could not store the message; it was not accepted", fmt.Errorf("%w: %w", ErrNotStored, err))
		return
	}
	c.durable = wait // the router finishes the route on the connection's pipeline
}

// errNotStored is the wait of a SEND the store stage did not store because an earlier SEND
// of its connection failed fatally (see storeStage): its deferred answer finds the pipeline
// failed and drops it unanswered, and forgets nothing.
var errNotStored = errors.New("router: not stored after an earlier fatal error")

func notStored() error { return errNotStored }

// publishStage hands the message to its pattern's port (the route's last stage). A message
// that was stored and then refused admission is deleted again.
type publishStage struct {
	port  Publisher
	store Persister
}

func (s publishStage) Apply(c *Context) {
	dropped, err := s.port.Publish(c.Identity, c.Message, c.Conn.Client.Done())
	if err == nil {
		if c.ext != nil {
			c.ext.dropped = dropped
		}
		if dropped && s.store != nil {
			// The DROP policy discarded the message: its stored copy goes too, or the next
			// start would deliver it. Its RECEIPT, if asked, reports the discard.
			forgetDurably(c, s.store, c.Receipt != "")
		}
		return
	}
	if s.store != nil {
		defer forgetDurably(c, s.store, true) // after failWith: its ERROR follows the removal
	}
	failPublish(c, err, "the destination")
}

// failPublish records the ERROR for err, a pattern's refusal to create a destination or to
// take a message for it; where names what refused it in the ERROR's detail ("the
// destination", "a durable subscription of this topic").
func failPublish(c *Context, err error, where string) {
	switch {
	case errors.Is(err, ErrDestinationLimit):
		c.failWith("destination limit reached", "the broker holds its maximum number of destinations (max-destinations); send to an existing one", err)
	case errors.Is(err, ErrGroupLimit):
		c.failWith("group limit reached", "the broker holds destinations in its maximum number of groups (max-groups); use an existing group", err)
	case errors.Is(err, ErrQueueFull):
		c.failWith("queue full", where+" is full; retry later", err)
	case errors.Is(err, ErrCanceled):
		c.failWith("server shutting down", "the message was not accepted", err)
	case errors.Is(err, ErrQueuePaused):
		c.failWith("queue paused", "an operator paused "+where+"; retry after it is resumed", err)
	default:
		c.failWith("publish failed", "the message could not be given to "+where+"; it was not accepted", err)
	}
}

// forgetDurably removes the stored copy of c's message, which the publish stage did not
// enqueue (refused, or discarded by policy). When answered is set — an answer (an ERROR, or
// the RECEIPT of a discarded SEND) will tell the client that the broker did not take the
// message — the removal is made durable first (Syncer), as a RECEIPT for an ACK is: a crash
// after that answer must not deliver the message. A failed sync is the store's own failure
// (it reports it); the answer stands.
func forgetDurably(c *Context, p Persister, answered bool) {
	if c.Message.Sequence == 0 {
		return // not stored
	}
	p.Forget(c.Identity, c.Message)
	if sy, ok := p.(Syncer); ok && answered {
		_ = sy.Sync()
	}
}

// subscriptionStage validates a SUBSCRIBE's headers (id, ack, prefetch-count) and the
// connection's subscription limit, and builds the Subscription its pattern will register.
type subscriptionStage struct{ opts *Options }

func (s subscriptionStage) Apply(c *Context) {
	f := c.Frame
	id, _ := f.Get(frame.HdrID)
	if id == "" {
		if c.Conn.Client.Version() >= frame.V11 {
			c.fail("missing id header", "SUBSCRIBE requires an id header")
			return
		}
		id = f.Value(frame.HdrDestination) // STOMP 1.0: the destination identifies the subscription
	}
	mode, ok := delivery.ParseAckMode(f.Value(frame.HdrAck))
	if !ok {
		c.fail("invalid ack mode", "ack must be auto, client or client-individual")
		return
	}
	prefetch := s.opts.DefaultPrefetch
	if v, ok := f.Get(hdrPrefetchSize); ok { // ActiveMQ's spelling (checked by controlStage)
		if n, err := strconv.Atoi(v); err == nil && n > 0 {
			prefetch = min(n, s.opts.MaxPrefetch)
		}
	}
	if v, ok := f.Get("prefetch-count"); ok {
		n, err := strconv.Atoi(v)
		if err != nil || n <= 0 {
			c.fail("invalid prefetch-count", "prefetch-count is a positive number of messages")
			return
		}
		prefetch = min(n, s.opts.MaxPrefetch)
	}
	var sel *selector.Selector
	if v, ok := f.Get(hdrSelector); ok && strings.TrimSpace(v) != "" {
		var err error
		if sel, err = selector.Compile(strings.Clone(v)); err != nil {
			c.fail("invalid selector", err.Error())
			return
		}
	}
	if c.Conn.Delivery.SubscriptionCount() >= s.opts.MaxSubscriptions {
		c.fail("too many subscriptions", "the per-connection subscription limit is "+strconv.Itoa(s.opts.MaxSubscriptions))
		return
	}
	d := c.Dest
	d.Channel = strings.Clone(d.Channel)
	c.ext = &contextExt{sub: &delivery.Subscription{
		ID: strings.Clone(id), Conn: c.Conn.Delivery, Group: strings.Clone(c.Identity.Group),
		Dest: d, Ack: mode, Prefetch: prefetch, Allow: c.Allow(), Selector: sel,
	}}
}

// hdrSelector is the SUBSCRIBE header carrying a JMS message selector (ActiveMQ, Artemis).
const hdrSelector = "selector"

// logPositionStage reads where an events-store subscription starts (start-position) and
// whether its position is kept (durable-name).
type logPositionStage struct{ clock Clock }

func (s logPositionStage) Apply(c *Context) {
	f, sub := c.Frame, c.Subscription()
	start, err := delivery.ParseStartPosition(f.Value("start-position"), s.clock())
	if err != nil {
		c.fail("invalid start-position", "start-position is new, first, last, a sequence number, time:<RFC 3339> or delta:<duration>")
		return
	}
	sub.Start = start
	if dn := f.Value("durable-name"); dn != "" {
		if !dest.ValidGroup(dn) {
			c.fail("invalid durable-name", "durable names match ^[a-zA-Z0-9_-]{1,64}$")
			return
		}
		sub.DurableName = strings.Clone(dn)
	}
}

// attachStage hands the subscription to its pattern's port (the route's last stage).
type attachStage struct{ port Subscriber }

func (s attachStage) Apply(c *Context) {
	sub := c.Subscription()
	if sub.Selector != nil {
		if !HonoursSelectors(s.port) {
			c.fail("selector not supported", "the selector header cannot be honoured on /"+c.Identity.Pattern.Prefix()+
				"/ destinations by this broker (it is on /topic/ and /queue/ in single-node mode); subscribe without it")
			return
		}
	}
	switch err := s.port.Subscribe(sub); {
	case err == nil:
	case errors.Is(err, delivery.ErrDuplicateSubscription):
		c.fail("duplicate subscription id", "subscription "+frame.Echo(sub.ID)+" is already active")
	case errors.Is(err, ErrDurableSubscriptionLimit):
		c.failWith("durable subscription limit reached", "the broker holds its maximum number of durable subscriptions (max-durable-subscriptions); reuse a durable-name or ask an operator to delete unused ones", err)
	case errors.Is(err, ErrDurableSubscriptionInUse):
		// Cluster mode: one live SUBSCRIBE per durable-name (README, cluster differences).
		c.failWith("durable subscription in use", strings.TrimPrefix(err.Error(), "cluster: ")+
			"; in cluster mode one SUBSCRIBE at a time reads a durable-name", err)
	default:
		c.fail("subscribe failed", "the subscription could not be started")
	}
}

// unsubscribeStage removes a subscription through the delivery bookkeeping, which tells the
// subscription's own pattern; its unacknowledged queue messages are redelivered.
type unsubscribeStage struct {
	deliveries Deliveries
	topics     DurableTopics // deletes a durable subscription the UNSUBSCRIBE names (durable.go)
}

func (s unsubscribeStage) Apply(c *Context) {
	id, _ := c.Frame.Get(frame.HdrID)
	if id == "" {
		if c.Conn.Client.Version() >= frame.V11 {
			c.fail("missing id header", "UNSUBSCRIBE requires an id header")
			return
		}
		id = c.Frame.Value(frame.HdrDestination)
	}
	err := s.deliveries.Unsubscribe(c.Conn.Delivery, id)
	if deleteDurable(c, s.topics, err == nil) {
		return
	}
	if err != nil {
		c.fail("unknown subscription", "no active subscription "+frame.Echo(id))
	}
}

// ackStage acknowledges (or rejects) a delivery. STOMP 1.2 names it by the id header (the
// MESSAGE's ack header); 1.0 and 1.1 by message-id (and subscription on 1.1).
type ackStage struct {
	deliveries Deliveries
	nack       bool
	store      Persister // when it is a Syncer, an ACK with a receipt waits for durability
}

func (s ackStage) Apply(c *Context) {
	f := c.Frame
	var key, sub string
	if c.Conn.Client.Version() >= frame.V12 {
		key = f.Value(frame.HdrID)
		if key == "" {
			c.fail("missing id header", f.Command.String()+" requires an id header")
			return
		}
	} else {
		key = f.Value(frame.HdrMessageID)
		if key == "" {
			c.fail("missing message-id header", f.Command.String()+" requires a message-id header")
			return
		}
		sub = f.Value(frame.HdrSubscription)
	}
	s.apply(c, key, sub)
}

func (s ackStage) apply(c *Context, key, sub string) {
	if err := s.deliveries.Ack(c.Conn.Delivery, key, sub, s.nack); err != nil {
		c.fail("unknown ack id", "no unacknowledged message "+frame.Echo(key))
		return
	}
	if c.Receipt != "" && !c.Replay {
		syncAcks(c, s.store)
	}
}

// syncAcks makes the acknowledgements done so far durable before c's RECEIPT (see Syncer);
// a failure is an ERROR instead of the RECEIPT.
func syncAcks(c *Context, store Persister) {
	sy, ok := store.(Syncer)
	if !ok {
		return
	}
	if err := sy.Sync(); err != nil {
		c.failWith(storeRefusal(err), "the broker could not make the acknowledgement durable", fmt.Errorf("%w: %w", ErrNotStored, err))
	}
}

// finalStage answers the client exactly once (reference 004, FinalStage): ERROR and close on
// failure, RECEIPT when asked, and the close after DISCONNECT.
type finalStage struct{}

func (finalStage) Apply(c *Context) {
	cl := c.Conn.Client
	c.settleDuplicate() // answered now: a refused SEND's retry must not be taken for a duplicate
	if c.Err != nil {
		if c.Err.ReceiptID == "" {
			c.Err.ReceiptID = c.Receipt
		}
		cl.Fail(c.Err)
		return
	}
	if c.Receipt != "" {
		hdrs := append([]frame.Header{{Key: frame.HdrReceiptID, Value: c.Receipt}}, c.ReceiptHeaders...)
		cl.WriteFrame(&frame.Frame{Command: frame.CmdReceipt, Headers: hdrs})
	}
	if c.disconnect {
		cl.Disconnect()
	}
}

// disconnectStage is the DISCONNECT route's effect: Final closes the connection after its
// answer (the RECEIPT, when asked: STOMP 1.2 "graceful disconnect").
type disconnectStage struct{}

func (disconnectStage) Apply(c *Context) { c.disconnect = true }

// setHeader sets header k to v, replacing the first header of that name or appending one.
func setHeader(hs []frame.Header, k, v string) []frame.Header {
	for i := range hs {
		if hs[i].Key == k {
			hs[i].Value = v
			return hs
		}
	}
	return append(hs, frame.Header{Key: k, Value: v})
}

// headerValue returns the first header named k ("" when absent).
// getHeader returns the first header named k and whether there is one.
func getHeader(hs []frame.Header, k string) (string, bool) {
	for _, h := range hs {
		if h.Key == k {
			return h.Value, true
		}
	}
	return "", false
}

func headerValue(hs []frame.Header, k string) string {
	for _, h := range hs {
		if h.Key == k {
			return h.Value
		}
	}
	return ""
}

// existingQueueStage refuses a SEND or SUBSCRIBE that names a queue with a spelling that
// addresses an existing queue only (RabbitMQ's /amq/queue/<name>, dest.AddressesExisting)
// when the queue does not exist: RabbitMQ answers "NOT_FOUND - no queue '<name>' in vhost",
// and so does Titan (the group standing for the vhost), instead of creating it as /queue/
// would. It runs after authorization, so the answer tells nothing to a user who may not
// use the queue. Every other spelling costs one header lookup.
type existingQueueStage struct{ port QueueExistence }

func (s existingQueueStage) Apply(c *Context) {
	raw, _ := c.Frame.Get(frame.HdrDestination)
	if !dest.AddressesExisting(raw) || s.port.Exists(c.Identity) {
		return
	}
	name := c.Identity.Channel
	c.failWith("no queue '"+name+"'", "NOT_FOUND - no queue '"+name+"' in group '"+c.Identity.Group+
		"': /amq/queue/ addresses an existing queue (send to /queue/"+name+" to create it)", ErrNoQueue)
}
