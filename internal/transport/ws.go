package transport

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"path"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"
)

// Subprotocols are the STOMP WebSocket subprotocols offered (STOMP over WebSocket
// convention, as RabbitMQ Web-STOMP and ActiveMQ Artemis use).
var Subprotocols = []string{"v12.stomp", "v11.stomp", "v10.stomp", "stomp"}

// WSListener accepts STOMP-over-WebSocket connections on one HTTP path and yields each as a
// net.Conn carrying the STOMP byte stream (frames may span WebSocket messages; text and binary
// messages are both read). Outgoing data is sent as binary messages so bodies stay
// byte-exact. Safe for concurrent use.
type WSListener struct {
	ln      net.Listener
	srv     *http.Server
	conns   chan net.Conn
	done    chan struct{}
	once    sync.Once
	origins []string        // allowed cross-origin Origin patterns; empty: same-origin only
	scheme  string          // the scheme of pages same-origin with this listener: https for wss, http for ws
	hosts   map[string]bool // Host names browsers may use besides IPs and loopback names
}

// hostAllowed reports whether a browser request's Host names this listener: an IP literal,
// localhost (or *.localhost), or one of the allowed hosts.
func (w *WSListener) hostAllowed(host string) bool {
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	host = strings.ToLower(strings.TrimSuffix(strings.Trim(host, "[]"), "."))
	return net.ParseIP(host) != nil || host == "localhost" || strings.HasSuffix(host, ".localhost") || w.hosts[host]
}

// WSOptions configure a WebSocket listener.
type WSOptions struct {
	// Path is the HTTP path that is upgraded (e.g. "/stomp").
	Path string
	// AllowedOrigins are Origin host patterns (path.Match syntax, "*" for any) browsers may
	// also connect from; empty allows same-origin pages only (Origin host equal to the Host
	// header). Requests without an Origin header (non-browser clients) are always accepted.
	AllowedOrigins []string
	// AllowedHosts are the names (besides IP literals and loopback names) a browser
	// request's Host header may carry: a page from a foreign name that resolves to this
	// address (DNS rebinding) is same-origin for the browser, so the Origin check alone
	// cannot refuse it. Requests without an Origin header (non-browser clients) are not
	// checked.
	AllowedHosts []string
	// TLS, when not nil, serves wss://.
	TLS *tls.Config
	// KeepAlive is the TCP keepalive period of accepted connections (see ListenTCP).
	KeepAlive time.Duration
	// HandshakeTimeout bounds the HTTP part of a connection: reading a request (headers and
	// body) and waiting idle for the next one, so a connection that sends one plain HTTP
	// request and nothing more is closed after it (default 10 s). An upgraded connection's
	// STOMP handshake then has the session's connect-timeout.
	HandshakeTimeout time.Duration
	// Logger receives the HTTP server's errors (at debug level); nil discards them.
	Logger *slog.Logger
}

// ListenWebSocket listens on addr and upgrades requests for o.Path.
func ListenWebSocket(addr string, o WSOptions) (*WSListener, error) {
	ln, err := ListenTCP(addr, o.TLS, o.KeepAlive)
	if err != nil {
		return nil, err
	}
	log := o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	w := &WSListener{ln: ln, conns: make(chan net.Conn), done: make(chan struct{}), origins: o.AllowedOrigins, hosts: map[string]bool{}}
	for _, h := range o.AllowedHosts {
		w.hosts[strings.ToLower(h)] = true
	}
	mux := http.NewServeMux()
	mux.HandleFunc(o.Path, w.upgrade)
	hs := o.HandshakeTimeout
	if hs <= 0 {
		hs = 10 * time.Second
	}
	// net/http clears these deadlines when the upgrade hijacks the connection.
	w.srv = &http.Server{Handler: mux, ReadHeaderTimeout: hs, ReadTimeout: hs, WriteTimeout: hs, IdleTimeout: hs,
		ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelDebug)}
	w.scheme = "http"
	if o.TLS != nil {
		w.scheme = "https"
	}
	go func() { _ = w.srv.Serve(ln) }()
	return w, nil
}

