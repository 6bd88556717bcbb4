package queues

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/titan-broker/titan/internal/cluster/clustertest"
	"github.com/titan-broker/titan/internal/config"
	"github.com/titan-broker/titan/internal/dest"
)

// BenchmarkPartitionedPublish: 16 producers (one per goroutine, as d16's 16 connections
// each waiting for its RECEIPT) publish synchronously to 48 queues of one group, through
// the three nodes of an in-process R3 cluster (sync always), with the group's queues in one
// stream or spread over 12 partition streams. msgs/s is the cluster's rate.
func BenchmarkPartitionedPublish(b *testing.B) {
	for _, parts := range []int{1, 3, 12} {
		b.Run(fmt.Sprintf("partitions=%d", parts), func(b *testing.B) {
			nodes := clustertest.StartNodesWith(b, func(_ int, c *config.Cluster) { c.Partitions = parts })
			qs := make([]*Pattern, 3)
			for i, n := range nodes {
				qs[i] = New(n, nil, nil)
			}
			ids := make([]dest.Identity, 48)
			for i := range ids {
				ids[i] = clustertest.QueueID("bench", fmt.Sprintf("q%d", i))
				// The streams exist before the clock starts.
				if _, err := qs[i%3].Publish(ids[i], clustertest.MsgFor(ids[i], "warm"), nil); err != nil {
					b.Fatal(err)
				}
			}
			var next atomic.Int64
			var wg sync.WaitGroup
			b.ReportAllocs()
			b.ResetTimer()
			for p := range 16 {
				wg.Go(func() {
					for {
						i := next.Add(1)
						if i > int64(b.N) {
							return
						}
						id := ids[(int(i)*7+p)%len(ids)]
						if _, err := qs[p%3].Publish(id, clustertest.MsgFor(id, "payload-100-bytes"), nil); err != nil {
							b.Error(err)
							return
						}
					}
				})
			}
			wg.Wait()
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
		})
	}
}
