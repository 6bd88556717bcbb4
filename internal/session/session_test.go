package session

import (
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/titan-broker/titan/internal/frame"
)

type echoLink struct {
	s      *Session
	mu     sync.Mutex
	frames []string
	closed chan CloseReason
}

func (l *echoLink) Handle(f *frame.Frame) {
	l.mu.Lock()
	l.frames = append(l.frames, f.Command.String())
	l.mu.Unlock()
	if r := f.Value("receipt"); r != "" {
		l.s.WriteFrame(&frame.Frame{Command: frame.CmdReceipt, Headers: []frame.Header{{Key: "receipt-id", Value: r}}})
	}
}
func (l *echoLink) Closed(r CloseReason) { l.closed <- r }

type handler struct{ link *echoLink }

func (h *handler) Connect(s *Session, f *frame.Frame) (Link, *frame.ProtocolError) {
	if f.Value("login") == "bad" {
		return nil, &frame.ProtocolError{Reason: "access refused"}
	}
	if f.Value("login") == "unsanitized" { // a stage that quotes client input carelessly
		return nil, &frame.ProtocolError{Reason: "access refused", Detail: "no user \x00\n\x1b[31m\xff" + strings.Repeat("u", 5000)}
	}
	h.link.s = s
	return h.link, nil
}

// serve starts one session on a loopback connection and returns the client side.
func serve(t *testing.T, o Options) (net.Conn, *frame.Parser, *echoLink, *Session) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	link := &echoLink{closed: make(chan CloseReason, 1)}
	ready := make(chan *Session, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		s := New(c, &handler{link}, &o)
		ready <- s
		s.Serve()
	}()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	s := <-ready
	return c, frame.NewParser(c, frame.Limits{}), link, s
}

func read(t *testing.T, c net.Conn, p *frame.Parser) *frame.Frame {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	f, err := p.ReadFrame()
	if err != nil {
		t.Fatalf("read: %v", err)
	}
	return f.Clone()
}

func TestNegotiatesHighestCommonVersion(t *testing.T) {
	cases := []struct{ accept, want string }{
		{"", "1.0"}, {"1.0", "1.0"}, {"1.0,1.1", "1.1"}, {"1.1,1.2", "1.2"}, {"1.2,2.0", "1.2"},
	}
	for _, tc := range cases {
		c, p, _, _ := serve(t, DefaultOptions())
		h := ""
		if tc.accept != "" {
			h = "accept-version:" + tc.accept + "\n"
		}
		_, _ = c.Write([]byte("CONNECT\n" + h + "host:x\n\n\x00"))
		f := read(t, c, p)
		if f.Command != frame.CmdConnected || f.Value("version") != tc.want || !strings.HasPrefix(f.Value("session"), "titan-") {
			t.Fatalf("accept %q: %s", tc.accept, f)
		}
	}
	c, p, _, _ := serve(t, DefaultOptions())
	_, _ = c.Write([]byte("CONNECT\naccept-version:2.0\n\n\x00"))
	f := read(t, c, p)
	if f.Command != frame.CmdError || f.Value("version") != "1.0,1.1,1.2" {
		t.Fatalf("unsupported version: %s", f)
	}
}

func TestHeartBeatNegotiation(t *testing.T) {
	o := DefaultOptions()
	o.HeartBeatSend, o.HeartBeatRecv, o.HeartBeatMin = 50*time.Millisecond, 100*time.Millisecond, 10*time.Millisecond
	c, p, _, _ := serve(t, o)
	_, _ = c.Write([]byte("CONNECT\naccept-version:1.2\nheart-beat:200,80\n\n\x00"))
	f := read(t, c, p)
	if f.Value("heart-beat") != "80,200" {
		t.Fatalf("CONNECTED heart-beat %q", f.Value("heart-beat"))
	}
	// The server beats every 80 ms, as asked, while we stay silent, and drops us after
	// 2 × 200 ms.
	start := time.Now()
	_ = c.SetReadDeadline(time.Now().Add(2 * time.Second))
	buf := make([]byte, 64)
	eols := 0
	for {
		n, err := c.Read(buf)
		eols += strings.Count(string(buf[:n]), "\n")
		if err != nil {
			break
		}
	}
	if el := time.Since(start); el < 350*time.Millisecond || el > 1900*time.Millisecond {
		t.Fatalf("dropped after %v, want about 400ms", el)
	}
	if eols < 2 {
		t.Fatalf("got %d heart-beat EOLs before the drop", eols)
	}
}

