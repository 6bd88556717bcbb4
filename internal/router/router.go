package router

import (
	"fmt"
	"log/slog"
	"runtime/debug"
	"strings"
	"sync/atomic"
	"time"

	"github.com/titan-broker/titan/internal/dest"
	"github.com/titan-broker/titan/internal/dispatch"
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
	// DefaultPrefetch is the unacknowledged-message limit of a subscription without a
	// prefetch-count header (default dispatch.DefaultPrefetch).
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
	// Clock is the time source (default time.Now).
	Clock Clock
	// Logger receives routing events; nil discards them.
	Logger *slog.Logger
	// Store is the durable-acceptance port; nil keeps durable patterns in memory only.
	Store Persister
	// Go starts a tracked goroutine (a connection's SEND pipeline); it returns false once the
	// owner is shutting down. nil runs `go fn()`.
	Go func(name string, fn func()) bool
	// SendStages are custom stages run on every SEND route after the route stage and before
	// publication (reference 000: "custom handlers are inserted between those stages").
	SendStages []Stage
	// Authorize, when set, runs on every SEND and SUBSCRIBE route right after the group
	// stage, so that Identity is known and nothing has been built, buffered in a transaction,
	// stored or subscribed yet (DESIGN §8). It refuses by setting c.Err; for a wildcard
	// SUBSCRIBE it may set c.Allow to filter deliveries per channel.
	Authorize Stage
}

// Router resolves routes and runs frames through them. Immutable after New; safe for
// concurrent use.
type Router struct {
	opts   Options
	engine Engine
	log    *slog.Logger
	routes [numRoutes][]Stage
	final  Stage
	// sendEffects and durableEffects are the stages after the transaction stage on SEND
	// routes of non-durable and durable patterns; COMMIT replays exactly these.
	sendEffects, durableEffects, requestEffects []Stage

	// Routed counts frames per route (index Route).
	Routed [numRoutes]atomic.Uint64
	// Errors counts frames that ended in an ERROR, per route.
	Errors [numRoutes]atomic.Uint64
}

