package router

import (
	"errors"
	"slices"
	"strings"

	"github.com/titan-broker/titan/internal/dest"
	"github.com/titan-broker/titan/internal/frame"
)

// This file is the only place the router looks at a destination's pattern: the resolver
// maps (command, pattern) to a route, and build lays out each route's named segments of
// stages (route.go), every one of which calls only its own pattern's port.

// sendRoutes maps a SEND's destination pattern to its route.
var sendRoutes = [dest.MaxPattern + 1]Route{
	dest.PatternEvents:      RouteSendEvents,
	dest.PatternQueues:      RouteSendQueue,
	dest.PatternEventsStore: RouteSendEventsStore,
	dest.PatternCommands:    RouteSendRequest,
	dest.PatternQueries:     RouteSendRequest,
	dest.PatternTempQueue:   RouteSendTempQueue,
}

// build lays out the route table from the ports (see chains and route). A pattern without
// a port gets no route, so the resolver refuses it.
func (r *Router) build() {
	o, p := &r.opts, r.ports
	group := groupStage{}
	build := messageStage{clock: o.Clock, stamp: o.Stamp, idPrefix: o.MessageIDPrefix}
	tx := func(ack *ackStage) txBufferStage {
		return txBufferStage{max: o.MaxFramesInTransaction, maxBytes: o.MaxTransactionBytes, ack: ack}
	}
	custom := o.SendStages
	sub := subscriptionStage{opts: o}

	// send lays out one SEND route: pre (head, then the message stage), the transaction
	// stage, admit (the custom stages first), store and its effect: a publication to
	// publisher, or effect when publisher is nil.
	send := func(rt Route, pt dest.Pattern, head, admit []Stage, store *storeStage, publisher Publisher, effect Stage) {
		if publisher != nil {
			effect = publishStage{port: publisher, store: o.Store}
		}
		r.table[rt][pt] = route{
			pre:       append(slices.Clone(head), build),
			tx:        tx(nil),
			admit:     append(slices.Clone(custom), admit...),
			store:     store,
			effect:    []Stage{effect},
			publisher: publisher,
		}
	}
	// subscribe lays out the SUBSCRIBE route of a pattern: pre, then attach to its port.
	subscribe := func(pt dest.Pattern, pre []Stage, port Subscriber) {
		r.table[RouteSubscribe][pt] = route{pre: slices.Clone(pre), effect: []Stage{attachStage{port: port}}}
	}
	// head starts a SEND or SUBSCRIBE route: its prefix stages (the group stage last), then
	// the authorization stage, so that the identity is known and nothing has been built,
	// buffered in a transaction, stored or subscribed yet when it decides (DESIGN §8).
	head := func(prefix ...Stage) []Stage {
		prefix = append([]Stage{controlStage{}}, prefix...) // the peers' control headers (control.go)
		if o.Authorize != nil {
			prefix = append(prefix, o.Authorize)
		}
		return prefix
	}

	dedupOnly := func() []Stage { // events create nothing a limit bounds (direct mode)
		if o.Duplicates == nil {
			return nil
		}
		return []Stage{duplicateStage{port: o.Duplicates, header: o.DuplicateHeader}}
	}
	var replies []Stage // reply-to:/temp-queue/x qualified with its owner (replyToStage)
	if p.Requests != nil {
		replies = []Stage{replyToStage{router: r}}
	}
	if p.Events != nil {
		admit := append(append(slices.Clone(replies), dedupOnly()...), responseStage{requests: p.Requests})
		if p.DurableTopics != nil && p.Queues != nil {
			admit = append(admit, durableFeedStage{topics: p.DurableTopics, queues: p.Queues, store: o.Store})
		}
		send(RouteSendEvents, dest.PatternEvents, head(group), admit, nil, p.Events, nil)
		subscribe(dest.PatternEvents, append(head(group), sub, durableTopicStage{topics: p.DurableTopics, queues: p.Queues}), p.Events)
	}
	// limit creates the SEND's destination before the store stage (nothing is stored for
	// a destination that could not be created), under the broker's and connection's bounds.
	// Duplicate detection comes first: a repeated SEND creates and stores nothing.
	limit := func(temp bool) []Stage {
		var st []Stage
		if o.Duplicates != nil {
			st = append(st, duplicateStage{port: o.Duplicates, header: o.DuplicateHeader})
		}
		if p.Destinations != nil {
			st = append(st, destinationStage{port: p.Destinations, opts: o, temp: temp})
		}
		return st
	}
	if p.Queues != nil {
		qhead := head(group)
		if p.ExistingQueues != nil {
			qhead = append(qhead, existingQueueStage{port: p.ExistingQueues})
		}
		qs, _ := o.Store.(QueueStorer) // cluster mode stores persistent:false SENDs too
		store := newStoreStage(o.Store, qs != nil && qs.StoresEveryQueueSend())
		send(RouteSendQueue, dest.PatternQueues, qhead, append(append(slices.Clone(replies), limit(false)...),
			responseStage{requests: p.Requests}), &store, p.Queues, nil)
		r.table[RouteSendQueue][dest.PatternQueues].early = true // published before its commit (deferTail)
		subscribe(dest.PatternQueues, append(slices.Clip(qhead), sub), p.Queues)
	}
	if p.EventsStore != nil {
		// A log is always stored, persistent header or not, and published after its commit.
		store := newStoreStage(o.Store, true)
		send(RouteSendEventsStore, dest.PatternEventsStore, head(group), append(append(slices.Clone(replies), limit(false)...),
			responseStage{requests: p.Requests}), &store, p.EventsStore, nil)
		subscribe(dest.PatternEventsStore, append(head(group), sub, logPositionStage{clock: o.Clock}), p.EventsStore)
	}
	if p.Requests != nil {
		for _, pt := range []dest.Pattern{dest.PatternCommands, dest.PatternQueries} {
			send(RouteSendRequest, pt, head(group), nil, nil, nil, requestStage{router: r})
			subscribe(pt, append(head(group), sub), p.Requests)
		}
		if p.TempQueues != nil {
			temp := tempQueueStage{requests: p.Requests}
			ownGroup := groupStage{scoped: true} // a temp-queue is scoped by its owner, not a group
			send(RouteSendTempQueue, dest.PatternTempQueue, head(temp, ownGroup), append(limit(true),
				responseStage{requests: p.Requests, temp: true}), nil, p.TempQueues, nil)
			subscribe(dest.PatternTempQueue, append(head(tempQueueStage{requests: p.Requests, subscribe: true}, ownGroup), sub,
				explicitReplyStage{deliveries: p.Deliveries}), p.TempQueues)
		}
	}
	unsubscribe := route{effect: []Stage{unsubscribeStage{deliveries: p.Deliveries, topics: p.DurableTopics}}}
	if o.Authorize != nil { // an UNSUBSCRIBE may delete a durable subscription: its owner's say
		unsubscribe.pre = []Stage{o.Authorize}
	}
	r.table[RouteUnsubscribe][0] = unsubscribe
	// An ACK or NACK in a transaction is buffered by tx and applied by COMMIT through the
	// same ack stage (txOp.ack).
	ack := &ackStage{deliveries: p.Deliveries, store: o.Store}
	nack := &ackStage{deliveries: p.Deliveries, nack: true, store: o.Store}
	r.table[RouteAck][0] = route{tx: tx(ack), effect: []Stage{ack}}
	r.table[RouteNack][0] = route{tx: tx(nack), effect: []Stage{nack}}
	r.table[RouteBegin][0] = route{effect: []Stage{beginStage{max: o.MaxTransactions}}}
	r.table[RouteCommit][0] = route{effect: []Stage{commitStage{router: r}}}
	r.table[RouteAbort][0] = route{effect: []Stage{abortStage{}}}
	r.table[RouteDisconnect][0] = route{effect: []Stage{disconnectStage{}}}
}

