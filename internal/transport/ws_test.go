package transport

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"testing"
	"time"

	"github.com/coder/websocket"
)

func TestWebSocketStreamReadsTextAndBinaryAndWritesOneMessagePerBatch(t *testing.T) {
	l, err := ListenWebSocket("127.0.0.1:0", WSOptions{Path: "/stomp"})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, _, err := websocket.Dial(ctx, "ws://"+l.Addr().String()+"/stomp", &websocket.DialOptions{Subprotocols: []string{"v12.stomp"}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.CloseNow()
	if c.Subprotocol() != "v12.stomp" {
		t.Fatalf("subprotocol %q", c.Subprotocol())
	}
	sc, err := l.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer sc.Close()
	// A frame split over a text and a binary message reads as one stream.
	if err := c.Write(ctx, websocket.MessageText, []byte("CONNECT\naccept-")); err != nil {
		t.Fatal(err)
	}
	if err := c.Write(ctx, websocket.MessageBinary, []byte("version:1.2\n\n\x00")); err != nil {
		t.Fatal(err)
	}
	want := "CONNECT\naccept-version:1.2\n\n\x00"
	got := make([]byte, len(want))
	if _, err := io.ReadFull(sc, got); err != nil || string(got) != want {
		t.Fatalf("read %q, %v", got, err)
	}
	n, err := sc.(*wsConn).WriteVectored([][]byte{[]byte("MESSAGE\n"), []byte("\n\x00\xff\x00")})
	if err != nil || n != 12 {
		t.Fatalf("write %d %v", n, err)
	}
	typ, msg, err := c.Read(ctx)
	if err != nil || typ != websocket.MessageBinary || string(msg) != "MESSAGE\n\n\x00\xff\x00" {
		t.Fatalf("client read %v %q %v", typ, msg, err)
	}
	// A write deadline that passed while no write was in progress changes nothing: the
	// session sets a fresh one before its next write.
	_ = sc.SetWriteDeadline(time.Now().Add(10 * time.Millisecond))
	time.Sleep(30 * time.Millisecond)
	_ = sc.SetWriteDeadline(time.Now().Add(5 * time.Second))
	if _, err := sc.Write([]byte("\n")); err != nil {
		t.Fatalf("write after an idle deadline: %v", err)
	}
	if _, _, err := c.Read(ctx); err != nil {
		t.Fatalf("client read: %v", err)
	}
	// A read still blocked at its deadline closes the connection: os.ErrDeadlineExceeded.
	_ = sc.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
	if _, err := sc.Read(make([]byte, 1)); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("read after deadline: %v", err)
	}
}

func TestWebSocketAllowedOrigins(t *testing.T) {
	l, err := ListenWebSocket("127.0.0.1:0", WSOptions{Path: "/stomp", AllowedOrigins: []string{"app.example.com"}})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	url := "ws://" + l.Addr().String() + "/stomp"
	bad := http.Header{"Origin": []string{"http://evil.example"}}
	if c, _, err := websocket.Dial(ctx, url, &websocket.DialOptions{HTTPHeader: bad}); err == nil {
		c.CloseNow()
		t.Fatal("upgrade from a foreign origin accepted")
	}
	good := http.Header{"Origin": []string{"https://app.example.com"}}
	c, _, err := websocket.Dial(ctx, url, &websocket.DialOptions{HTTPHeader: good})
	if err != nil {
		t.Fatalf("allowed origin refused: %v", err)
	}
	c.CloseNow()
	sc, err := l.Accept()
	if err != nil {
		t.Fatal(err)
	}
	sc.Close()
}

// With no allowed origins configured, only same-origin browser pages (Origin host equal to
// the Host header) and clients without an Origin may connect.
func TestWebSocketDefaultsToSameOrigin(t *testing.T) {
	l, err := ListenWebSocket("127.0.0.1:0", WSOptions{Path: "/stomp"})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	url := "ws://" + l.Addr().String() + "/stomp"
	bad := http.Header{"Origin": []string{"http://evil.example"}}
	if c, resp, err := websocket.Dial(ctx, url, &websocket.DialOptions{HTTPHeader: bad}); err == nil {
		c.CloseNow()
		t.Fatal("upgrade from a foreign origin accepted by default")
	} else if resp == nil || resp.StatusCode != http.StatusForbidden {
		t.Fatalf("foreign origin: %v (want 403)", err)
	}
	for _, h := range []http.Header{{"Origin": []string{"http://" + l.Addr().String()}}, nil} {
		c, _, err := websocket.Dial(ctx, url, &websocket.DialOptions{HTTPHeader: h})
		if err != nil {
			t.Fatalf("origin %v refused: %v", h, err)
		}
		c.CloseNow()
		sc, err := l.Accept()
		if err != nil {
			t.Fatal(err)
		}
		sc.Close()
	}
}

// DNS rebinding: a page from a foreign name resolving to the broker is same-origin for the
// browser (Origin host = Host), so the Host itself must be a name of the broker.
func TestWebSocketRefusesForeignHostFromBrowsers(t *testing.T) {
	l, err := ListenWebSocket("127.0.0.1:0", WSOptions{Path: "/stomp", AllowedHosts: []string{"broker.example"}})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, port, _ := net.SplitHostPort(l.Addr().String())
	url := "ws://" + l.Addr().String() + "/stomp"
	evil := "rebind.example:" + port
	if c, resp, err := websocket.Dial(ctx, url, &websocket.DialOptions{Host: evil, HTTPHeader: http.Header{"Origin": {"http://" + evil}}}); err == nil {
		c.CloseNow()
		t.Fatal("a same-origin page on a foreign Host was upgraded")
	} else if resp == nil || resp.StatusCode != http.StatusForbidden {
		t.Fatalf("foreign Host: %v (want 403)", err)
	}
	for _, host := range []string{"broker.example:" + port, "localhost:" + port} {
		c, _, err := websocket.Dial(ctx, url, &websocket.DialOptions{Host: host, HTTPHeader: http.Header{"Origin": {"http://" + host}}})
		if err != nil {
			t.Fatalf("Host %s refused: %v", host, err)
		}
		c.CloseNow()
		sc, err := l.Accept()
		if err != nil {
			t.Fatal(err)
		}
		sc.Close()
	}
}

// Origins are checked with their scheme: without allowed origins only same-origin pages of
// the listener's scheme; an entry with a scheme matches only it; one without matches https
// (and http on a plain ws listener).
func TestOriginAllowedIsSchemeAware(t *testing.T) {
	same := &WSListener{scheme: "https"}
	for origin, want := range map[string]bool{
		"https://broker.example:8443": true, "http://broker.example:8443": false, "https://evil.example": false, "null": false,
	} {
		if got := same.originAllowed(origin, "broker.example:8443"); got != want {
			t.Errorf("same-origin wss: %s allowed=%v, want %v", origin, got, want)
		}
	}
	wss := &WSListener{scheme: "https", origins: []string{"app.example.com", "http://dev.example.com", "https://*.corp.example"}}
	ws := &WSListener{scheme: "http", origins: wss.origins}
	for _, c := range []struct {
		l      *WSListener
		origin string
		want   bool
	}{
		{wss, "https://app.example.com", true},
		{wss, "http://app.example.com", false}, // bare entry on wss: https only
		{ws, "http://app.example.com", true},   // bare entry on plain ws: http too
		{wss, "http://dev.example.com", true},
		{wss, "https://dev.example.com", false},
		{wss, "https://a.corp.example", true},
		{wss, "http://a.corp.example", false},
		{wss, "https://app.example.com.evil.example", false},
	} {
		if got := c.l.originAllowed(c.origin, "broker:1"); got != c.want {
			t.Errorf("listener %s: %s allowed=%v, want %v", c.l.scheme, c.origin, got, c.want)
		}
	}
}

// A connection to the WebSocket port that sends one plain HTTP request and nothing more is
// closed once the handshake timeout passes.
func TestPlainHTTPRequestConnectionClosed(t *testing.T) {
	l, err := ListenWebSocket("127.0.0.1:0", WSOptions{Path: "/stomp", HandshakeTimeout: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	c, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_, _ = c.Write([]byte("GET /stomp HTTP/1.1\r\nHost: x\r\n\r\n"))
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.ReadAll(c); err != nil {
		t.Fatalf("the connection stayed open after one plain request: %v", err)
	}
}
