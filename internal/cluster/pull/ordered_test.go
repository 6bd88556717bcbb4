package pull

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/titan-broker/titan/internal/cluster"
	"github.com/titan-broker/titan/internal/cluster/clustertest"
)

// startJetStream runs one embedded JetStream server and returns a JetStream client of it.
func startJetStream(t *testing.T) jetstream.JetStream {
	t.Helper()
	s, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: -1, JetStream: true, StoreDir: t.TempDir(), NoLog: true, NoSigs: true})
	if err != nil {
		t.Fatal(err)
	}
	go s.Start()
	if !s.ReadyForConnections(10 * time.Second) {
		t.Fatal("nats-server not ready")
	}
	t.Cleanup(s.Shutdown)
	nc, err := nats.Connect(s.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return js
}

// collector takes messages while open and records their bodies.
type collector struct {
	mu   sync.Mutex
	open bool
	got  []string
	cons map[string]bool // the consumers that delivered
	want int
	done chan struct{}
}

func (c *collector) Credit() int { return MaxBatch }
func (c *collector) Deliver(jm jetstream.Msg) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.open {
		return false
	}
	c.got = append(c.got, string(jm.Data()))
	if meta, err := jm.Metadata(); err == nil {
		c.cons[meta.Consumer] = true
	}
	if len(c.got) == c.want {
		close(c.done)
	}
	return true
}
func (c *collector) Done() bool                                   { return false }
func (c *collector) InFlight(dst []jetstream.Msg) []jetstream.Msg { return dst }

// An ordered loop reads a stream through one ordered consumer, in stream order, exactly
// once, across a handler that refuses for a while (it then waits for a Kick), and reads
// messages appended after it started; the server holds one consumer throughout (nats.go's
// ordered Fetch would re-create it per pull), and Stop ends a loop waiting for messages.
func TestOrderedLoopReadsInOrderThroughOneConsumer(t *testing.T) {
	js := startJetStream(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	st, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "LOG", Subjects: []string{"log.>"}})
	if err != nil {
		t.Fatal(err)
	}
	const n = 1000
	publish := func(from, to int) {
		for i := from; i < to; i++ {
			if _, err := js.Publish(ctx, "log.a", []byte(strconv.Itoa(i))); err != nil {
				t.Fatal(err)
			}
		}
	}
	publish(0, n/2)
	cons, err := js.OrderedConsumer(ctx, "LOG", jetstream.OrderedConsumerConfig{FilterSubjects: []string{"log.a"}})
	if err != nil {
		t.Fatal(err)
	}
	h := &collector{want: n, done: make(chan struct{}), cons: map[string]bool{}}
	l := NewOrdered(cons, h)
	go l.Run()
	time.Sleep(100 * time.Millisecond) // the head is refused: the loop waits for a Kick
	h.mu.Lock()
	h.open = true
	h.mu.Unlock()
	l.Kick()
	publish(n/2, n)
	select {
	case <-h.done:
	case <-ctx.Done():
		t.Fatalf("got %d of %d messages", len(h.got), n)
	}
	info, err := st.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.State.Consumers != 1 {
		t.Errorf("stream has %d consumers while the loop reads, want 1", info.State.Consumers)
	}
	h.mu.Lock()
	if len(h.cons) != 1 {
		t.Errorf("%d messages came from %d server-side consumers, want 1 (one per pull is nats.go's ordered Fetch)", n, len(h.cons))
	}
	h.mu.Unlock()
	l.Stop() // waiting in Next for a message that never comes
	h.mu.Lock()
	defer h.mu.Unlock()
	for i, b := range h.got {
		if b != strconv.Itoa(i) {
			t.Fatalf("message %d is %q, want %d (got %v...)", i, b, i, h.got[:min(len(h.got), i+3)])
		}
	}
	if len(h.got) != n {
		t.Errorf("got %d messages, want %d", len(h.got), n)
	}
}

// An ordered consumer lives on its stream's leader only (R1, memory): when that node dies,
// the consumer goes with it and no status reaches the reader. The loop notices by its
// missed heartbeats, re-creates it on the new leader and goes on in order, exactly once
// (the time from the second half's publish to its last delivery is logged: 0.4 s with the
// loop's 500 ms heartbeat, 9.4 s with nats.go's defaults, in one run each).
func TestOrderedLoopFollowsALeaderCrash(t *testing.T) {
	nodes := clustertest.StartNodes(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	st, err := nodes[0].JetStream().CreateStream(ctx, jetstream.StreamConfig{Name: "LOG", Subjects: []string{"log.>"}, Replicas: 3})
	if err != nil {
		t.Fatal(err)
	}
	leader := st.CachedInfo().Cluster.Leader
	var reader *cluster.Node // a node that survives
	for _, n := range nodes {
		if n.Name() != leader {
			reader = n
		}
	}
	js := reader.JetStream()
	publish := func(from, to int) {
		for i := from; i < to; i++ {
			if _, err := js.Publish(ctx, "log.a", []byte(strconv.Itoa(i))); err != nil {
				t.Fatal(err)
			}
		}
	}
	cons, err := js.OrderedConsumer(ctx, "LOG", jetstream.OrderedConsumerConfig{FilterSubjects: []string{"log.a"}})
	if err != nil {
		t.Fatal(err)
	}
	const n = 200
	h := &collector{open: true, want: n, done: make(chan struct{}), cons: map[string]bool{}}
	l := NewOrdered(cons, h)
	go l.Run()
	defer l.Stop()
	publish(0, n/2)
	waitFor(t, func() bool { h.mu.Lock(); defer h.mu.Unlock(); return len(h.got) == n/2 }, 10*time.Second, "the first half")
	for _, x := range nodes {
		if x.Name() == leader {
			x.Close() // the stream leader and the ordered consumer on it are gone
		}
	}
	waitFor(t, func() bool {
		ictx, icancel := context.WithTimeout(ctx, 500*time.Millisecond)
		defer icancel()
		s, err := js.Stream(ictx, "LOG")
		return err == nil && s.CachedInfo().Cluster.Leader != "" && s.CachedInfo().Cluster.Leader != leader
	}, 30*time.Second, "a new stream leader")
	start := time.Now()
	publish(n/2, n)
	select {
	case <-h.done:
		t.Logf("the second half delivered %v after its first publish", time.Since(start).Round(time.Millisecond))
	case <-time.After(10 * time.Second):
		h.mu.Lock()
		defer h.mu.Unlock()
		t.Fatalf("%d of %d records within 10 s of the new leader", len(h.got), n)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	for i, b := range h.got {
		if b != strconv.Itoa(i) {
			t.Fatalf("record %d is %q, want %d", i, b, i)
		}
	}
}

// waitFor polls cond every 20 ms until it holds or d passed (then t fails naming what).
func waitFor(t *testing.T, cond func() bool, d time.Duration, what string) {
	t.Helper()
	for end := time.Now().Add(d); !cond(); {
		if time.Now().After(end) {
			t.Fatalf("no %s within %v", what, d)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
