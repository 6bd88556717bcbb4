package router

import "github.com/titan-broker/titan/internal/dest"

// route is one entry of the route table (chains): the fixed chain of stages of a (Route,
// destination pattern), in named segments that the runner applies in the order of
// segment — pre, tx, admit, store, effect — until a stage fails or halts. Nothing finds a
// stage by its type and the runner names no route: COMMIT, Deliver and the SEND pipeline
// reach a segment by its name, and what differs between routes is data here (the segments
// and the early flag), laid out once by build (resolve.go).
type route struct {
	// pre are the stages before the transaction stage: the peers' control headers,
	// temp-queue scoping, the group, authorization, the existing-queue check and building the
	// message (SEND), or the subscription's stages (SUBSCRIBE). COMMIT does not replay them:
	// a buffered SEND passed them when it was sent.
	pre []Stage
	// tx is the transaction stage (SEND, ACK, NACK): a frame with a transaction header is
	// buffered in its transaction and the route halts. nil on the other routes.
	tx Stage
	// admit are a SEND's effects before it is stored: custom stages, reply-to
	// qualification, duplicate detection, destination creation, response matching, durable
	// topic feeds. COMMIT replays them for each buffered SEND before the batch store.
	admit []Stage
	// store is durable acceptance (nil: the route stores nothing). When it hands the
	// message to the store's group commit (Context.durable), effect runs later, on the
	// connection's pipeline (deferTail); COMMIT skips it for the messages it stores as one
	// batch.
	store *storeStage
	// effect is what the route does, last: publish to its pattern's port, send a request,
	// attach a subscription, acknowledge, open, commit or abort a transaction, disconnect.
	// A route without one does not exist (defined).
	effect []Stage
	// publisher is the port effect publishes to (Router.Deliver); nil for a route that
	// publishes nothing.
	publisher Publisher
	// early: a SEND that store defers is published before its commit, not after (queues:
	// a consumer may take and acknowledge it meanwhile, sparing its write; events-store
	// readers see synced records only, so that route publishes after). See deferTail.
	early bool
}

// defined reports whether the route exists: a pattern without a port has none, and the
// resolver refuses it.
func (rt *route) defined() bool { return len(rt.effect) > 0 }

// segment names a route's segments, in the order the runner applies them.
type segment uint8

const (
	segPre segment = iota
	segTx
	segAdmit
	segStore
	segEffect
	segEnd // past the last segment
)

// chains is the route table: (route, destination pattern) → its route. Routes without a
// destination (ACK, BEGIN, ...) sit at pattern 0. An undefined route for a SEND or
// SUBSCRIBE pattern means the pattern is not available.
type chains [numRoutes][dest.MaxPattern + 1]route

// run applies rt's segments [from, to) to c until a stage fails or halts. It reports
// whether the store segment deferred the rest of the route (c.durable set): the caller then
// runs effect once the commit is awaited (deferTail). It never panics: a stage panic is
// recovered, logged and turned into an ERROR for this connection only.
func (r *Router) run(c *Context, rt *route, from, to segment) (deferred bool) {
	defer func() {
		if p := recover(); p != nil {
			r.recovered(c, p)
			deferred = false
		}
	}()
	if from <= segPre && segPre < to {
		apply(c, rt.pre)
	}
	if from <= segTx && segTx < to && rt.tx != nil && c.Err == nil && !c.Halt {
		rt.tx.Apply(c)
	}
	if from <= segAdmit && segAdmit < to {
		apply(c, rt.admit)
	}
	if from <= segStore && segStore < to && rt.store != nil && c.Err == nil && !c.Halt {
		rt.store.Apply(c)
		if c.durable != nil {
			return true
		}
	}
	if from <= segEffect && segEffect < to {
		apply(c, rt.effect)
	}
	return false
}

// apply runs stages on c in order, stopping before a stage once c failed or halted.
func apply(c *Context, stages []Stage) {
	for _, s := range stages {
		if c.Err != nil || c.Halt {
			return
		}
		s.Apply(c)
	}
}
