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
