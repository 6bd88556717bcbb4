package transport

import (
	"context"
	"crypto/tls"
	"errors"
	"log/slog"
	"net"
	"time"
)

// DefaultKeepAlive is the TCP keepalive period of accepted connections when none is set:
// the idle time before the first probe and the interval between probes (Go's own default).
const DefaultKeepAlive = 15 * time.Second

// KeepAliveProbes is how many unanswered keepalive probes make the kernel drop a connection:
// a dead peer is found after about keepAlive × (1 + KeepAliveProbes) of silence (75 s with
// the default period). Heart-beats, when a client negotiates them, find it sooner.
const KeepAliveProbes = 4

// ListenTCP listens on addr ("host:port"), with TLS when tlsConf is non-nil. Every accepted
// connection has TCP keepalive on with keepAlive as its idle time and probe interval (0:
// DefaultKeepAlive; negative: keepalive off), so that a peer that vanished without a FIN is
// found although the connection negotiated no heart-beats and the broker never closes it
// for silence (RabbitMQ and ActiveMQ 5 rely on keepalive the same way; issue 30).
func ListenTCP(addr string, tlsConf *tls.Config, keepAlive time.Duration) (net.Listener, error) {
	lc := net.ListenConfig{KeepAlive: -1}
	if keepAlive == 0 {
		keepAlive = DefaultKeepAlive
	}
	if keepAlive > 0 {
		lc.KeepAliveConfig = net.KeepAliveConfig{Enable: true, Idle: keepAlive, Interval: keepAlive, Count: KeepAliveProbes}
	}
	l, err := lc.Listen(context.Background(), "tcp", addr)
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
