// Package brokertest starts real in-process brokers for tests and gives them a raw STOMP
// client that speaks bytes, so tests can send exactly what a broken or hostile client would.
package brokertest

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/titan-broker/titan/internal/broker"
	"github.com/titan-broker/titan/internal/config"
	"github.com/titan-broker/titan/internal/frame"
)

// DefaultTestConfig returns a config for tests: one TCP server on 127.0.0.1:0, monitor on
// 127.0.0.1:0, memory store, short heart-beats.
func DefaultTestConfig() config.Config {
	c := config.Default()
	c.Servers[0].Host = "127.0.0.1"
	c.Servers[0].Port = 0
	hb := 1000
	c.Servers[0].ProtocolOptions.HeartbeatX = &hb
	c.Servers[0].ProtocolOptions.HeartbeatY = &hb
	c.Monitor.Host = "127.0.0.1"
	c.Monitor.Port = 0
	c.Store.Type = "memory"
	c.Log.Level = "error"
	return c
}

// Run starts a broker with cfg and registers its shutdown with t.Cleanup.
func Run(t testing.TB, cfg config.Config, opts ...broker.Options) *broker.Broker {
	t.Helper()
	var o broker.Options
	if len(opts) > 0 {
		o = opts[0]
	}
	b, err := broker.New(cfg, o)
	if err != nil {
		t.Fatalf("broker.New: %v", err)
	}
	if err := b.Start(); err != nil {
		t.Fatalf("broker.Start: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := b.Shutdown(ctx); err != nil {
			t.Errorf("broker.Shutdown: %v", err)
		}
	})
	return b
}

// Client is a raw STOMP client for tests. Not safe for concurrent use.
type Client struct {
	t    testing.TB
	Conn net.Conn
	p    *frame.Parser
	// barriers numbers this client's ExpectQuiet transactions.
	barriers int
}

// Dial connects to addr without sending anything.
func Dial(t testing.TB, addr string) *Client {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatalf("dial %s: %v", addr, err)
	}
	t.Cleanup(func() { _ = c.Close() })
	cl := &Client{t: t, Conn: c}
	cl.p = frame.NewParser(c, frame.Limits{MaxBodyBytes: 64 << 20})
	return cl
}

// Connect dials addr and completes a STOMP 1.2 CONNECT (extra headers as "k:v" strings).
func Connect(t testing.TB, addr string, hdrs ...string) *Client {
	t.Helper()
	c := Dial(t, addr)
	c.connect(hdrs)
	return c
}

// connect sends a STOMP 1.2 CONNECT with hdrs and expects CONNECTED.
func (c *Client) connect(hdrs []string) {
	c.t.Helper()
	h := "accept-version:1.2\nhost:test\n"
	for _, x := range hdrs {
		h += x + "\n"
	}
	c.Send("CONNECT\n" + h + "\n\x00")
	c.Expect(frame.CmdConnected)
}

// Send writes raw bytes.
func (c *Client) Send(raw string) {
	c.t.Helper()
	if _, err := c.Conn.Write([]byte(raw)); err != nil {
		c.t.Fatalf("write: %v", err)
	}
}

// SendFrame writes a frame built from a command, "k:v" headers and a body.
func (c *Client) SendFrame(cmd string, body string, hdrs ...string) {
	c.t.Helper()
	var b strings.Builder
	b.WriteString(cmd + "\n")
	for _, h := range hdrs {
		b.WriteString(h + "\n")
	}
	b.WriteString("\n" + body + "\x00")
	c.Send(b.String())
}

// Read returns the next frame (a clone) or fails the test after timeout.
func (c *Client) Read(timeout time.Duration) (*frame.Frame, error) {
	_ = c.Conn.SetReadDeadline(time.Now().Add(timeout))
	f, err := c.p.ReadFrame()
	if err != nil {
		if ne, ok := err.(net.Error); ok && ne.Timeout() && c.p.Buffered() == 0 {
			// The parser keeps read errors sticky; start a fresh one so the client can go on
			// reading after an expected silence.
			c.p = frame.NewParser(c.Conn, frame.Limits{MaxBodyBytes: 64 << 20})
		}
		return nil, err
	}
	return f.Clone(), nil
}

// Expect reads the next frame and fails unless it has cmd and every "k:v" header given.
func (c *Client) Expect(cmd frame.Command, hdrs ...string) *frame.Frame {
	c.t.Helper()
	f, err := c.Read(5 * time.Second)
	if err != nil {
		c.t.Fatalf("expecting %s: %v", cmd, err)
	}
	if f.Command != cmd {
		c.t.Fatalf("got %s, want %s", f, cmd)
	}
	for _, h := range hdrs {
		k, v, _ := strings.Cut(h, ":")
		if got, ok := f.Get(k); !ok || got != v {
			c.t.Fatalf("%s: header %s = %q (present %v), want %q", f, k, got, ok, v)
		}
	}
	return f
}

