package router

import (
	"fmt"
	"log/slog"
	"runtime/debug"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/titan-broker/titan/internal/delivery"
	"github.com/titan-broker/titan/internal/dest"
	"github.com/titan-broker/titan/internal/frame"
)

// Route names a fixed chain of stages.
type Route uint8

// Routes. RouteReject carries frames the resolver already failed (malformed destination,
// unsupported pattern) straight to Final.
const (
	RouteReject Route = iota
	RouteSendEvents
	RouteSendQueue
	RouteSendEventsStore
	RouteSendRequest
	RouteSendTempQueue
	RouteSubscribe
	RouteUnsubscribe
	RouteAck
	RouteNack
	RouteBegin
	RouteCommit
	RouteAbort
	RouteDisconnect
	numRoutes
)

var routeNames = [numRoutes]string{"reject", "send-events", "send-queue", "send-events-store", "send-request", "send-temp-queue", "subscribe", "unsubscribe", "ack", "nack", "begin", "commit", "abort", "disconnect"}

// String returns the route's name (used in metrics).
func (r Route) String() string {
	if r < numRoutes {
		return routeNames[r]
	}
	return "unknown"
}

// Stage is one bead on a route: it does one thing and records its outcome on the Context
// (reference 004, PipelineStage). It must not panic or block on a socket; a failure is
// recorded in c.Err, never returned.
type Stage interface {
	Apply(c *Context)
}

// StageFunc adapts a function to Stage.
type StageFunc func(c *Context)

// Apply calls f(c).
func (f StageFunc) Apply(c *Context) { f(c) }

// Options configure a Router. Zero values take the documented defaults.
type Options struct {
	// ReceiptLatency, when set, observes for every frame that asked for a receipt the seconds
	// from routing it to writing its RECEIPT (or ERROR), durable acceptance included.
	ReceiptLatency interface{ Observe(float64) }
	// DefaultPattern routes bare destinations (events, events-store or queues; default events).
	DefaultPattern dest.Pattern
	// MaxSubscriptions bounds subscriptions per connection (default 1000;
	// max-subscriptions-by-client).
	MaxSubscriptions int
	// MaxFramesInTransaction bounds the frames one transaction buffers (default 10000;
	// max-frame-in-transaction).
	MaxFramesInTransaction int
	// MaxTransactionBytes bounds the message bytes one transaction buffers (default 64 MiB).
	MaxTransactionBytes int
	// MaxTransactions bounds open transactions per connection (default 100).
	MaxTransactions int
	// MaxDestinationsPerConnection bounds the queues and events-store logs one
	// connection's SENDs create (default 1000; -1 unlimited; max-destinations-by-client).
	MaxDestinationsPerConnection int
	// MaxTempQueuesPerConnection bounds the temp-queues of its own one connection's SENDs
	// create (default 100; -1 unlimited; max-temp-queues-by-client).
	MaxTempQueuesPerConnection int
	// DefaultPrefetch is the unacknowledged-message limit of a subscription without a
	// prefetch-count header (default delivery.DefaultPrefetch).
	DefaultPrefetch int
	// MaxPrefetch caps prefetch-count (default 65535).
	MaxPrefetch int
	// RequestTimeout is the wait for a response when a request has no timeout header
	// (default 30 s).
	RequestTimeout time.Duration
	// MaxRequestTimeout caps the timeout header (default 5 min).
	MaxRequestTimeout time.Duration
	// MessageIDPrefix prefixes broker-assigned message ids (default "titan").
	MessageIDPrefix string
	// Clock is the time source (default time.Now): scheduled delivery times (a SEND's
	// delay header) and start positions.
	Clock Clock
	// Stamp is the time source of message timestamps, read once per SEND, where a
	// millisecond is precise enough (default Clock; the broker passes a clock.Coarse).
	Stamp Clock
	// Logger receives routing events; nil discards them.
	Logger *slog.Logger
	// Store is the durable-acceptance port; nil keeps durable patterns in memory only.
	Store Persister
	// Batch, when set, commits a transaction's SENDs to the destinations it Batches as one
	// PublishBatch at COMMIT instead of one publication each (cluster mode: JetStream
	// atomic batches; see BatchPublisher).
	Batch BatchPublisher
	// Go starts a tracked goroutine (a connection's SEND pipeline); it returns false once the
	// owner is shutting down. nil runs `go fn()`.
	Go func(name string, fn func()) bool
	// SendStages are custom stages run on every SEND route after the route stage and before
	// publication (reference 000: "custom handlers are inserted between those stages"). They
	// run for every way in: STOMP SEND, Router.Publish (HTTP POST /publish, embed.Publish).
	SendStages []Stage
	// Duplicates, when set, is duplicate detection: the duplicate stage runs on every SEND
	// route that publishes (events, queues, events-store, temp-queues) before anything is
	// created or stored, for every way in (STOMP, Router.Publish).
	Duplicates Duplicates
	// DuplicateHeader is the SEND header carrying the duplicate id (default
	// "_AMQ_DUPL_ID", Artemis's name).
	DuplicateHeader string
	// Authorize, when set, runs on every SEND and SUBSCRIBE route right after the group
	// stage, so that Identity is known and nothing has been built, buffered in a transaction,
	// stored or subscribed yet (DESIGN §8). It refuses by setting c.Err; for a wildcard
	// SUBSCRIBE it may set c.Allow to filter deliveries per channel. It also runs first on the
	// UNSUBSCRIBE route (Identity unset), which may delete a durable topic subscription.
	Authorize Stage
}

