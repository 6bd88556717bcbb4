package cluster

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/titan-broker/titan/internal/dest"
	"github.com/titan-broker/titan/internal/message"
)

// connection mimics a router connection: SENDs go through PersistAsync on one goroutine,
// their wait funcs are called in SEND order on another (the router's pipeline), and each
// outcome is recorded in SEND order.
type connection struct {
	waits chan func() error
	done  chan struct{}
	mu    sync.Mutex
	errs  []error
}

func newConnection(depth int) *connection {
	c := &connection{waits: make(chan func() error, depth), done: make(chan struct{})}
	go func() {
		defer close(c.done)
		for w := range c.waits {
			err := w()
			c.mu.Lock()
			c.errs = append(c.errs, err)
			c.mu.Unlock()
		}
	}()
	return c
}

func (c *connection) close() []error {
	close(c.waits)
	<-c.done
	return c.errs
}

func testMessage(i int) *message.Message {
	return &message.Message{ID: fmt.Sprintf("p-%d", i), Group: "pipe", Destination: "/queue/jobs",
		Body: []byte(fmt.Sprint(i)), Persistent: true}
}

// Pipelined SENDs of one connection are each stored once, in SEND order, and every wait
// returns only once its message is stored; the adapter's Publish then stores nothing more.
func TestPersisterPipelinesInOrder(t *testing.T) {
	nodes := startNodes(t)
	q := NewQueues(nodes[0], nil, nil)
	e := NewEventsStore(nodes[0], nil)
	p, err := NewPersister(nodes[0], q, e, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	id := dest.Identity{Group: "pipe", Pattern: dest.PatternQueues, Channel: "jobs"}
	c := newConnection(256)
	const n = 500
	for i := range n {
		m := testMessage(i)
		w, err := p.PersistAsync(id, m)
		if err != nil {
			t.Fatal(err)
		}
		if m.Sequence == 0 {
			t.Fatal("m.Sequence not set")
		}
		if _, err := q.Publish(id, m, nil); err != nil { // the router's publish stage
			t.Fatal(err)
		}
		c.waits <- w
	}
	for i, err := range c.close() {
		if err != nil {
			t.Fatalf("send %d: %v", i, err)
		}
	}
	if got := q.Published.Load(); got != n {
		t.Fatalf("published %d, want %d", got, n)
	}
	checkStreamOrder(t, nodes[1], q.place(id), n)
	if p.Reordered.Load() != 0 || p.Retried.Load() != 0 {
		t.Fatalf("reordered %d retried %d", p.Reordered.Load(), p.Retried.Load())
	}
}

// checkStreamOrder reads pl's subject from the start and checks it holds messages 0..n-1
// in order, each once.
func checkStreamOrder(t *testing.T, n *Node, pl placement, want int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cons, err := n.js.OrderedConsumer(ctx, pl.stream, jetstream.OrderedConsumerConfig{FilterSubjects: []string{pl.subject}})
	if err != nil {
		t.Fatal(err)
	}
	next := 0
	for next < want {
		batch, err := cons.Fetch(want-next, jetstream.FetchMaxWait(5*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		got := 0
		for jm := range batch.Messages() {
			m, err := message.Decode(jm.Data())
			if err != nil {
				t.Fatal(err)
			}
			if string(m.Body) != fmt.Sprint(next) {
				t.Fatalf("stream position %d holds message %s", next, m.Body)
			}
			next++
			got++
		}
		if got == 0 {
			t.Fatalf("stream holds %d messages, want %d", next, want)
		}
	}
}

// A stream leader killed under pipelined SENDs: every SEND that got no error is stored
// once, and the stream holds them in SEND order (the stall fence and ordered retries).
func TestPersisterLeaderLossKeepsOrder(t *testing.T) {
	nodes := startNodes(t)
	id := dest.Identity{Group: "pipe", Pattern: dest.PatternQueues, Channel: "jobs"}
	q0 := NewQueues(nodes[0], nil, nil)
	pl := q0.place(id)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := q0.ensureStream(ctx, pl); err != nil {
		t.Fatal(err)
	}
	st, err := nodes[0].js.Stream(ctx, pl.stream)
	if err != nil {
		t.Fatal(err)
	}
	info, err := st.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	leader, producer := -1, -1
	for i, n := range nodes {
		if n.Name() == info.Cluster.Leader {
			leader = i
		} else if producer < 0 {
			producer = i
		}
	}
	if leader < 0 {
		t.Fatalf("leader %q not found", info.Cluster.Leader)
	}
	q := NewQueues(nodes[producer], nil, nil)
	p, err := NewPersister(nodes[producer], q, NewEventsStore(nodes[producer], nil), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	c := newConnection(256)
	const n = 3000
	for i := range n {
		if i == n/3 {
			nodes[leader].Close() // the stream's leader dies with publishes in flight
		}
		w, err := p.PersistAsync(id, testMessage(i))
		if err != nil {
			t.Fatal(err)
		}
		c.waits <- w
	}
	errs := c.close()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("send %d: %v", i, err)
		}
	}
	checkStreamOrder(t, nodes[producer], pl, n)
	t.Logf("retried %d, reordered %d, duplicates %d", p.Retried.Load(), p.Reordered.Load(), q.Duplicates.Load())
	if p.Reordered.Load() != 0 {
		t.Fatalf("reordered %d", p.Reordered.Load())
	}
}

// BenchmarkConnectionSends measures one connection's durable queue SENDs to a three-node,
// R3, sync-always cluster in this process: sync publishes one at a time (Queues.Publish,
// the behaviour before pipelining) against pipelined ones (Persister.PersistAsync with the
// waits in SEND order on a second goroutine, as the router's pipeline does). Compare with
// benchstat -col /mode.
func BenchmarkConnectionSends(b *testing.B) {
	nodes := startNodesB(b)
	q := NewQueues(nodes[1], nil, nil)
	p, err := NewPersister(nodes[1], q, NewEventsStore(nodes[1], nil), nil, nil)
	if err != nil {
		b.Fatal(err)
	}
	body := make([]byte, 100)
	for _, mode := range []string{"sync", "pipelined"} {
		b.Run("mode="+mode, func(b *testing.B) {
			id := dest.Identity{Group: "bench", Pattern: dest.PatternQueues, Channel: "jobs-" + mode}
			c := newConnection(256)
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				i++
				m := &message.Message{ID: fmt.Sprintf("b-%s-%d", mode, i), Group: "bench", Destination: "/queue/jobs", Body: body, Persistent: true}
				if mode == "sync" {
					if _, err := q.Publish(id, m, nil); err != nil {
						b.Fatal(err)
					}
					continue
				}
				w, err := p.PersistAsync(id, m)
				if err != nil {
					b.Fatal(err)
				}
				c.waits <- w
			}
			for _, err := range c.close() {
				if err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
