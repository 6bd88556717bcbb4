package transport

import (
	"context"
	"crypto/tls"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/coder/websocket"
)

// Subprotocols are the STOMP WebSocket subprotocols offered (STOMP over WebSocket
// convention, as RabbitMQ Web-STOMP and ActiveMQ Artemis use).
var Subprotocols = []string{"v12.stomp", "v11.stomp", "v10.stomp", "stomp"}

// WSListener accepts STOMP-over-WebSocket connections on one HTTP path and yields each as a
// net.Conn carrying the STOMP byte stream (frames may span WebSocket messages). Outgoing data
// is sent as binary messages so bodies stay byte-exact. Safe for concurrent use.
type WSListener struct {
	ln    net.Listener
	srv   *http.Server
	conns chan net.Conn
	done  chan struct{}
	once  sync.Once
}

// ListenWebSocket listens on addr and upgrades requests for path.
func ListenWebSocket(addr, path string, tlsConf *tls.Config, log *slog.Logger) (*WSListener, error) {
	ln, err := ListenTCP(addr, tlsConf)
	if err != nil {
		return nil, err
	}
	w := &WSListener{ln: ln, conns: make(chan net.Conn), done: make(chan struct{})}
	mux := http.NewServeMux()
	mux.HandleFunc(path, w.upgrade)
	w.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelDebug)}
	go func() { _ = w.srv.Serve(ln) }()
	return w, nil
}

func (w *WSListener) upgrade(rw http.ResponseWriter, r *http.Request) {
	c, err := websocket.Accept(rw, r, &websocket.AcceptOptions{Subprotocols: Subprotocols, InsecureSkipVerify: true})
	if err != nil {
		return
	}
	c.SetReadLimit(-1) // the STOMP parser enforces frame limits
	ctx, cancel := context.WithCancel(context.Background())
	nc := &wsConn{Conn: websocket.NetConn(ctx, c, websocket.MessageBinary), cancel: cancel}
	select {
	case w.conns <- nc:
		<-ctx.Done() // keep the handler (and its hijacked connection) alive until closed
	case <-w.done:
		cancel()
		_ = c.Close(websocket.StatusGoingAway, "server shutting down")
	}
}

type wsConn struct {
	net.Conn
	cancel context.CancelFunc
}

func (c *wsConn) Close() error {
	err := c.Conn.Close()
	c.cancel()
	return err
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
