package client_test

import (
	"context"
	"errors"
	"net"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/titan-broker/titan/client"
	"github.com/titan-broker/titan/internal/broker"
	"github.com/titan-broker/titan/internal/brokertest"
	"github.com/titan-broker/titan/internal/config"
)

// restartable is an in-process broker that can be stopped and started again on the same
// STOMP port (the memory store: nothing survives; test/e2e covers durability across a
// real process's restart).
type restartable struct {
	t    *testing.T
	cfg  config.Config
	b    *broker.Broker
	addr string
}

func newRestartable(t *testing.T) *restartable {
	r := &restartable{t: t, cfg: brokertest.DefaultTestConfig()}
	r.start()
	r.addr = r.b.Addrs()[0]
	_, port, _ := net.SplitHostPort(r.addr)
	r.cfg.Servers[0].Port, _ = strconv.Atoi(port)
	t.Cleanup(r.stop)
	return r
}

func (r *restartable) start() {
	b, err := broker.New(r.cfg, broker.Options{})
	if err != nil {
		r.t.Fatal(err)
	}
	if err := b.Start(); err != nil {
		r.t.Fatalf("start: %v", err)
	}
	r.b = b
}

func (r *restartable) stop() {
	if r.b == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := r.b.Shutdown(ctx); err != nil {
		r.t.Errorf("shutdown: %v", err)
	}
	r.b = nil
}

func TestReconnectResubscribesAndServesRequests(t *testing.T) {
	r := newRestartable(t)
	var lost, restored atomic.Int32
	restoredCh := make(chan struct{}, 4)
	c := dial(t, r.addr, client.WithReconnect(client.ReconnectPolicy{InitialBackoff: 20 * time.Millisecond, MaxBackoff: 200 * time.Millisecond}),
		client.WithConnectionListener(func(error) { lost.Add(1) }, func() { restored.Add(1); restoredCh <- struct{}{} }))
	col := newCollector(nil)
	if _, err := c.Subscribe("", "/topic/news", col.handle); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Subscribe("", "/query/echo", func(m *client.Message) {
		_ = c.Reply(context.Background(), m, m.Body)
	}); err != nil {
		t.Fatal(err)
	}
	ctx := ctxT(t)
	if _, err := c.Send(ctx, "", "/topic/news", []byte("before")); err != nil {
		t.Fatal(err)
	}
	col.waitN(t, 1, 5*time.Second)
	if resp, err := c.Request(ctx, "", "/query/echo", []byte("ping-1")); err != nil || string(resp.Body) != "ping-1" {
		t.Fatalf("request before the restart: %v", err)
	}

	r.stop()
	r.start()
	select {
	case <-restoredCh:
	case <-time.After(10 * time.Second):
		t.Fatal("no reconnect within 10s")
	}
	// The topic subscription, the responder and the reply temp-queue were all re-subscribed.
	if _, err := c.Send(ctx, "", "/topic/news", []byte("after")); err != nil {
		t.Fatal(err)
	}
	got := col.waitN(t, 2, 5*time.Second)
	if string(got[1].Body) != "after" {
		t.Fatalf("after the reconnect got %q", got[1].Body)
	}
	if resp, err := c.Request(ctx, "", "/query/echo", []byte("ping-2")); err != nil || string(resp.Body) != "ping-2" {
		t.Fatalf("request after the reconnect: %v", err)
	}
	if lost.Load() != 1 || restored.Load() != 1 {
		t.Fatalf("listener: lost %d, restored %d", lost.Load(), restored.Load())
	}
}

func TestSendWaitsForReconnectAndGivesUpWhenBounded(t *testing.T) {
	r := newRestartable(t)
	c := dial(t, r.addr, client.WithReconnect(client.ReconnectPolicy{MaxAttempts: 3, InitialBackoff: 20 * time.Millisecond, MaxBackoff: 40 * time.Millisecond}))
	r.stop()
	// Send while the broker is down: it waits for the connection, bounded by its ctx.
	short, cancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
	defer cancel()
	// (ErrConnectionLost when it raced with the broker's goodbye on the old connection.)
	if _, err := c.Send(short, "", "/queue/x", []byte("x")); !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, client.ErrClosed) && !errors.Is(err, client.ErrConnectionLost) {
		t.Fatalf("Send while reconnecting: %v", err)
	}
	// Three failed attempts end the client with the cause.
	select {
	case <-c.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("client still reconnecting after its attempts")
	}
	err := c.Err()
	if !errors.Is(err, client.ErrClosed) || !strings.Contains(err.Error(), "3 reconnect attempts failed") || !strings.Contains(err.Error(), r.addr) {
		t.Fatalf("Err = %v", err)
	}
	if _, err := c.Send(ctxT(t), "", "/queue/x", nil); !errors.Is(err, client.ErrClosed) {
		t.Fatalf("Send after giving up: %v", err)
	}
}
