// Package dest is Titan's destination grammar: it resolves a STOMP destination header into a
// messaging pattern and a dot-separated channel, renders the canonical egress form, matches
// wildcard filters against channels, and validates group names. Everything here is a pure
// function of its arguments: no state, no locks, safe for concurrent use.
//
// Source: DESIGN §2 and §3, which reconcile reference 003 ("Destination mapping").
//
// # Grammar
//
// A destination resolves in this order (Parse):
//
//  1. raw is at most MaxBytes (512) bytes, measured before anything is stripped;
//  2. exactly one leading '/' is stripped;
//  3. it is split on '/', and an empty segment is invalid;
//  4. the first segment selects the pattern through a case-sensitive table;
//  5. the remaining segments, joined with '.', are the channel;
//  6. an unknown first segment makes the destination bare: all segments form the channel
//     and the configured default pattern (events, events-store or queues) routes it.
//
// The prefix table (primary first; egress always uses the primary):
//
//	topic        | events   -> events
//	events-store | store    -> events-store
//	queue        | queues   -> queues
//	command      | commands -> commands
//	query        | queries  -> queries
//	temp-queue              -> temp-queue
//
// A literal '.' inside a segment passes through, which makes the mapping lossy on purpose:
// /topic/a.b and /topic/a/b are the same channel "a.b", and both egress as /topic/a/b.
//
// Titan adds three rules of its own, so that a channel is always a well-formed token sequence
// and egress never names a different destination:
//
//   - every dot-separated token of the channel is non-empty ("/topic/a..b" is invalid);
//   - bytes below 0x20 and 0x7f are invalid anywhere in the destination;
//   - a bare destination whose first dot-token is a known prefix ("/queue.jobs") is invalid,
//     because its egress form "/queue/jobs" would resolve to the prefixed destination.
//
// With these, Parse(d.String(), def) returns d again for every d that Parse returned, as long
// as d.String() itself fits in MaxBytes (an alias shorter than its primary can push the
// egress form past the limit).
//
// # Wildcards
//
// Wildcards are for SUBSCRIBE on events only (ParseFilter). A channel token that is exactly
// "*" matches one token in any position; a token that is exactly ">" matches one or more
// trailing tokens and must be last, so "orders.>" does not match "orders". A token that is
// exactly "#" (RabbitMQ's and Artemis's multi-word wildcard) matches zero or more tokens in
// any position, so "orders.#" matches "orders" too. Tokens that merely contain '*', '>' or
// '#' ("a*") are literal. Match implements the matching rule; the subscription
// index in package sublist implements the same rule for many filters at once.
//
// # Errors
//
// Every rejection is ErrInvalid wrapped with a detail (errors.Is works). The detail is for
// the log; a client only ever sees "invalid destination".
//
// # Allocation
//
// Parse is on the path of every SEND. It does not allocate for a destination with a single
// channel segment, where the channel is a substring of raw (so it shares raw's memory: clone
// it before keeping it if raw points into a reusable buffer); it allocates the joined channel
// once when there are several segments. Match and ValidGroup never allocate, and
// Destination.Append does not allocate when its buffer has room.
package dest
