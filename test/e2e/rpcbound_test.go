package e2e

import (
	"strings"
	"testing"
	"time"
)

// Issue 32: pending requests are bounded per connection and for the broker, not only by
// time. A requester whose responder has not answered gets, on the request over
// limits.max-pending-requests-by-client, ERROR message:too many pending requests naming
// the key (and its connection closes, as for every ERROR); another requester goes on until
// the broker-wide limits.max-pending-requests refuses it the same way, naming that key.
func TestPendingRequestBounds(t *testing.T) {
	b := startBroker(t, yamlConfigWith("", "  limits: {max-pending-requests: 3, max-pending-requests-by-client: 2}\n"))
	resp := dialRaw(t, b)
	resp.connect()
	requireNoError(t, resp.write("SUBSCRIBE\nid:r\ndestination:/command/slow\nreceipt:sub\n\n\x00"))
	f, err := resp.readFrame(10 * time.Second)
	requireNoError(t, err)
	requireEqual(t, "RECEIPT", f.command, "%s", f)
	// The responder never answers.

	request := func(c *rawConn, corr string) *rawFrame {
		t.Helper()
		requireNoError(t, c.write("SEND\ndestination:/command/slow\nreply-to:/queue/replies\ncorrelation-id:"+corr+
			"\ntimeout:600000\nreceipt:"+corr+"\n\n\x00"))
		f, err := c.readFrame(10 * time.Second)
		requireNoError(t, err, "answer to request %s", corr)
		return f
	}
	expectRefusal := func(f *rawFrame, key string) {
		t.Helper()
		requireEqual(t, "ERROR", f.command, "%s", f)
		msg, _ := f.get("message")
		checkEqual(t, "too many pending requests", msg, "ERROR message header: %s", f)
		if !strings.Contains(string(f.body), key) {
			t.Errorf("ERROR body %q does not name %s", f.body, key)
		}
	}
	a := dialRaw(t, b)
	a.connect()
	for _, corr := range []string{"a1", "a2"} {
		f := request(a, corr)
		requireEqual(t, "RECEIPT", f.command, "request %s: %s", corr, f)
	}
	expectRefusal(request(a, "a3"), "limits.max-pending-requests-by-client")
	if _, err := a.expectClosed(10 * time.Second); err != nil {
		t.Errorf("after the ERROR: %v", err)
	}

	c := dialRaw(t, b)
	c.connect()
	// a's two requests are still pending (their timeout is 10 minutes): one more fits.
	f = request(c, "c1")
	requireEqual(t, "RECEIPT", f.command, "request c1: %s", f)
	expectRefusal(request(c, "c2"), "limits.max-pending-requests")
}