func TestInvalidHeartBeatHeader(t *testing.T) {
	c, p, _, _ := serve(t, DefaultOptions())
	_, _ = c.Write([]byte("CONNECT\naccept-version:1.2\nheart-beat:soon\n\n\x00"))
	if f := read(t, c, p); f.Command != frame.CmdError || f.Value("message") != "invalid heart-beat header" {
		t.Fatalf("%s", f)
	}
}

func TestFramesBeforeAndAfterConnect(t *testing.T) {
	c, p, _, _ := serve(t, DefaultOptions())
	_, _ = c.Write([]byte("SEND\ndestination:/q\nreceipt:7\n\n\x00"))
	if f := read(t, c, p); f.Command != frame.CmdError || f.Value("message") != "expected CONNECT frame" || f.Value("receipt-id") != "7" {
		t.Fatalf("%s", f)
	}
	c, p, link, _ := serve(t, DefaultOptions())
	_, _ = c.Write([]byte("CONNECT\naccept-version:1.2\n\n\x00STOMP\naccept-version:1.2\n\n\x00"))
	read(t, c, p)
	if f := read(t, c, p); f.Command != frame.CmdError || f.Value("message") != "already connected" {
		t.Fatalf("%s", f)
	}
	if r := <-link.closed; r != CloseProtocol {
		t.Fatalf("close reason %s", r)
	}
}

func TestRejectedConnect(t *testing.T) {
	c, p, _, _ := serve(t, DefaultOptions())
	_, _ = c.Write([]byte("CONNECT\naccept-version:1.2\nlogin:bad\n\n\x00"))
	if f := read(t, c, p); f.Command != frame.CmdError || f.Value("message") != "access refused" {
		t.Fatalf("%s", f)
	}
}

func TestOutboundLimitRefusesMessagesAndCallsDrain(t *testing.T) {
	o := DefaultOptions()
	o.MaxOutboundBytes = 1024
	c, p, _, s := serve(t, o)
	_, _ = c.Write([]byte("CONNECT\naccept-version:1.2\n\n\x00"))
	read(t, c, p)
	drained := make(chan struct{}, 1)
	s.OnDrain(func() { drained <- struct{}{} })
	big := make([]byte, 800)
	head := func() *frame.Buf { b := frame.GetBuf(); b.B = append(b.B, "MESSAGE\n"...); return b }
	ok1 := s.WriteMessage(head(), append([]byte("\n"), append(big, 0)...))
	ok2 := s.WriteMessage(head(), append([]byte("\n"), append(big, 0)...))
	if !ok1 {
		t.Fatal("first message refused")
	}
	if ok2 && s.QueuedBytes() > o.MaxOutboundBytes {
		t.Fatal("queued beyond the outbound limit")
	}
	read(t, c, p)
	if !ok2 {
		select {
		case <-drained:
		case <-time.After(5 * time.Second):
			t.Fatal("drain hook not called after a refused write")
		}
	}
}

func TestDisconnectFlushesReceiptThenCloses(t *testing.T) {
	c, p, link, s := serve(t, DefaultOptions())
	_, _ = c.Write([]byte("CONNECT\naccept-version:1.2\n\n\x00DISCONNECT\nreceipt:bye\n\n\x00"))
	read(t, c, p)
	f := read(t, c, p)
	if f.Command != frame.CmdReceipt || f.Value("receipt-id") != "bye" {
		t.Fatalf("%s", f)
	}
	s.Disconnect()
	if r := <-link.closed; r != CloseClientDisconnect {
		t.Fatalf("close reason %s", r)
	}
}

