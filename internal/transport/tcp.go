package transport

import (
	"crypto/tls"
	"errors"
	"log/slog"
	"net"
	"time"
)

// ListenTCP listens on addr ("host:port"), with TLS when tlsConf is non-nil.
func ListenTCP(addr string, tlsConf *tls.Config) (net.Listener, error) {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	if tlsConf != nil {
		return tls.NewListener(l, tlsConf), nil
	}
	return l, nil
}

// Serve accepts connections from l and calls handle for each on a new goroutine started by
// spawn (which returns false once the owner is shutting down, closing the connection).
// Temporary accept errors back off from 5 ms doubling to 1 s, as net/http does. Serve returns
// nil once l is closed, or the first permanent error.
func Serve(l net.Listener, spawn func(name string, fn func()) bool, handle func(net.Conn), log *slog.Logger) error {
	var delay time.Duration
	for {
		c, err := l.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return nil
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() || isTemporary(err) {
				if delay == 0 {
					delay = 5 * time.Millisecond
				} else {
					delay = min(2*delay, time.Second)
				}
				log.Warn("accept failed; retrying", "err", err, "delay", delay)
				time.Sleep(delay)
				continue
			}
			return err
		}
		delay = 0
		if tc, ok := c.(*net.TCPConn); ok {
			_ = tc.SetNoDelay(true)
		}
		if !spawn("session", func() { handle(c) }) {
			_ = c.Close()
		}
	}
}

func isTemporary(err error) bool {
	var t interface{ Temporary() bool }
	return errors.As(err, &t) && t.Temporary()
}