// Router resolves routes and runs frames through them. Immutable after New; safe for
// concurrent use.
type Router struct {
	opts  Options
	ports Ports
	log   *slog.Logger
	// table holds every route, in named segments (route.go).
	table chains
	final Stage

	// Routed counts frames per route (index Route).
	Routed [numRoutes]atomic.Uint64
	// Errors counts frames that ended in an ERROR, per route.
	Errors [numRoutes]atomic.Uint64

	late *lateBudget // the late SENDs in flight in every connection's pipeline (pipeline.go)
}

// New builds a Router over the pattern ports.
func New(ports Ports, o Options) *Router {
	if !o.DefaultPattern.Valid() {
		o.DefaultPattern = dest.PatternEvents
	}
	if o.MaxSubscriptions <= 0 {
		o.MaxSubscriptions = 1000
	}
	if o.MaxFramesInTransaction <= 0 {
		o.MaxFramesInTransaction = 10000
	}
	if o.MaxTransactionBytes <= 0 {
		o.MaxTransactionBytes = 64 << 20
	}
	if o.MaxTransactions <= 0 {
		o.MaxTransactions = 100
	}
	if o.MaxDestinationsPerConnection == 0 {
		o.MaxDestinationsPerConnection = 1000
	}
	if o.MaxTempQueuesPerConnection == 0 {
		o.MaxTempQueuesPerConnection = 100
	}
	if o.DefaultPrefetch <= 0 {
		o.DefaultPrefetch = delivery.DefaultPrefetch
	}
	if o.MaxPrefetch <= 0 {
		o.MaxPrefetch = 65535
	}
	if o.RequestTimeout <= 0 {
		o.RequestTimeout = 30 * time.Second
	}
	if o.MaxRequestTimeout < o.RequestTimeout {
		o.MaxRequestTimeout = max(5*time.Minute, o.RequestTimeout)
	}
	if o.DuplicateHeader == "" {
		o.DuplicateHeader = "_AMQ_DUPL_ID"
	}
	if o.MessageIDPrefix == "" {
		o.MessageIDPrefix = "titan"
	}
	if o.Clock == nil {
		o.Clock = time.Now
	}
	if o.Stamp == nil {
		o.Stamp = o.Clock
	}
	if ports.Deliveries == nil {
		ports.Deliveries = &delivery.Registry{}
	}
	r := &Router{opts: o, ports: ports, log: o.Logger, late: newLateBudget()}
	if r.log == nil {
		r.log = slog.New(slog.DiscardHandler)
	}
	r.build()
	r.final = finalStage{}
	if o.ReceiptLatency != nil {
		r.final = receiptTimer{o.ReceiptLatency}
	}
	return r
}

// Options returns the router's effective options.
func (r *Router) Options() Options { return r.opts }

