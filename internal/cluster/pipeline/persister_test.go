package pipeline

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/titan-broker/titan/internal/cluster"
	"github.com/titan-broker/titan/internal/cluster/clustertest"
	"github.com/titan-broker/titan/internal/cluster/logs"
	"github.com/titan-broker/titan/internal/cluster/queues"
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
// The stream is new, so the first SENDs race its interest reaching the producer's server
// (the Persister's "Interest" rules). Only a leader election after the stream's first (a
// loaded machine can miss raft heartbeats) may reorder, and then every reordering must be
// counted.
func TestPersisterPipelinesInOrder(t *testing.T) {
	nodes := clustertest.StartNodes(t)
	q := queues.New(nodes[0], nil, nil)
	e := logs.New(nodes[0], nil)
	p, err := NewPersister(nodes[0], q, e, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	id := dest.Identity{Group: "pipe", Pattern: dest.PatternQueues, Channel: "jobs"}
	elections, err := nodes[0].Conn().SubscribeSync("$JS.EVENT.ADVISORY.STREAM.LEADER_ELECTED." + q.Place(id).Stream)
	if err != nil {
		t.Fatal(err)
	}
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
	if err := nodes[0].Conn().Flush(); err != nil {
		t.Fatal(err)
	}
	elected, _, _ := elections.Pending()
	if err := elections.Unsubscribe(); err != nil { // else Close's drain waits for it
		t.Fatal(err)
	}
	t.Logf("leader elections %d, retried %d, reordered %d", elected, p.Retried.Load(), p.Reordered.Load())
	if elected > 1 {
		checkStoredOnce(t, streamBodies(t, nodes[1], q.Place(id)), n, p)
		return
	}
	checkStreamOrder(t, nodes[1], q.Place(id), n)
	if p.Reordered.Load() != 0 {
		t.Fatalf("%d publishes counted as reordered, but the stream is in SEND order", p.Reordered.Load())
	}
}

// checkStoredOnce checks that bodies hold messages 0..want-1 each once, in order unless p
// counted a reordering.
func checkStoredOnce(t *testing.T, bodies []string, want int, p *Persister) {
	t.Helper()
	seen := make(map[string]bool, want)
	inOrder := true
	for i, b := range bodies {
		if seen[b] {
			t.Fatalf("message %s stored twice", b)
		}
		seen[b] = true
		if b != fmt.Sprint(i) {
			inOrder = false
		}
	}
	if len(seen) != want {
		t.Fatalf("stream holds %d distinct messages, want %d", len(seen), want)
	}
	if !inOrder && p.Reordered.Load() == 0 {
		t.Fatal("stream order differs from SEND order, and no reordering was counted")
	}
}

// streamBodies returns the bodies pl's subject holds, in stream order.
func streamBodies(t *testing.T, n *cluster.Node, pl cluster.Placement) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var st jetstream.Stream
	var info *jetstream.StreamInfo
	var err error
	for {
		if st, err = n.JetStream().Stream(ctx, pl.Stream); err == nil {
			if info, err = st.Info(ctx); err == nil {
				break
			}
		}
		if ctx.Err() != nil {
			t.Fatal(err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	var bodies []string
	for seq := info.State.FirstSeq; seq <= info.State.LastSeq; seq++ {
		raw, err := st.GetMsg(ctx, seq)
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		if raw.Subject != pl.Subject {
			continue
		}
		m, err := message.Decode(raw.Data)
		if err != nil {
			t.Fatal(err)
		}
		bodies = append(bodies, string(m.Body))
	}
	return bodies
}

// checkStreamOrder checks that pl's subject holds messages 0..want-1 in order, each once.
func checkStreamOrder(t *testing.T, n *cluster.Node, pl cluster.Placement, want int) {
	t.Helper()
	bodies := streamBodies(t, n, pl)
	for i, b := range bodies {
		if b != fmt.Sprint(i) {
			t.Fatalf("stream position %d holds message %s", i, b)
		}
	}
	if len(bodies) != want {
		t.Fatalf("stream holds %d messages, want %d", len(bodies), want)
	}
}

// A stream leader shut down under pipelined SENDs (its node closes: leadership is handed
// over at once): every SEND is answered without error and stored exactly once, and the
// stream holds them in SEND order unless the persister detected and counted a reordering
// (the residual case of the FIFO rule: a new leader within the stall fence).
func TestPersisterLeaderLossStoresOnce(t *testing.T) {
	nodes := clustertest.StartNodes(t)
	id := dest.Identity{Group: "pipe", Pattern: dest.PatternQueues, Channel: "jobs"}
	pl, leader, producer := leaderAndProducer(t, nodes, id)
	q := queues.New(nodes[producer], nil, nil)
	p, err := NewPersister(nodes[producer], q, logs.New(nodes[producer], nil), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	const n = 3000
	sendWithFault(t, p, id, n, nodes[leader].Close) // the stream's leader goes with publishes in flight
	t.Logf("retried %d, reordered %d, duplicates answered %d", p.Retried.Load(), p.Reordered.Load(), q.Duplicates.Load())
	checkStoredOnce(t, streamBodies(t, nodes[producer], pl), n, p)
}

// sendWithFault pipelines n SENDs to id through p on one connection, calls fault just
// before SEND n/3, and fails t unless every SEND is stored.
func sendWithFault(t *testing.T, p *Persister, id dest.Identity, n int, fault func()) {
	t.Helper()
	c := newConnection(256)
	for i := range n {
		if i == n/3 {
			fault()
		}
		w, err := p.PersistAsync(id, testMessage(i))
		if err != nil {
			t.Fatal(err)
		}
		c.waits <- w
	}
	for i, err := range c.close() {
		if err != nil {
			t.Fatalf("send %d: %v", i, err)
		}
	}
}

// leaderAndProducer makes id's queue stream and returns its placement, the index of the
// node that leads it and of another node.
func leaderAndProducer(t *testing.T, nodes []*cluster.Node, id dest.Identity) (pl cluster.Placement, leader, producer int) {
	t.Helper()
	q0 := queues.New(nodes[0], nil, nil)
	pl = q0.Place(id)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := q0.Streams().Ensure(ctx, pl.Config); err != nil {
		t.Fatal(err)
	}
	st, err := nodes[0].JetStream().Stream(ctx, pl.Stream)
	if err != nil {
		t.Fatal(err)
	}
	info, err := st.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	leader, producer = -1, -1
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
	return pl, leader, producer
}

// BenchmarkConnectionSends measures one connection's durable queue SENDs to a three-node,
// R3, sync-always cluster in this process: sync publishes one at a time (Queues.Publish,
// the behaviour before pipelining) against pipelined ones (Persister.PersistAsync with the
// waits in SEND order on a second goroutine, as the router's pipeline does). Compare with
// benchstat -col /mode.
func BenchmarkConnectionSends(b *testing.B) {
	nodes := clustertest.StartNodes(b)
	q := queues.New(nodes[1], nil, nil)
	p, err := NewPersister(nodes[1], q, logs.New(nodes[1], nil), nil, nil)
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
