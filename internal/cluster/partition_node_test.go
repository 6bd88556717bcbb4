package cluster_test

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
	"github.com/titan-broker/titan/internal/config"
	"github.com/titan-broker/titan/internal/dest"
)

// The partition count is fixed at the cluster's first start and stored in it: nodes
// started without cluster.partitions adopt it, a node configured with another count
// refuses to start (ErrPartitionsChanged), and a cluster holding streams made before
// partitions keeps one partition.
func TestPartitionCountIsFixedAtFirstStart(t *testing.T) {
	// The unset node defers to the configured ones for as long as they take to store
	// their count (it polls, so this costs nothing when they are quick): with the default
	// second, a slow machine let it store 12 first (CI, stop 39).
	cluster.SetPartitionsDefer(t, 30*time.Second)
	nodes := clustertest.StartNodesWith(t, func(i int, c *config.Cluster) {
		if i < 2 {
			c.Partitions = 4
		}
	})
	for i, n := range nodes {
		if got := n.Partitions(); got != 4 {
			t.Errorf("node %d: %d partitions, want 4 (two nodes configured 4, one unset)", i, got)
		}
	}
	cluster.SetPartitionsDefer(t, 200*time.Millisecond) // the later joins find nothing stored at times
	url := nodes[0].Server().ClientURL()
	join := func(partitions int) (*cluster.Node, error) {
		n, err := cluster.Start(context.Background(), config.Cluster{NatsURL: url, Replicas: 3, Partitions: partitions}, 1<<20, nil)
		if err == nil {
			t.Cleanup(n.Close)
		}
		return n, err
	}
	if _, err := join(5); !errors.Is(err, cluster.ErrPartitionsChanged) {
		t.Fatalf("a node configured with 5 partitions on a 4-partition cluster: %v, want ErrPartitionsChanged", err)
	}
	for _, p := range []int{0, 4} {
		n, err := join(p)
		if err != nil || n.Partitions() != 4 {
			t.Fatalf("a node configured with %d partitions: %v, %v; want it to start with 4", p, n, err)
		}
	}

	// A cluster of a version before partitions: no stored count, a stream of its own.
	ctx := context.Background()
	js := nodes[0].JetStream()
	kv, err := js.KeyValue(ctx, cluster.LayoutBucket)
	if err != nil {
		t.Fatal(err)
	}
	if err := kv.Purge(ctx, "partitions"); err != nil {
		t.Fatal(err)
	}
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "TITAN_old_Q", Subjects: cluster.QueueSubjects("old"), Replicas: 3}); err != nil {
		t.Fatal(err)
	}
	if _, err := join(6); !errors.Is(err, cluster.ErrPartitionsChanged) {
		t.Fatalf("a node configured with 6 partitions on a cluster with unpartitioned streams: %v, want ErrPartitionsChanged", err)
	}
	n, err := join(0)
	if err != nil || n.Partitions() != 1 {
		t.Fatalf("a node without cluster.partitions on a cluster with unpartitioned streams: %v, %v; want 1 partition", n, err)
	}
	if _, err := join(4); !errors.Is(err, cluster.ErrPartitionsChanged) {
		t.Fatalf("a node configured with 4 partitions after the count was fixed at 1: %v, want ErrPartitionsChanged", err)
	}
}

// The node that makes a partition stream moves its leader to PreferredLeader before the
// stream is used: the twelve partitions of a class, made at once from one node, are led
// four by each of the three nodes, each by its preferred one.
func TestEnsurePlacesPartitionLeaders(t *testing.T) {
	nodes := clustertest.StartNodes(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	streams := cluster.NewStreams(nodes[0].JetStream())
	const n = cluster.DefaultPartitions
	var wg sync.WaitGroup
	errs := make([]error, n)
	names := make([]string, n)
	start := time.Now()
	for k := range n {
		// The channel picked so that the destination is in partition k.
		var p cluster.Placement
		for i := 0; ; i++ {
			id := dest.Identity{Group: "lead", Pattern: dest.PatternQueues, Channel: fmt.Sprintf("q%d", i)}
			if p = cluster.PlaceQueue(id, 0, 3, n, 0); p.Partition == k {
				break
			}
		}
		names[k] = p.Stream
		wg.Go(func() { errs[k] = streams.Ensure(ctx, p.Config) })
	}
	wg.Wait()
	t.Logf("%d partition streams made and placed in %v", n, time.Since(start).Round(time.Millisecond))
	per := map[string]int{}
	for k, name := range names {
		if errs[k] != nil {
			t.Fatalf("Ensure(%s): %v", name, errs[k])
		}
		info, err := nodes[1].JetStream().Stream(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		c := info.CachedInfo().Cluster
		peers := []string{c.Leader}
		for _, r := range c.Replicas {
			peers = append(peers, r.Name)
		}
		if want := cluster.PreferredLeader(name, peers); c.Leader != want {
			t.Errorf("%s is led by %s, want its preferred leader %s", name, c.Leader, want)
		}
		per[c.Leader]++
	}
	for _, nd := range nodes {
		if per[nd.Name()] != n/3 {
			t.Errorf("leaders per node %v, want %d each", per, n/3)
			break
		}
	}
}