// TestErrorFramesSayWhatWasWrong sends one bad input per connection and checks the ERROR:
// a short, stable message header, and a text/plain body (its content-length exact) that names
// the offending command, header or value and the rule, echoing client input only escaped and
// bounded. Every byte the session writes, the ERROR's included, ends frames with NUL LF.
func TestErrorFramesSayWhatWasWrong(t *testing.T) {
	const connect = "CONNECT\naccept-version:1.2\n\n\x00"
	hostile := "\x1b[2J\x07" + strings.Repeat("Z", 3000)
	for _, c := range []struct {
		name, in, message string
		body              []string
	}{
		{"frame before CONNECT", "SEND\ndestination:/q\n\n\x00", "expected CONNECT frame",
			[]string{"must be CONNECT or STOMP, not SEND"}},
		{"second CONNECT", connect + "STOMP\naccept-version:1.2\n\n\x00", "already connected",
			[]string{"STOMP on a connection that is already connected"}},
		{"server frame from a client", connect + "MESSAGE\n\n\x00", "unexpected MESSAGE frame from a client",
			[]string{"MESSAGE is a frame the server sends", "SUBSCRIBE"}},
		{"invalid heart-beat", "CONNECT\naccept-version:1.2\nheart-beat:soon\n\n\x00", "invalid heart-beat header",
			[]string{`heart-beat "soon"`, "milliseconds"}},
		{"unsupported version", "CONNECT\naccept-version:2.0\n\n\x00", "unsupported protocol version",
			[]string{`accept-version "2.0"`, "Supported protocol versions are 1.0,1.1,1.2"}},
		{"unknown command", connect + "FROBNICATE\n\n\x00", "unknown command",
			[]string{`command "FROBNICATE"`, "is not a STOMP command"}},
		{"hostile unknown command", connect + hostile + "\n\n\x00", "unknown command",
			[]string{`command "\x1b[2J\a` + strings.Repeat("Z", frame.MaxEchoBytes-5) + `"...`}},
		{"malformed header", connect + "SEND\ndestination\n\n\x00", "malformed header",
			[]string{`header line "destination"`, "no colon"}},
		{"a stage's unsanitized detail", "CONNECT\naccept-version:1.2\nlogin:unsanitized\n\n\x00", "access refused",
			[]string{`no user \x00\x0a\x1b[31m\xffuuu`, "uuu..."}},
		{"hostile malformed header", connect + "SEND\n" + hostile + "\n\n\x00", "malformed header",
			[]string{`header line "\x1b[2J\a`, "no colon"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			conn, _, _, _ := serve(t, DefaultOptions())
			_, _ = conn.Write([]byte(c.in))
			_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
			var raw []byte
			buf := make([]byte, 4096)
			for {
				n, err := conn.Read(buf)
				raw = append(raw, buf[:n]...)
				if err != nil {
					break // the session closes after its ERROR
				}
			}
			if !strings.HasSuffix(string(raw), frame.Terminator) {
				t.Errorf("the last frame does not end with NUL LF: %q", raw)
			}
			p := frame.NewParser(strings.NewReader(string(raw)), frame.Limits{})
			var f *frame.Frame
			for {
				g, err := p.ReadFrame()
				if err != nil {
					break
				}
				f = g.Clone()
			}
			if f == nil || f.Command != frame.CmdError {
				t.Fatalf("want an ERROR last, got %q", raw)
			}
			if f.Value("message") != c.message {
				t.Errorf("message %q, want %q", f.Value("message"), c.message)
			}
			body := string(f.Body)
			for _, w := range c.body {
				if !strings.Contains(body, w) {
					t.Errorf("body %q does not contain %q", body, w)
				}
			}
			if f.Value("content-type") != "text/plain" {
				t.Errorf("content-type %q", f.Value("content-type"))
			}
			if cl := f.Value("content-length"); cl != "" && cl != strconv.Itoa(len(body)) {
				t.Errorf("content-length %s for a %d-byte body", cl, len(body))
			}
			for _, r := range strings.TrimSuffix(body, "\n") {
				if r < 0x20 || r == 0x7f {
					t.Errorf("body %q contains control character %U", body, r)
				}
			}
			if len(body) > frame.MaxDetailBytes+len("...\n") {
				t.Errorf("body is %d bytes", len(body))
			}
			if strings.Contains(body, strings.Repeat("Z", frame.MaxEchoBytes+1)) {
				t.Errorf("body echoes more than %d octets of input: %q", frame.MaxEchoBytes, body)
			}
		})
	}
}