func (w *WSListener) upgrade(rw http.ResponseWriter, r *http.Request) {
	// Same-origin only unless other origins are listed: a browser page from another site
	// must not reach the broker through a user's browser (and their network position).
	// Clients that send no Origin (not browsers) are not affected.
	// The origin is checked here, scheme included (originAllowed); the library's host-only
	// check is off.
	opts := &websocket.AcceptOptions{Subprotocols: Subprotocols, InsecureSkipVerify: true}
	if r.Header.Get("Origin") != "" && !w.hostAllowed(r.Host) {
		http.Error(rw, "forbidden: Host "+r.Host+" is not a name of this broker (add it to transport-options.allowed-hosts)", http.StatusForbidden)
		return
	}
	if o := r.Header.Get("Origin"); o != "" && !w.originAllowed(o, r.Host) {
		http.Error(rw, "forbidden: Origin "+o+" is not allowed (transport-options.allowed-origins)", http.StatusForbidden)
		return
	}
	c, err := websocket.Accept(rw, r, opts)
	if err != nil {
		return
	}
	c.SetReadLimit(-1) // the STOMP parser enforces frame limits
	ctx, cancel := context.WithCancel(context.Background())
	nc := &wsConn{ws: c, ctx: ctx, cancel: cancel, local: wsAddr(r.Host), remote: wsAddr(r.RemoteAddr), tls: r.TLS}
	select {
	case w.conns <- nc:
		<-ctx.Done() // keep the handler (and its hijacked connection) alive until closed
	case <-w.done:
		cancel()
		_ = c.Close(websocket.StatusGoingAway, "server shutting down")
	}
}

// wsAddr is a WebSocket endpoint address.
type wsAddr string

func (a wsAddr) Network() string { return "websocket" }
func (a wsAddr) String() string  { return string(a) }

// wsConn carries the STOMP byte stream over one WebSocket. It reads text and binary messages
// alike (browser clients send text frames, stompjs can be told to send binary ones) as one
// continuous stream, so a frame may span messages and a message may hold several frames.
// Each writev becomes one binary message, so bodies stay byte-exact. Deadlines apply to calls
// that are in progress when they pass, as net.Conn's do: a Read or Write still blocked at its
// deadline closes the connection and returns os.ErrDeadlineExceeded; an idle connection with
// a past deadline is untouched.
type wsConn struct {
	ws            *websocket.Conn
	ctx           context.Context
	cancel        context.CancelFunc
	local, remote net.Addr
	tls           *tls.ConnectionState // the TLS connection the WebSocket runs over (wss); nil for ws

	rmu sync.Mutex // serialises Read; guards r
	r   io.Reader  // the message being read

	dmu           sync.Mutex // guards the deadlines
	readDeadline  time.Time
	writeDeadline time.Time
	expired       atomic.Bool // a deadline closed the connection
}

func (c *wsConn) err(err error) error {
	if c.expired.Load() {
		return os.ErrDeadlineExceeded
	}
	if websocket.CloseStatus(err) != -1 || errors.Is(err, io.EOF) {
		return io.EOF
	}
	return err
}

// guard arms a timer that closes the connection if the call it covers is still running at
// the deadline; the returned stop must be called when the call returns.
func (c *wsConn) guard(write bool) (stop func() bool) {
	c.dmu.Lock()
	at := c.readDeadline
	if write {
		at = c.writeDeadline
	}
	c.dmu.Unlock()
	if at.IsZero() {
		return func() bool { return true }
	}
	t := time.AfterFunc(time.Until(at), func() {
		c.expired.Store(true)
		_ = c.ws.CloseNow()
		c.cancel()
	})
	return t.Stop
}

// Read reads the stream, message after message.
func (c *wsConn) Read(p []byte) (int, error) {
	c.rmu.Lock()
	defer c.rmu.Unlock()
	defer c.guard(false)()
	for {
		if c.r == nil {
			_, r, err := c.ws.Reader(c.ctx)
			if err != nil {
				return 0, c.err(err)
			}
			c.r = r
		}
		n, err := c.r.Read(p)
		if errors.Is(err, io.EOF) {
			c.r = nil
			if n == 0 {
				continue
			}
			err = nil
		}
		if err != nil {
			return n, c.err(err)
		}
		return n, nil
	}
}

