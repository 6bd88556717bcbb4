package pipeline

import (
	"context"
	"testing"
	"time"

	"github.com/titan-broker/titan/internal/cluster"
	"github.com/titan-broker/titan/internal/cluster/clustertest"
	"github.com/titan-broker/titan/internal/cluster/logs"
	"github.com/titan-broker/titan/internal/cluster/queues"
	"github.com/titan-broker/titan/internal/dedup"
	"github.com/titan-broker/titan/internal/frame"
)

// Duplicate windows by need (issue 28): the streams keep broker-generated Nats-Msg-Ids
// only for BrokerIDWindow, while a client duplicate id (_AMQ_DUPL_ID) is recognised for the
// whole configured window, through any node, even once its stream has forgotten it; a
// message without one leaves no key behind.
func TestClientDuplicateIDsOutliveTheStreamWindow(t *testing.T) {
	nodes := clustertest.StartNodes(t)
	const window = 10 * time.Minute
	persister := func(i int) (*Persister, *queues.Pattern) {
		q := queues.New(nodes[i], nil, nil)
		q.DuplicateWindow = window
		c := NewCommitter(nodes[i], q, logs.New(nodes[i], nil), nil)
		c.DuplicateIDs = cluster.NewDuplicates(nodes[i], window)
		p, err := NewPersister(nodes[i], q, logs.New(nodes[i], nil), c, nil)
		if err != nil {
			t.Fatal(err)
		}
		return p, q
	}
	p0, q0 := persister(0)
	p1, q1 := persister(1)
	id := clustertest.QueueID("dupw", "orders")
	pl := q0.Place(id)
	if pl.Config.Duplicates != cluster.BrokerIDWindow {
		t.Fatalf("stream window %v, want %v", pl.Config.Duplicates, cluster.BrokerIDWindow)
	}
	persist := func(p *Persister, body string, dupl string) {
		t.Helper()
		var hdrs []frame.Header
		if dupl != "" {
			hdrs = append(hdrs, frame.Header{Key: dedup.Header, Value: dupl})
		}
		wait, err := p.PersistAsync(id, clustertest.MsgFor(id, body, hdrs...))
		if err == nil {
			err = wait()
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	persist(p0, "first", "order-1")
	persist(p0, "plain", "")

	// The stream forgets its ids (its window shortened to 100 ms, then passed).
	js := nodes[0].JetStream()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	st, err := js.Stream(ctx, pl.Stream)
	if err != nil {
		t.Fatal(err)
	}
	cfg := st.CachedInfo().Config
	cfg.Duplicates = 100 * time.Millisecond
	if _, err := js.UpdateStream(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second) // set-up: let the stream's 100 ms window pass

	persist(p1, "repeat", "order-1") // through another node
	persist(p1, "other", "order-2")
	if got := clustertest.BodiesOn(t, js, pl.Stream, pl.Subject); !clustertest.Equal(got, []string{"first", "plain", "other"}) {
		t.Fatalf("queue holds %q, want first, plain, other (the repeat recognised after the stream forgot it)", got)
	}
	if q1.Duplicates.Load() != 1 || q0.Duplicates.Load() != 0 {
		t.Fatalf("duplicates counted: node 1 %d, node 0 %d; want 1, 0", q1.Duplicates.Load(), q0.Duplicates.Load())
	}
	kv, err := js.KeyValue(ctx, cluster.DuplicatesBucket)
	if err != nil {
		t.Fatal(err)
	}
	keys, err := kv.ListKeys(ctx)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for range keys.Keys() {
		n++
	}
	if n != 2 {
		t.Fatalf("%d client duplicate ids kept, want 2 (order-1, order-2; none for a message without one)", n)
	}
	if status, err := kv.Status(ctx); err != nil || status.TTL() != window {
		t.Fatalf("bucket TTL %v (err %v), want %v", status.TTL(), err, window)
	}
}
