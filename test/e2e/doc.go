// Package e2e holds Titan's end-to-end tests: each test starts a real `titan serve` process
// on free loopback ports and drives it with STOMP clients nobody here wrote — Debian's
// python3-stomp (stomp.py) and npm's @stomp/stompjs over @stomp/tcp-wrapper — plus a raw TCP
// client in Go for the frames no well-behaved library will send.
//
// The client scenarios live in clients/ (pyclient.py, jsclient.mjs). A scenario observes and
// reports what it saw as JSON on stdout; the Go test asserts on it. scripts/test installs the
// clients (apt-get python3-stomp, npm ci in clients/) before running the suite; a test whose
// client is missing fails and says so.
//
// TestMain builds cmd/titan once (with -race when the tests run with it, so a data race in
// the broker fails the test that provoked it). TITAN_E2E_BINARY=/path/to/titan tests that
// binary instead.
package e2e