// Write sends p as one binary message.
func (c *wsConn) Write(p []byte) (int, error) {
	defer c.guard(true)()
	if err := c.ws.Write(c.ctx, websocket.MessageBinary, p); err != nil {
		return 0, c.err(err)
	}
	return len(p), nil
}

// WriteVectored sends bufs as one binary message (the session's writev).
func (c *wsConn) WriteVectored(bufs [][]byte) (int64, error) {
	defer c.guard(true)()
	w, err := c.ws.Writer(c.ctx, websocket.MessageBinary)
	if err != nil {
		return 0, c.err(err)
	}
	var n int64
	for _, b := range bufs {
		m, err := w.Write(b)
		n += int64(m)
		if err != nil {
			_ = w.Close()
			return n, c.err(err)
		}
	}
	if err := w.Close(); err != nil {
		return n, c.err(err)
	}
	return n, nil
}

// Close closes the WebSocket (without waiting for the peer's close frame).
func (c *wsConn) Close() error {
	err := c.ws.CloseNow()
	c.cancel()
	return err
}

// ConnectionState returns the state of the TLS connection under the WebSocket (zero for
// ws://), so that the session sees a verified client certificate of a wss:// connection.
func (c *wsConn) ConnectionState() tls.ConnectionState {
	if c.tls == nil {
		return tls.ConnectionState{}
	}
	return *c.tls
}

func (c *wsConn) LocalAddr() net.Addr  { return c.local }
func (c *wsConn) RemoteAddr() net.Addr { return c.remote }

// SetDeadline sets both deadlines.
func (c *wsConn) SetDeadline(t time.Time) error {
	c.dmu.Lock()
	c.readDeadline, c.writeDeadline = t, t
	c.dmu.Unlock()
	return nil
}

// SetReadDeadline bounds the Read calls in progress at t (zero: no bound).
func (c *wsConn) SetReadDeadline(t time.Time) error {
	c.dmu.Lock()
	c.readDeadline = t
	c.dmu.Unlock()
	return nil
}

// SetWriteDeadline bounds the Write calls in progress at t (zero: no bound).
func (c *wsConn) SetWriteDeadline(t time.Time) error {
	c.dmu.Lock()
	c.writeDeadline = t
	c.dmu.Unlock()
	return nil
}

// Accept returns the next upgraded connection; net.ErrClosed after Close.
func (w *WSListener) Accept() (net.Conn, error) {
	select {
	case c := <-w.conns:
		return c, nil
	case <-w.done:
		return nil, net.ErrClosed
	}
}

// Close stops accepting; established connections stay open until their sessions close them.
func (w *WSListener) Close() error {
	w.once.Do(func() { close(w.done) })
	err := w.ln.Close()
	if errors.Is(err, net.ErrClosed) {
		return nil
	}
	return err
}

// Addr returns the listening address.
func (w *WSListener) Addr() net.Addr { return w.ln.Addr() }

// originAllowed reports whether a browser page of origin ("scheme://host[:port]") may open a
// connection through Host host (issue 29: scheme-aware). Without allowed origins only
// same-origin pages may: same host and the listener's scheme (https for wss, http for ws).
// An allowed-origins entry with a scheme ("https://app.example.com", "https://*.example.com")
// matches that scheme only; an entry without one matches https, and http too when the
// listener itself is plain ws (a page served over http cannot be trusted to be the site it
// names on a wss listener). Hosts match with path.Match, case-insensitively, port included
// when the entry has one.
func (w *WSListener) originAllowed(origin, host string) bool {
	u, err := url.Parse(origin)
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
		return false
	}
	scheme, oh := strings.ToLower(u.Scheme), strings.ToLower(u.Host)
	if len(w.origins) == 0 {
		return oh == strings.ToLower(host) && scheme == w.scheme
	}
	for _, p := range w.origins {
		p = strings.ToLower(p)
		ps, ph, hasScheme := strings.Cut(p, "://")
		if !hasScheme {
			ps, ph = "", p
		}
		switch {
		case hasScheme && ps != scheme:
			continue
		case !hasScheme && scheme != "https" && !(scheme == "http" && w.scheme == "http"):
			continue
		}
		target := oh
		if !strings.Contains(ph, ":") {
			target = u.Hostname()
		}
		if ok, _ := path.Match(ph, strings.ToLower(target)); ok {
			return true
		}
	}
	return false
}