// Conn is the router's state for one connection. Its transaction map belongs to the
// connection's read goroutine.
type Conn struct {
	Client Client
	// ClientID is the CONNECT frame's client-id header ("" when none): ActiveMQ and Artemis
	// name durable subscriptions by it. Set once, before the first frame is routed.
	ClientID  string
	Delivery  *delivery.Conn
	txs       map[string]*transaction
	pipe      *pipeline    // persistent SENDs awaiting their fsync; created on first use
	pipelined bool         // persistent SENDs may be pipelined (a store and a pipeline exist)
	created   atomic.Int64 // destinations this connection's SENDs created (destination stage)
	tempMade  atomic.Int64 // its own temp-queues its SENDs created
	// replies are its automatic subscriptions to its own temp-queues, by channel (a SEND's
	// reply-to:/temp-queue/<name>, RabbitMQ's behaviour; replies.go). Read goroutine only.
	replies map[string]*delivery.Subscription
	scratch Context // Handle's Context (read goroutine only)
	// unpublished: a queue SEND's early publication failed fatally, so the SENDs read after
	// it are not published (read goroutine only); the pipeline answers the failure in order.
	unpublished bool
	// names are detached copies of the channels and groups this connection's SENDs named
	// (intern; read goroutine only), allocated on the first SEND.
	names     *[internedNames]string
	namesNext uint8
}

// internedNames is how many channel and group names a connection keeps detached copies of.
const internedNames = 8

// intern returns a copy of s that does not point into a read buffer or a message: the same
// copy for the last internedNames distinct names this connection's SENDs used, so that a
// producer's steady traffic allocates none. An Identity that the patterns may keep (a
// queue's or a metric's map key) must hold such copies: a slice of a message would keep the
// whole message (its body included) alive. Read goroutine only.
func (c *Conn) intern(s string) string {
	switch s {
	case "":
		return ""
	case dest.DefaultGroup:
		return dest.DefaultGroup
	}
	if c.names == nil {
		c.names = new([internedNames]string)
	}
	for _, n := range c.names {
		if n == s {
			return n
		}
	}
	n := strings.Clone(s)
	c.names[c.namesNext%internedNames] = n
	c.namesNext++
	return n
}

// Open returns the router state for a newly connected client.
func (r *Router) Open(c Client) *Conn {
	rc := &Conn{Client: c, Delivery: r.ports.Deliveries.NewConn(c), pipelined: r.opts.Store != nil}
	if r.ports.Requests != nil {
		r.ports.Requests.Own(c.ID(), rc.Delivery)
	}
	return rc
}

// Close releases a connection's state: open transactions are aborted and unacknowledged
// messages go back to their queues for redelivery.
func (r *Router) Close(c *Conn) {
	c.txs = nil
	if c.pipe != nil {
		c.pipe.close() // stored messages still get published; their RECEIPTs go nowhere
	}
	r.ports.Deliveries.CloseConn(c.Delivery)
	if r.ports.Requests != nil {
		r.ports.Requests.Release(c.Client.ID())
	}
}

// Handle routes one frame from c. f is valid only during the call.
//
// The Context lives in c (scratch) rather than on the heap: Handle is called from the
// connection's read goroutine only, and nothing keeps the Context after Route returns (a
// deferred SEND copies it).
func (r *Router) Handle(c *Conn, f *frame.Frame) {
	ctx := &c.scratch
	*ctx = Context{Conn: c, Frame: f}
	r.Route(ctx)
	*ctx = Context{}
}

// Route runs c through its route to Final. It never panics: a stage panic is recovered,
// logged and turned into an ERROR for this connection only.
func (r *Router) Route(c *Context) {
	c.Receipt, _ = c.Frame.Get(frame.HdrReceipt)
	if c.Receipt != "" && r.opts.ReceiptLatency != nil && c.received.IsZero() {
		c.received = time.Now()
	}
	c.Route = r.Resolve(c)
	rt := &r.table[c.Route][c.Dest.Pattern]
	if p := c.Conn.pipe; p != nil && rt.store == nil && !c.Replay && p.pending() {
		// Nothing overtakes a deferred SEND of this connection (a route with a store
		// segment drains there, unless it defers too).
		p.drain()
	}
	r.Routed[c.Route].Add(1)
	if r.run(c, rt, segPre, segEnd) {
		r.deferTail(c, rt)
		return
	}
	if c.Err != nil {
		r.Errors[c.Route].Add(1)
	}
	if !c.Replay {
		// Frames are answered in order: an earlier SEND of this connection still waiting for
		// its commit is answered first (a SEND refused before the store, a duplicate or a
		// frame buffered in a transaction would otherwise overtake its RECEIPT, and an ERROR
		// would close the connection before it).
		if p := c.Conn.pipe; p != nil && p.pending() {
			p.drain()
		}
		r.final.Apply(c)
	}
}

