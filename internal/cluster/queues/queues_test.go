package queues

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/titan-broker/titan/internal/cluster/clustertest"
	"github.com/titan-broker/titan/internal/dest"
	"github.com/titan-broker/titan/internal/message"
)

// Concurrent first SENDs of a group on several nodes create its stream once and all
// succeed.
func TestConcurrentStreamCreation(t *testing.T) {
	nodes := clustertest.StartNodes(t)
	var wg sync.WaitGroup
	errs := make(chan error, 6)
	start := time.Now()
	for i := range 6 {
		q := New(nodes[i%3], nil, nil)
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			errs <- q.ensureStream(ctx, q.Place(dest.Identity{Group: "g1", Pattern: dest.PatternQueues, Channel: "c"}))
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
	nodes := clustertest.StartNodes(b)
	q := New(nodes[1], nil, nil)
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