// The server offers in CONNECTED the heart-beats the client asks for, raised to
// HeartBeatMin, and its configured intervals only to a client that asks for none; 0 in the
// configuration still disables a direction, and STOMP 1.0 has no heart-beats.
func TestHeartBeatOffersWhatTheClientAsks(t *testing.T) {
	for _, tc := range []struct {
		send, recv time.Duration // HeartBeatSend, HeartBeatRecv (HeartBeatMin is 1 s)
		accept     string
		client     string // CONNECT heart-beat, "" for none
		want       string // CONNECTED heart-beat, "" for none
	}{
		{10 * time.Second, 10 * time.Second, "1.2", "1000,1000", "1000,1000"},
		{10 * time.Second, 10 * time.Second, "1.2", "3000,5000", "5000,3000"},
		{10 * time.Second, 10 * time.Second, "1.2", "100,250", "1000,1000"}, // the floor
		{10 * time.Second, 10 * time.Second, "1.2", "0,0", "10000,10000"},
		{10 * time.Second, 10 * time.Second, "1.2", "", "10000,10000"},
		{10 * time.Second, 10 * time.Second, "1.1", "0,2000", "2000,10000"},
		{0, 10 * time.Second, "1.2", "1000,1000", "0,1000"},          // sending disabled
		{10 * time.Second, 0, "1.2", "1000,1000", "1000,0"},          // receiving not wanted
		{10 * time.Second, 10 * time.Second, "1.0", "1000,1000", ""}, // no heart-beats on 1.0
	} {
		o := DefaultOptions()
		o.HeartBeatSend, o.HeartBeatRecv = tc.send, tc.recv
		c, p, _, _ := serve(t, o)
		raw := "CONNECT\naccept-version:" + tc.accept + "\n"
		if tc.client != "" {
			raw += "heart-beat:" + tc.client + "\n"
		}
		_, _ = c.Write([]byte(raw + "\n\x00"))
		f := read(t, c, p)
		if got := f.Value("heart-beat"); f.Command != frame.CmdConnected || got != tc.want {
			t.Errorf("send %v recv %v, %s client heart-beat %q: CONNECTED heart-beat %q, want %q (%s)",
				tc.send, tc.recv, tc.accept, tc.client, got, tc.want, f)
		}
		c.Close()
	}
}

// A client that asks for a beat every 100 ms, with a 100 ms floor, gets one about every
// 100 ms, not every 10 s.
func TestHeartBeatAtTheClientsInterval(t *testing.T) {
	o := DefaultOptions()
	o.HeartBeatMin = 100 * time.Millisecond
	c, p, _, _ := serve(t, o)
	_, _ = c.Write([]byte("CONNECT\naccept-version:1.2\nheart-beat:0,100\n\n\x00"))
	if f := read(t, c, p); f.Value("heart-beat") != "100,10000" {
		t.Fatalf("CONNECTED %s", f)
	}
	_ = c.SetReadDeadline(time.Now().Add(time.Second))
	buf := make([]byte, 64)
	eols := 0
	for {
		n, err := c.Read(buf)
		eols += strings.Count(string(buf[:n]), "\n")
		if err != nil {
			break
		}
	}
	// 10 expected in 1 s; allow a loaded machine half of them.
	if eols < 5 {
		t.Fatalf("%d heart-beats in 1 s at a 100 ms interval", eols)
	}
}

// Done's channel is made on first use: one asked for before Close is closed by Close, and
// one asked for after Close is already closed.
func TestDoneBeforeAndAfterClose(t *testing.T) {
	_, _, _, s1 := serve(t, DefaultOptions())
	d := s1.Done()
	select {
	case <-d:
		t.Fatal("Done closed before Close")
	default:
	}
	s1.Close(CloseClientEOF)
	select {
	case <-d:
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not close the channel Done returned before it")
	}
	_, _, _, s2 := serve(t, DefaultOptions())
	s2.Close(CloseClientEOF)
	select {
	case <-s2.Done():
	default:
		t.Fatal("Done after Close returned an open channel")
	}
}