// Resolve is the pure resolver: it maps the frame's command and destination pattern to a
// route, recording a sanitized error (RouteReject) for a destination that does not resolve
// or a pattern this router has no port for.
func (r *Router) Resolve(c *Context) Route {
	f := c.Frame
	switch f.Command {
	case frame.CmdSend:
		d, ok := r.destination(c, dest.Parse)
		if !ok {
			return RouteReject
		}
		if rt := sendRoutes[d.Pattern]; r.table[rt][d.Pattern].defined() {
			return rt
		}
		c.fail("unsupported destination pattern", d.Pattern.String()+" destinations are not available on this server")
		return RouteReject
	case frame.CmdSubscribe:
		d, ok := r.destination(c, dest.ParseFilter)
		if !ok {
			return RouteReject
		}
		if r.table[RouteSubscribe][d.Pattern].defined() {
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
	if err != nil && errors.Is(err, dest.ErrUnsupportedExchange) {
		c.failWith("unsupported exchange", unsupportedExchange(err), err)
		return dest.Destination{}, false
	}
	if err != nil {
		r.log.Debug("invalid destination", "destination", raw, "err", err)
		c.fail("invalid destination", destinationRule)
		return dest.Destination{}, false
	}
	c.Dest = d
	return d, true
}

// replyable are the patterns a request's reply-to may name: somewhere a requester can
// consume from (not another request channel, not a log).
var replyable = [dest.MaxPattern + 1]bool{
	dest.PatternEvents: true, dest.PatternQueues: true, dest.PatternTempQueue: true,
}

// replyTo resolves a request's reply-to header to the identity responses go to (DESIGN §2):
// a temp-queue name is qualified by its owner (the requester, unless it already names a
// live owner) and lives in the default group; anything else is in the request's group.
func (r *Router) replyTo(c *Context, raw string) (dest.Identity, bool) {
	rd, err := dest.Parse(raw, r.opts.DefaultPattern)
	if err != nil || !replyable[rd.Pattern] {
		return dest.Identity{}, false
	}
	group := c.Identity.Group
	if rd.Pattern == dest.PatternTempQueue {
		group = dest.DefaultGroup
		if own := c.Conn.Client.ID(); !strings.HasPrefix(rd.Channel, own+".") && !r.ports.Requests.TempOwnerAlive(firstToken(rd.Channel)) {
			rd.Channel = own + "." + rd.Channel
		}
	}
	id := dest.IdentityOf(group, rd)
	id.Channel = strings.Clone(id.Channel)
	return id, true
}

// destinationRule is the body of every "invalid destination" ERROR: the grammar's rule,
// never the client's input (DESIGN §2: destination errors are sanitized; the detail goes to
// the log only).
const destinationRule = "a destination is /<prefix>/<channel> (topic, events, queue, queues, events-store, " +
	"store, command, commands, query, queries, temp-queue) or a bare /<channel>: at most 512 bytes, " +
	"no empty segment, wildcards (* and >) only in a SUBSCRIBE to events"

// unsupportedExchange is the ERROR body for a RabbitMQ exchange Titan does not map (kept out
// of destination so that its errors.As target is not allocated on every frame).
func unsupportedExchange(err error) string {
	var xe *dest.ExchangeError
	name := ""
	if errors.As(err, &xe) {
		name = xe.Name
	}
	return "exchange " + frame.Echo(name) + " is not available: Titan maps /exchange/amq.topic/<routing key> and /exchange/amq.direct/<routing key> (see the migration guide)"
}
