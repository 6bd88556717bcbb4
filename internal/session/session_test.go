package session

import (
	"net"
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
