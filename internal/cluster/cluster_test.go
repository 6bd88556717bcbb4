package cluster

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/titan-broker/titan/internal/config"
	"github.com/titan-broker/titan/internal/dest"
	"github.com/titan-broker/titan/internal/message"
	"github.com/titan-broker/titan/internal/testport"
)

// startNodes starts three embedded, clustered nodes in this process.
func startNodes(t *testing.T) []*Node { return startNodesB(t) }

// startNodesB is startNodes for tests and benchmarks.
func startNodesB(t testing.TB) []*Node {
	t.Helper()
	ports := []int{testport.Free(t), testport.Free(t), testport.Free(t)}
	var routes []string
	for _, p := range ports {
		routes = append(routes, fmt.Sprintf("nats://127.0.0.1:%d", p))
	}
	dir := t.TempDir()
	nodes := make([]*Node, 3)
	errs := make([]error, 3)
	var wg sync.WaitGroup
	for i := range nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cfg := config.Cluster{Name: "unit", NodeName: fmt.Sprintf("u%d", i), Listen: fmt.Sprintf("127.0.0.1:%d", ports[i]),
				Routes: routes, Replicas: 3, StoreDir: filepath.Join(dir, fmt.Sprint(i)), Sync: "always"}
			nodes[i], errs[i] = Start(context.Background(), cfg, 1<<20, nil)
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("node %d: %v", i, err)
		}
	}
	t.Cleanup(func() {
		for _, n := range nodes {
			n.Close()
		}
	})
	return nodes
}

// Concurrent first SENDs of a group on several nodes create its stream once and all
// succeed.
func TestConcurrentStreamCreation(t *testing.T) {
	nodes := startNodes(t)
	var wg sync.WaitGroup
	errs := make(chan error, 6)
	start := time.Now()
	for i := range 6 {
		q := NewQueues(nodes[i%3], nil, nil)
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			errs <- q.ensureStream(ctx, q.place(dest.Identity{Group: "g1", Pattern: dest.PatternQueues, Channel: "c"}))
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	t.Logf("created in %v", time.Since(start))
}

// BenchmarkQueuesPublish measures one durable queue SEND to its PubAck on a three-node,
// R3, sync-always cluster in this process (sequential: one producer waiting per SEND).
func BenchmarkQueuesPublish(b *testing.B) {
	nodes := startNodesB(b)
	q := NewQueues(nodes[1], nil, nil)
	id := dest.Identity{Group: "bench", Pattern: dest.PatternQueues, Channel: "jobs"}
	body := make([]byte, 128)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		i++
		m := &message.Message{ID: fmt.Sprintf("bench-%d", i), Group: "bench", Destination: "/queue/jobs", Body: body, Persistent: true}
		if _, err := q.Publish(id, m, nil); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkEventsPublish measures one events SEND (a core NATS publish, no subscriber).
func BenchmarkEventsPublish(b *testing.B) {
	nodes := startNodesB(b)
	e := NewEvents(nodes[0])
	id := dest.Identity{Group: "bench", Pattern: dest.PatternEvents, Channel: "prices.eu"}
	m := &message.Message{ID: "bench-1", Group: "bench", Destination: "/topic/prices/eu", Body: make([]byte, 128)}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := e.Publish(id, m, nil); err != nil {
			b.Fatal(err)
		}
	}
}
