// Package admission bounds what clients get before they have logged in (issue 29):
//
//   - LoginThrottle backs off failed logins per source address and per user, exponentially
//     and bounded, so that guessing passwords costs the guesser time instead of costing the
//     broker CPU (each wrong guess is a bcrypt comparison). It serves STOMP over TCP and
//     WebSocket (internal/session) and the monitor's HTTP authentication (internal/admin).
//   - Conns bounds the connections held at once, in total and per source address.
//
// Both are safe for concurrent use and hold no goroutine. Keys are the peer's IP address
// (the port is dropped), so every connection from one host shares one back-off and one
// per-address count.
package admission
