// Package archtest holds the import rule of DESIGN §1 as a test over the import graph (as
// reference 004's architecture rule fails its build): the codec depends on nothing of ours,
// the transport and session never reach the router or a pattern, the router reaches no
// adapter, pattern packages never reach each other (only ports they declare), and
// configuration reaches no runtime package. The rules live in Rules; a violation fails
// `go test ./...` (and so scripts/test) naming the offending import chain and the rule.
package archtest