// ExpectQuiet proves with a barrier, not a timer, that nothing is queued for this
// connection: it sends a frame that changes nothing (BEGIN, then ABORT with a receipt, of a
// transaction private to the barrier) and fails unless that RECEIPT is the next frame to
// arrive (within 5 s). The broker handles one connection's frames in order and writes one
// connection's frames in order, so a MESSAGE it had already handed to this connection
// arrives before the RECEIPT.
//
// It proves nothing about work the broker has not done yet: call it once the action that
// must have had no effect on this connection is known to be complete — a RECEIPT for the
// frame that caused it (fan-out to topics and dispatch to queue consumers with credit run
// before the SEND is answered), this connection's own earlier frames, or a later message
// that travels the same ordered path.
func (c *Client) ExpectQuiet() {
	c.t.Helper()
	c.barriers++
	id := "titan-barrier-" + strconv.Itoa(c.barriers)
	c.SendFrame("BEGIN", "", "transaction:"+id)
	c.SendFrame("ABORT", "", "transaction:"+id, "receipt:"+id)
	f, err := c.Read(5 * time.Second)
	if err != nil {
		c.t.Fatalf("barrier %s: %v", id, err)
	}
	if f.Command != frame.CmdReceipt || f.Value("receipt-id") != id {
		c.t.Fatalf("expected nothing before barrier %s, got %s", id, f)
	}
}

// ExpectClosed fails unless the broker closes the connection within d.
func (c *Client) ExpectClosed(d time.Duration) {
	c.t.Helper()
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		f, err := c.Read(time.Until(deadline))
		if err != nil {
			if ne, ok := err.(net.Error); ok && ne.Timeout() {
				break
			}
			return
		}
		_ = f
	}
	c.t.Fatalf("connection not closed within %v", d)
}

// String is for logs.
func (c *Client) String() string { return fmt.Sprintf("client %s", c.Conn.LocalAddr()) }

// Setup is one cell of the broker-level matrix: the store a broker runs on and the transport
// its clients use.
type Setup struct {
	// Store is the config store type: "memory" or "pebble" (in a per-test directory).
	Store string
	// Transport is the listener's transport: "tcp" or "websocket" (path /stomp, STOMP 1.2
	// subprotocol, frames in binary messages).
	Transport string
}

// String names the setup as a subtest: "memory/tcp", "pebble/websocket", ….
func (s Setup) String() string { return s.Store + "/" + s.Transport }

// Setups returns the matrix {memory, Pebble} × {TCP, WebSocket}.
func Setups() []Setup {
	var out []Setup
	for _, st := range []string{"memory", "pebble"} {
		for _, tr := range []string{"tcp", "websocket"} {
			out = append(out, Setup{Store: st, Transport: tr})
		}
	}
	return out
}

// ForEachSetup runs fn as one subtest per setup of Setups, each of which starts its own
// broker (Setup.Start) and dials it (Setup.Connect): a test written once runs over every
// store and transport.
func ForEachSetup(t *testing.T, fn func(t *testing.T, s Setup)) {
	t.Helper()
	for _, s := range Setups() {
		t.Run(s.String(), func(t *testing.T) { fn(t, s) })
	}
}

// Config returns DefaultTestConfig with s's store (Pebble in a t.TempDir()) and its first
// server on s's transport.
func (s Setup) Config(t testing.TB) config.Config {
	t.Helper()
	cfg := DefaultTestConfig()
	if s.Store == "pebble" {
		cfg.Store = config.Store{Type: "pebble", DataDir: t.TempDir()}
	}
	if s.Transport == "websocket" {
		cfg.Servers[0].Transport = "websocket"
		cfg.Servers[0].TransportOptions.Path = "/stomp"
	}
	return cfg
}

// Start runs a broker with s's config (after mutate) for the test's lifetime and returns the
// address of its first server.
func (s Setup) Start(t testing.TB, mutate ...func(*config.Config)) string {
	t.Helper()
	cfg := s.Config(t)
	for _, m := range mutate {
		m(&cfg)
	}
	return Run(t, cfg).Addrs()[0]
}

// Dial connects to addr over s's transport without sending anything.
func (s Setup) Dial(t testing.TB, addr string) *Client {
	t.Helper()
	if s.Transport != "websocket" {
		return Dial(t, addr)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	ws, _, err := websocket.Dial(ctx, "ws://"+addr+"/stomp", &websocket.DialOptions{Subprotocols: []string{"v12.stomp"}})
	if err != nil {
		t.Fatalf("WebSocket dial %s: %v", addr, err)
	}
	ws.SetReadLimit(64 << 20)
	// The connection lives until the test ends (NetConn's context bounds its lifetime); each
	// Write is one binary WebSocket message.
	c := websocket.NetConn(context.Background(), ws, websocket.MessageBinary)
	t.Cleanup(func() { _ = c.Close() })
	cl := &Client{t: t, Conn: c}
	cl.p = frame.NewParser(c, frame.Limits{MaxBodyBytes: 64 << 20})
	return cl
}

// Connect dials addr over s's transport and completes a STOMP 1.2 CONNECT (extra headers as
// "k:v" strings).
func (s Setup) Connect(t testing.TB, addr string, hdrs ...string) *Client {
	t.Helper()
	c := s.Dial(t, addr)
	c.connect(hdrs)
	return c
}
