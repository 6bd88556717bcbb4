package client_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/titan-broker/titan/client"
	"github.com/titan-broker/titan/internal/brokertest"
	"github.com/titan-broker/titan/internal/config"
)

// These tests run the client against a real broker: brokertest starts one in process, on a
// loopback TCP port, with the memory store. The restart tests, which kill and restart a
// titan process, live in test/e2e (client_test.go there).

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func startBroker(t *testing.T, mutate func(*config.Config)) string {
	t.Helper()
	c := brokertest.DefaultTestConfig()
	if mutate != nil {
		mutate(&c)
	}
	b := brokertest.Run(t, c)
	return b.Addrs()[0]
}

func dial(t *testing.T, addr string, opts ...client.Option) *client.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := client.Dial(ctx, addr, opts...)
	if err != nil {
		t.Fatalf("Dial %s: %v", addr, err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// collector is a Handler that keeps every message and lets a test wait for a count.
type collector struct {
	mu   sync.Mutex
	msgs []*client.Message
	kick chan struct{}
	fn   func(*client.Message)
}

func newCollector(fn func(*client.Message)) *collector {
	return &collector{kick: make(chan struct{}, 1), fn: fn}
}

func (c *collector) handle(m *client.Message) {
	if c.fn != nil {
		c.fn(m)
	}
	c.mu.Lock()
	c.msgs = append(c.msgs, m)
	c.mu.Unlock()
	select {
	case c.kick <- struct{}{}:
	default:
	}
}

func (c *collector) waitN(t *testing.T, n int, within time.Duration) []*client.Message {
	t.Helper()
	deadline := time.NewTimer(within)
	defer deadline.Stop()
	for {
		c.mu.Lock()
		if len(c.msgs) >= n {
			out := append([]*client.Message(nil), c.msgs...)
			c.mu.Unlock()
			return out
		}
		got := len(c.msgs)
		c.mu.Unlock()
		select {
		case <-c.kick:
		case <-deadline.C:
			t.Fatalf("%d of %d messages within %v", got, n, within)
		}
	}
}

func bodies(ms []*client.Message) []string {
	out := make([]string, len(ms))
	for i, m := range ms {
		out[i] = string(m.Body)
	}
	return out
}

func TestSendSubscribeGroupsAndHeaders(t *testing.T) {
	addr := startBroker(t, nil)
	c := dial(t, addr)
	def, market := newCollector(nil), newCollector(nil)
	if _, err := c.Subscribe("", "/queue/orders", def.handle); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Subscribe("market", "/queue/orders", market.handle); err != nil {
		t.Fatal(err)
	}
	ctx := ctxT(t)
	for i, b := range []string{"a", "b", "c"} {
		group := []string{"default", "market", ""}[i]
		if _, err := c.Send(ctx, group, "/queue/orders", []byte(b), client.WithContentType("text/plain"), client.WithHeader("x-n", b)); err != nil {
			t.Fatalf("Send %s: %v", b, err)
		}
	}
	got := def.waitN(t, 2, 5*time.Second)
	if strings.Join(bodies(got), ",") != "a,c" {
		t.Fatalf("default group got %q, want a,c", bodies(got))
	}
	m := market.waitN(t, 1, 5*time.Second)[0]
	if string(m.Body) != "b" || m.Group != "market" || m.Header("x-n") != "b" || m.Header("content-type") != "text/plain" || m.Destination != "/queue/orders" {
		t.Fatalf("market message: %+v", m)
	}
	if got[0].Group != "default" || got[0].Subscription() == nil || got[0].Subscription().Group() != "default" {
		t.Fatalf("default message group %q", got[0].Group)
	}
}

func TestAckModes(t *testing.T) {
	addr := startBroker(t, nil)
	c := dial(t, addr)
	ctx := ctxT(t)
	// client-individual: a NACKed message comes back redelivered; ACKed ones do not.
	var once sync.Once
	col := newCollector(func(m *client.Message) {
		if string(m.Body) == "nack-me" {
			nacked := false
			once.Do(func() { nacked = true; _ = m.Nack() })
			if nacked {
				return
			}
		}
		if err := m.Ack(); err != nil {
			t.Errorf("Ack: %v", err)
		}
	})
	sub, err := c.Subscribe("", "/queue/ack-ind", col.handle, client.WithAck(client.AckClientIndividual))
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range []string{"one", "nack-me"} {
		if _, err := c.Send(ctx, "", "/queue/ack-ind", []byte(b)); err != nil {
			t.Fatal(err)
		}
	}
	got := col.waitN(t, 3, 5*time.Second)
	if got[2].Header("redelivered") != "true" || string(got[2].Body) != "nack-me" {
		t.Fatalf("third delivery %q redelivered=%q, want nack-me redelivered", got[2].Body, got[2].Header("redelivered"))
	}
	if err := sub.Unsubscribe(); err != nil {
		t.Fatal(err)
	}
	if err := sub.Unsubscribe(); !errors.Is(err, client.ErrUnsubscribed) {
		t.Fatalf("second Unsubscribe: %v", err)
	}

	// client (cumulative): acking the last of three acknowledges all; a new connection
	// subscribing afterwards gets nothing, while unacked messages would be redelivered.
	c2 := dial(t, addr)
	col2 := newCollector(nil)
	if _, err := c2.Subscribe("", "/queue/ack-cum", col2.handle, client.WithAck(client.AckClient)); err != nil {
		t.Fatal(err)
	}
	for _, b := range []string{"1", "2", "3", "4"} {
		if _, err := c.Send(ctx, "", "/queue/ack-cum", []byte(b)); err != nil {
			t.Fatal(err)
		}
	}
	ms := col2.waitN(t, 4, 5*time.Second)
	if err := ms[2].Ack(); err != nil { // acknowledges 1, 2, 3
		t.Fatal(err)
	}
	_ = c2.Close()
	if err := ms[3].Ack(); !errors.Is(err, client.ErrStaleMessage) {
		t.Fatalf("Ack after Close: %v, want ErrStaleMessage", err)
	}
	col3 := newCollector(nil)
	c3 := dial(t, addr)
	if _, err := c3.Subscribe("", "/queue/ack-cum", col3.handle, client.WithAck(client.AckClientIndividual)); err != nil {
		t.Fatal(err)
	}
	redelivered := col3.waitN(t, 1, 5*time.Second)
	if string(redelivered[0].Body) != "4" {
		t.Fatalf("after a cumulative ack of 3, redelivered %q, want 4", redelivered[0].Body)
	}
}

func TestRequestReply(t *testing.T) {
	addr := startBroker(t, nil)
	responder := dial(t, addr)
	requester := dial(t, addr)
	ctx := ctxT(t)
	if _, err := responder.Subscribe("", "/query/prices", func(m *client.Message) {
		if err := responder.Reply(ctx, m, append([]byte("price of "), m.Body...)); err != nil {
			t.Errorf("Reply: %v", err)
		}
	}); err != nil {
		t.Fatal(err)
	}
	for _, item := range []string{"gold", "tea"} {
		resp, err := requester.Request(ctx, "", "/query/prices", []byte(item))
		if err != nil {
			t.Fatalf("Request %s: %v", item, err)
		}
		if string(resp.Body) != "price of "+item || resp.Header("correlation-id") == "" {
			t.Fatalf("response %q corr %q", resp.Body, resp.Header("correlation-id"))
		}
	}
	// A responder in a non-default group answers requests of that group only; Reply echoes
	// the group, as Titan requires.
	if _, err := responder.Subscribe("market", "/command/quote", func(m *client.Message) {
		if err := responder.Reply(ctx, m, []byte("market:"+string(m.Body))); err != nil {
			t.Errorf("Reply: %v", err)
		}
	}); err != nil {
		t.Fatal(err)
	}
	resp, err := requester.Request(ctx, "market", "/command/quote", []byte("q1"))
	if err != nil || string(resp.Body) != "market:q1" {
		t.Fatalf("grouped request: %v", err)
	}
	// Nobody serves /command/void: the broker answers executed:false.
	_, err = requester.Request(ctx, "", "/command/void", []byte("x"))
	var re *client.RequestError
	if !errors.As(err, &re) || re.Reason == "" {
		t.Fatalf("request without responder: %v, want a RequestError", err)
	}
	// A responder that never answers: ctx's deadline travels as the timeout header.
	if _, err := responder.Subscribe("", "/command/silent", func(*client.Message) {}); err != nil {
		t.Fatal(err)
	}
	short, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	_, err = requester.Request(short, "", "/command/silent", []byte("x"))
	if !errors.As(err, &re) && !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("request to a silent responder: %v", err)
	}
}

func TestServerErrors(t *testing.T) {
	addr := startBroker(t, func(c *config.Config) { c.Servers[0].ProtocolOptions.MaxBodyLength = 1024 })
	ctx := ctxT(t)
	c := dial(t, addr)
	_, err := c.Send(ctx, "", "/queue//bad", []byte("x"))
	var se *client.ServerError
	if !errors.As(err, &se) || se.Message != "invalid destination" {
		t.Fatalf("invalid destination: %v", err)
	}
	// The connection is gone after an ERROR and there is no reconnect policy.
	select {
	case <-c.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("client still running after the broker's ERROR")
	}
	if _, err := c.Send(ctx, "", "/queue/x", nil); !errors.Is(err, client.ErrClosed) {
		t.Fatalf("Send after loss: %v, want ErrClosed", err)
	}

	big := dial(t, addr)
	_, err = big.Send(ctx, "", "/queue/big", make([]byte, 64<<10))
	if !errors.As(err, &se) || !strings.Contains(err.Error(), "too large") {
		t.Fatalf("body over the limit: %v, want an ERROR saying it is too large", err)
	}
	if _, err := c.Subscribe("", "/queue/x", func(*client.Message) {}, client.WithAck("sometimes")); err == nil {
		t.Fatal("bad ack mode accepted")
	}
}

func TestDialErrorsNameAddressAndCause(t *testing.T) {
	ctx := ctxT(t)
	_, err := client.Dial(ctx, "127.0.0.1:1")
	var ce *client.ConnectError
	if !errors.As(err, &ce) || ce.Addr != "127.0.0.1:1" || ce.Step != "dial" {
		t.Fatalf("refused: %v", err)
	}
	for _, want := range []string{"127.0.0.1:1", "connection refused", "is the broker running"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("refused error %q lacks %q", err, want)
		}
	}
	if _, err := client.Dial(ctx, "no-port"); !errors.As(err, &ce) {
		t.Fatalf("address without port: %v", err)
	}
}