// recovered turns a stage panic p into a fatal ERROR for c's connection (run).
func (r *Router) recovered(c *Context, p any) {
	r.log.Error("stage panic", "route", c.Route.String(), "panic", p, "stack", string(debug.Stack()))
	c.Err = &frame.ProtocolError{Reason: "internal error", ReceiptID: c.Receipt, Fatal: true, Err: fmt.Errorf("panic: %v", p)}
	c.durable = nil
}

// deferTail finishes a SEND whose message was handed to the store's group commit but not yet
// fsync'd: on the connection's pipeline it waits for the commit, runs the route's effect
// (publish; for an early route such as queues it already ran, see below) and answers. A queue message whose
// commit then fails stays published (in memory) while its producer gets the ERROR: it may
// still be delivered, as after any ERROR without a RECEIPT (at-least-once). c is copied,
// detached from the read buffer.
func (r *Router) deferTail(c *Context, rt *route) {
	conn := c.Conn
	d := deferredSends.Get().(*deferredSend)
	*d = deferredSend{r: r, conn: conn, tail: *c, rt: rt, wait: c.durable}
	d.tail.Frame, d.tail.durable = nil, nil
	d.tail.Receipt = strings.Clone(c.Receipt)
	if conn.pipe == nil {
		conn.pipe = newPipeline(r.opts.Go, r.late)
	}
	// After a fatal error of an earlier SEND nothing more is published (finish forgets it).
	d.early = rt.early && !conn.unpublished && (conn.pipe == nil || !conn.pipe.failed())
	if d.early {
		// A queue message is published now, before its fsync, so that a consumer can take
		// and acknowledge it while its group commit is pending: the store then drops it from
		// the group and it costs no write and no delete. The RECEIPT still waits for the
		// commit, so it keeps its meaning. Events-store readers see only synced records, so
		// that route publishes after the fsync.
		r.run(&d.tail, rt, segEffect, segEnd)
		if d.tail.Err != nil && d.tail.Err.Fatal {
			conn.unpublished = true // the SENDs behind this one are not published
		}
	}
	if conn.pipe == nil { // shutting down: finish in line
		d.finish()
		return
	}
	conn.pipe.push(d, !d.early)
}

// deferredSend is a SEND waiting on its connection's pipeline for its store commit. Pooled
// (deferredSends): finish returns it, as nothing keeps a Context past its route (the same
// rule that lets Conn.scratch be reused per frame).
type deferredSend struct {
	r     *Router
	conn  *Conn
	tail  Context
	rt    *route // its route: effect is what remains after the commit
	wait  func() error
	early bool // published (effect run) before the commit (route.early)
}

var deferredSends = sync.Pool{New: func() any { return new(deferredSend) }}

func (d *deferredSend) finish() {
	d.answer()
	*d = deferredSend{}
	deferredSends.Put(d)
}

// answer waits for the commit, finishes the route and answers.
func (d *deferredSend) answer() {
	r, conn, tail := d.r, d.conn, &d.tail
	err := d.wait()
	switch {
	case d.early && tail.Err != nil:
		// Refused by the publish stage, which forgot the stored copy: answer in order.
	case d.early && conn.pipe != nil && conn.pipe.failed():
		// Already published; an earlier SEND failed (at its commit) and closed the
		// connection, so this one is never answered (its message stays queued and stored):
		// a retry of it is a duplicate once it is committed.
		if tail.settle != nil {
			tail.settle(err == nil)
		}
		return
	case conn.pipe != nil && conn.pipe.failed():
		// An earlier SEND failed and closed the connection: this one was never answered.
		if err == nil {
			r.opts.Store.Forget(tail.Identity, tail.Message)
		}
		if tail.settle != nil {
			tail.settle(false) // not accepted: a retry must not be taken for a duplicate
		}
		return
	case err != nil:
		tail.fail(storeRefusal(err), "the broker could not store the message; it was not accepted")
	case !d.early:
		r.run(tail, d.rt, segEffect, segEnd)
	}
	if tail.Err != nil {
		r.Errors[tail.Route].Add(1)
		if tail.Err.Fatal && conn.pipe != nil {
			conn.pipe.fail()
		}
	}
	r.final.Apply(tail)
}
