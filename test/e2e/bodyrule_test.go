package e2e

import (
	"bufio"
	"context"
	"errors"
	"os"
	"testing"
	"time"

	"github.com/coder/websocket"
)

// STOMP 1.2, "Frames and Headers": only SEND, MESSAGE and ERROR frames may have a body. A
// client frame of any other command that carries one gets an ERROR with a short message
// ("body not allowed") and its receipt-id, and the connection closes — over TCP and over
// WebSocket, with and without content-length. A CONNECT or STOMP whose "body" is only
// end-of-line octets, which real clients send, is still accepted, and python3-stomp still
// connects and round-trips.
func TestFramesThatMustNotCarryABody(t *testing.T) {
	t.Parallel()
	pythonClient.require(t)
	node := newTitanNode(t, wsConfig(t))
	p := node.start()
	requireEqual(t, 2, len(p.stompAddrs), "STOMP addresses (TCP, WebSocket)")

	dialers := []struct {
		name string
		dial func(t *testing.T) *rawConn
	}{
		{"tcp", func(t *testing.T) *rawConn { return dialRaw(t, p.broker()) }},
		{"websocket", func(t *testing.T) *rawConn { return dialWSRaw(t, wsURL(p)) }},
	}
	// Headers that make each frame valid apart from its body.
	valid := map[string][]string{
		"CONNECT":     {"accept-version:1.2", "host:localhost"},
		"STOMP":       {"accept-version:1.2", "host:localhost"},
		"SUBSCRIBE":   {"id:s1", "destination:/queue/body-rule"},
		"UNSUBSCRIBE": {"id:s1"},
		"ACK":         {"id:m-1"},
		"NACK":        {"id:m-1"},
		"BEGIN":       {"transaction:tx1"},
		"COMMIT":      {"transaction:tx1"},
		"ABORT":       {"transaction:tx1"},
		"DISCONNECT":  {},
	}
	commands := []string{"CONNECT", "STOMP", "SUBSCRIBE", "UNSUBSCRIBE", "ACK", "NACK", "BEGIN", "COMMIT", "ABORT", "DISCONNECT"}
	for _, d := range dialers {
		t.Run(d.name, func(t *testing.T) {
			for _, cmd := range commands {
				for _, body := range []struct{ name, headers, bytes string }{
					{"body", "", "not allowed here"},
					{"content-length", "content-length:4", "body"},
				} {
					t.Run(cmd+"/"+body.name, func(t *testing.T) {
						c := d.dial(t)
						if cmd != "CONNECT" && cmd != "STOMP" {
							c.connect()
						}
						hdrs := append([]string{"receipt:r-" + cmd}, valid[cmd]...)
						if body.headers != "" {
							hdrs = append(hdrs, body.headers)
						}
						if err := c.write(frameOf(cmd, hdrs, body.bytes)); err != nil {
							t.Logf("writing the frame: %v", err)
						}
						f, err := c.readFrame(10 * time.Second)
						requireNoError(t, err, "reading the answer to %s with a body", cmd)
						if msg, _ := f.get("message"); f.command != "ERROR" || msg != "body not allowed" {
							t.Fatalf("%s with a body answered by %s, want ERROR message:body not allowed", cmd, f)
						}
						if rid, _ := f.get("receipt-id"); rid != "r-"+cmd {
							t.Errorf("ERROR receipt-id = %q, want %q", rid, "r-"+cmd)
						}
						requireClosed(t, c)
					})
				}
			}
			for _, eols := range []string{"\n", "\r\n", "\n\n"} {
				for _, cmd := range []string{"CONNECT", "STOMP"} {
					c := d.dial(t)
					requireNoError(t, c.write(frameOf(cmd, valid[cmd], eols)))
					f, err := c.readFrame(10 * time.Second)
					requireNoError(t, err, "reading the answer to %s with body %q", cmd, eols)
					if f.command != "CONNECTED" {
						t.Fatalf("%s with body %q answered by %s, want CONNECTED", cmd, eols, f)
					}
				}
			}
		})
	}

	var conn struct {
		Version string `json:"version"`
	}
	pythonClient.run(t, p.broker(), "connect", nil, &conn)
	checkEqual(t, "1.2", conn.Version, "python3-stomp connects")
	pr := startPinger(t, p.broker(), "/queue/body-rule-pinger")
	pr.requireProgress(t)
	if sum := pr.stop(t); sum.RoundTrips == 0 || len(sum.Errors) != 0 {
		t.Errorf("python3-stomp pinger: %+v", sum)
	}
	node.stop()
}

// dialWSRaw opens a STOMP-over-WebSocket connection (subprotocol v12.stomp) as a rawConn:
// every write is one binary message (the broker answers in binary ones), and reads see the messages' bytes in order.
func dialWSRaw(t *testing.T, url string) *rawConn {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	dctx, dcancel := context.WithTimeout(ctx, 5*time.Second)
	defer dcancel()
	ws, _, err := websocket.Dial(dctx, url, &websocket.DialOptions{Subprotocols: []string{"v12.stomp"}})
	if err != nil {
		cancel()
		t.Fatalf("dialing %s: %v", url, err)
	}
	nc := websocket.NetConn(ctx, ws, websocket.MessageBinary)
	t.Cleanup(func() { _ = nc.Close(); cancel() })
	return &rawConn{t: t, conn: nc, r: bufio.NewReaderSize(nc, 64<<10)}
}

// requireClosed fails unless the broker closes c within 5 s without sending another frame.
// Over WebSocket a close shows as any read error other than the deadline.
func requireClosed(t *testing.T, c *rawConn) {
	t.Helper()
	_ = c.conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	for {
		f, err := c.readOne()
		switch {
		case err == errHeartbeat:
			continue
		case err == nil:
			t.Fatalf("after the ERROR: got %s, want the connection closed", f)
		case errors.Is(err, os.ErrDeadlineExceeded):
			t.Fatal("after the ERROR: connection still open after 5s")
		default:
			return
		}
	}
}
