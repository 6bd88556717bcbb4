// Package admin is Titan's operator surface over HTTP: the monitor API (Titan's
// /titan/monitor/... paths, DESIGN §7), queue management, an HTTP publish endpoint,
// Prometheus metrics and a small web console.
//
// # Shape
//
// For every endpoint there is a pure method on Admin that takes an options struct and
// returns a result struct and an error (Snapshot, Queues, CreateQueue, DeleteQueue, Pause,
// Resume, SetRingSize, Publish), plus a thin HTTP handler that parses the query string,
// calls the method and writes the result as JSON. The JSON bodies are generated from the
// same structs the methods return, so the Go API, the HTTP API and the CLI (cmd/titan) agree
// by construction. Paths are the Path* constants.
//
// # Errors
//
// Methods return *Error, which carries a stable Code, a one-line Message meant for people and
// the underlying sentinel (dest.ErrInvalid, dispatch.ErrNoQueue, dispatch.ErrQueueNotEmpty,
// dispatch.ErrQueueFull, or one of this package's). Handlers answer
// {"error": Message, "code": Code} with the status Code maps to (see Error.Status). An
// invalid destination is always reported with the sanitized text "invalid destination"
// (reference 003).
//
// # Authentication
//
// When Options.Token is set, every request (API, /metrics and the console page alike) must
// carry "Authorization: Bearer <token>", or 401 is answered. So that a browser can open the
// console, HTTP Basic credentials whose password is the token are accepted as well (the user
// name is ignored), and the console page's 401 asks for them.
//
// # Concurrency
//
// Admin is immutable after New and safe for concurrent use; each method reads the broker
// through its Source at the moment it is called. Snapshots are point-in-time per queue, not
// atomic across queues.
package admin
