// Package router is the heart of Titan (DESIGN §1, reference 004): every client frame is run
// through a fixed chain of stages to the final stage.
//
// A pure resolver maps (frame command, destination pattern) to a Route — the name of a fixed
// chain of stages, laid out as a route of named segments (pre, tx, admit, store, effect;
// route.go) that the runner applies in order without knowing any route by name. Every stage
// implements Stage: it does one thing, records its outcome on the
// Context and never lets an error or panic escape; a failed stage sets Context.Err and the
// router skips straight to the final stage. Every route ends at Final, which answers the
// client exactly once: ERROR (then close) on failure, RECEIPT when one was asked, nothing
// otherwise. New capability is a new route or a new stage, never a branch in the transport.
//
// Stages depend on ports the router declares (ports.go: Client, Publisher, Subscriber,
// Pattern, Requests, Deliveries, Persister, Clock), and react to the refusals it declares
// with them (errors.go, from its leaf package refusal), never on adapters: the session, the
// pattern packages and the store are wired in by the broker. The resolver and the route
// table (resolve.go) are the only code that looks at a destination's pattern; every way in
// (STOMP SEND, Publish for HTTP and embedding) runs the same routes.
//
// # Concurrency
//
// Route runs on the calling connection's read goroutine; a Conn's transaction state is owned
// by that goroutine. The Router itself is immutable after New and safe for concurrent use.
package router