// New builds a Router over engine.
func New(engine Engine, o Options) *Router {
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
	if o.DefaultPrefetch <= 0 {
		o.DefaultPrefetch = dispatch.DefaultPrefetch
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
	if o.MessageIDPrefix == "" {
		o.MessageIDPrefix = "titan"
	}
	if o.Clock == nil {
		o.Clock = time.Now
	}
	r := &Router{opts: o, engine: engine, log: o.Logger}
	if r.log == nil {
		r.log = slog.New(slog.DiscardHandler)
	}
	group := groupStage{}
	build := messageStage{clock: o.Clock, idPrefix: o.MessageIDPrefix}
	tx := txBufferStage{max: o.MaxFramesInTransaction, maxBytes: o.MaxTransactionBytes}
	publish := publishStage{engine: engine, store: o.Store}
	// effects are the SEND stages that act once a message is built and admitted; COMMIT
	// replays exactly these for each buffered SEND.
	respond := responseStage{engine: engine}
	r.sendEffects = append(append([]Stage(nil), o.SendStages...), respond, publish)
	r.durableEffects = append(append(append([]Stage(nil), o.SendStages...), respond, storeStage{store: o.Store}), publish)
	temp := tempQueueStage{engine: engine}
	// head is the start of SEND and SUBSCRIBE routes: the group stage, then authorization.
	head := func(pre ...Stage) []Stage {
		out := append(pre, group)
		if o.Authorize != nil {
			out = append(out, o.Authorize)
		}
		return out
	}
	r.routes[RouteSendEvents] = append(head(), append([]Stage{build, tx}, r.sendEffects...)...)
	r.routes[RouteSendQueue] = append(head(), append([]Stage{build, tx}, r.durableEffects...)...)
	r.routes[RouteSendEventsStore] = append(head(), append([]Stage{build, tx}, r.durableEffects...)...)
	r.routes[RouteSendTempQueue] = append(head(temp), append([]Stage{build, tx}, r.sendEffects...)...)
	r.requestEffects = append(append([]Stage(nil), o.SendStages...), requestStage{engine: engine, opts: &r.opts})
	r.routes[RouteSendRequest] = append(head(), append([]Stage{build, tx}, r.requestEffects...)...)
	r.routes[RouteSubscribe] = append(head(temp), subscribeStage{engine: engine, opts: &r.opts})
	r.routes[RouteUnsubscribe] = []Stage{unsubscribeStage{engine: engine}}
	r.routes[RouteAck] = []Stage{tx, ackStage{engine: engine}}
	r.routes[RouteNack] = []Stage{tx, ackStage{engine: engine, nack: true}}
	r.routes[RouteBegin] = []Stage{beginStage{max: o.MaxTransactions}}
	r.routes[RouteCommit] = []Stage{commitStage{router: r}}
	r.routes[RouteAbort] = []Stage{abortStage{}}
	r.routes[RouteDisconnect] = nil
	r.final = finalStage{}
	return r
}

// effects returns the stages COMMIT replays for a buffered SEND of route rt.
func (r *Router) effects(rt Route) []Stage {
	switch rt {
	case RouteSendEvents, RouteSendTempQueue:
		return r.sendEffects
	case RouteSendRequest:
		return r.requestEffects
	}
	return r.durableEffects
}

// Options returns the router's effective options.
func (r *Router) Options() Options { return r.opts }

// Conn is the router's state for one connection. Its transaction map belongs to the
// connection's read goroutine.
type Conn struct {
	Client    Client
	Delivery  *dispatch.Conn
	txs       map[string]*transaction
	pipe      *pipeline // persistent SENDs awaiting their fsync; created on first use
	pipelined bool      // persistent SENDs may be pipelined (a store and a pipeline exist)
}

// Open returns the router state for a newly connected client.
func (r *Router) Open(c Client) *Conn {
	rc := &Conn{Client: c, Delivery: r.engine.NewConn(c), pipelined: r.opts.Store != nil}
	r.engine.SetTempOwner(c.ID(), rc.Delivery)
	return rc
}

// Close releases a connection's state: open transactions are aborted and unacknowledged
// messages go back to their queues for redelivery.
func (r *Router) Close(c *Conn) {
	c.txs = nil
	if c.pipe != nil {
		c.pipe.close() // stored messages still get published; their RECEIPTs go nowhere
	}
	r.engine.CloseConn(c.Delivery)
	r.engine.DropTempQueues(c.Client.ID())
}

// Handle routes one frame from c. f is valid only during the call.
func (r *Router) Handle(c *Conn, f *frame.Frame) {
	ctx := Context{Conn: c, Frame: f}
	r.Route(&ctx)
}

// Resolve is the pure resolver: it maps the frame's command and destination pattern to a
// route, recording a sanitized error (RouteReject) for a destination that does not resolve.
func (r *Router) Resolve(c *Context) Route {
	f := c.Frame
	switch f.Command {
	case frame.CmdSend:
		d, ok := r.destination(c, dest.Parse)
		if !ok {
			return RouteReject
		}
		switch d.Pattern {
		case dest.PatternEvents:
			return RouteSendEvents
		case dest.PatternQueues:
			return RouteSendQueue
		case dest.PatternEventsStore:
			return RouteSendEventsStore
		case dest.PatternCommands, dest.PatternQueries:
			return RouteSendRequest
		case dest.PatternTempQueue:
			return RouteSendTempQueue
		}
		c.fail("unsupported destination pattern", d.Pattern.String()+" destinations are not available on this server")
		return RouteReject
	case frame.CmdSubscribe:
		d, ok := r.destination(c, dest.ParseFilter)
		if !ok {
			return RouteReject
		}
		switch d.Pattern {
		case dest.PatternEvents, dest.PatternQueues, dest.PatternEventsStore,
			dest.PatternCommands, dest.PatternQueries, dest.PatternTempQueue:
			return RouteSubscribe
		}
		c.fail("unsupported destination pattern", d.Pattern.String()+" destinations are not available on this server")
		return RouteReject
	case frame.CmdUnsubscribe:
		return RouteUnsubscribe
	case frame.CmdAck:
		return RouteAck
	case frame.CmdNack:
		return RouteNack
	case frame.CmdBegin:
		return RouteBegin
	case frame.CmdCommit:
		return RouteCommit
	case frame.CmdAbort:
		return RouteAbort
	case frame.CmdDisconnect:
		return RouteDisconnect
	}
	c.fail("unexpected frame", f.Command.String()+" is not valid here")
	return RouteReject
}

// destination resolves the frame's destination header with parse (dest.Parse for SEND,
// dest.ParseFilter for SUBSCRIBE) into c.Dest, recording the sanitized error when it fails:
// the detail goes to the log only (reference 003, "Destination errors").
func (r *Router) destination(c *Context, parse func(string, dest.Pattern) (dest.Destination, error)) (dest.Destination, bool) {
	raw, ok := c.Frame.Get(frame.HdrDestination)
	if !ok {
		c.fail("missing destination header", c.Frame.Command.String()+" requires a destination header")
		return dest.Destination{}, false
	}
	d, err := parse(raw, r.opts.DefaultPattern)
	if err != nil {
		r.log.Debug("invalid destination", "destination", raw, "err", err)
		c.fail("invalid destination", "")
		return dest.Destination{}, false
	}
	c.Dest = d
	return d, true
}

// Route runs c through its route to Final. It never panics: a stage panic is recovered,
// logged and turned into an ERROR for this connection only.
func (r *Router) Route(c *Context) {
	c.Receipt, _ = c.Frame.Get(frame.HdrReceipt)
	c.Route = r.Resolve(c)
	if p := c.Conn.pipe; p != nil && c.Route != RouteSendQueue && c.Route != RouteSendEventsStore && !c.Replay && p.pending() {
		p.drain() // nothing overtakes a deferred SEND of this connection
	}
	r.Routed[c.Route].Add(1)
	if rest := r.run(c, r.routes[c.Route]); c.durable != nil {
		r.deferTail(c, rest)
		return
	}
	if c.Err != nil {
		r.Errors[c.Route].Add(1)
	}
	if !c.Replay {
		r.final.Apply(c)
	}
}

// run applies stages until one fails or halts. When a stage defers the rest of the route
// (the store stage set c.durable), it returns the stages still to run.
func (r *Router) run(c *Context, stages []Stage) (rest []Stage) {
	defer func() {
		if p := recover(); p != nil {
			r.log.Error("stage panic", "route", c.Route.String(), "panic", p, "stack", string(debug.Stack()))
			c.Err = &frame.ProtocolError{Reason: "internal error", ReceiptID: c.Receipt, Fatal: true, Err: fmt.Errorf("panic: %v", p)}
			rest, c.durable = nil, nil
		}
	}()
	for i, s := range stages {
		if c.Err != nil || c.Halt {
			return nil
		}
		s.Apply(c)
		if c.durable != nil {
			return stages[i+1:]
		}
	}
	return nil
}

// deferTail finishes a SEND whose message was committed to the WAL but not yet fsync'd: on
// the connection's pipeline it waits for the fsync, runs the remaining stages (publish) and
// answers. c is copied, detached from the read buffer.
func (r *Router) deferTail(c *Context, rest []Stage) {
	conn := c.Conn
	wait := c.durable
	tail := *c
	tail.Frame, tail.durable = nil, nil
	tail.Receipt = strings.Clone(c.Receipt)
	if conn.pipe == nil {
		conn.pipe = newPipeline(r.opts.Go)
	}
	finish := func() {
		err := wait()
		switch {
		case conn.pipe != nil && conn.pipe.failed():
			// An earlier SEND failed and closed the connection: this one was never answered.
			if err == nil {
				r.opts.Store.Forget(tail.Identity, tail.Message)
			}
			return
		case err != nil:
			tail.fail("message not stored", "the broker could not store the message; it was not accepted")
		default:
			r.run(&tail, rest)
		}
		if tail.Err != nil {
			r.Errors[tail.Route].Add(1)
			if tail.Err.Fatal && conn.pipe != nil {
				conn.pipe.fail()
			}
		}
		r.final.Apply(&tail)
	}
	if conn.pipe == nil { // shutting down: finish in line
		finish()
		return
	}
	conn.pipe.push(finish)
}