func TestHeartBeatsKeepAnIdleConnection(t *testing.T) {
	// The test broker asks for heart-beats every second and closes a silent connection
	// after 2 s; a client that sends them survives 3 s of idleness.
	addr := startBroker(t, nil)
	c := dial(t, addr, client.WithHeartBeat(500*time.Millisecond, 500*time.Millisecond))
	timer := time.NewTimer(3 * time.Second)
	defer timer.Stop()
	select {
	case <-c.Done():
		t.Fatalf("connection ended while idle: %v", c.Err())
	case <-timer.C:
	}
	if _, err := c.Send(ctxT(t), "", "/queue/hb", []byte("alive")); err != nil {
		t.Fatal(err)
	}
}

// Unsubscribe returns once the broker has removed the subscription (it waits for the
// RECEIPT of its UNSUBSCRIBE, as Subscribe does), so a check made right after it, with no
// retry, already sees the queue without a consumer.
func TestUnsubscribeWaitsForTheBroker(t *testing.T) {
	b := brokertest.Run(t, brokertest.DefaultTestConfig())
	c := dial(t, b.Addrs()[0])
	consumers := func() int {
		for _, q := range b.Dispatcher().Queues() {
			if st := q.Stats(); st.Destination == "/queue/unsub" {
				return st.Consumers
			}
		}
		return -1
	}
	if _, err := c.Send(ctxT(t), "", "/queue/unsub", []byte("makes the queue")); err != nil {
		t.Fatal(err)
	}
	for i := range 20 {
		sub, err := c.Subscribe("", "/queue/unsub", func(*client.Message) {}, client.WithAck(client.AckClientIndividual))
		if err != nil {
			t.Fatal(err)
		}
		if n := consumers(); n != 1 {
			t.Fatalf("round %d: %d consumers after Subscribe, want 1", i, n)
		}
		if err := sub.Unsubscribe(); err != nil {
			t.Fatal(err)
		}
		if n := consumers(); n != 0 {
			t.Fatalf("round %d: %d consumers right after Unsubscribe returned, want 0", i, n)
		}
	}
}
