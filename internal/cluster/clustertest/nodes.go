// Package clustertest starts real clustered nodes (embedded nats-server with JetStream)
// in a test process, for the cluster packages' tests.
package clustertest

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"testing"

	"github.com/titan-broker/titan/internal/cluster"
	"github.com/titan-broker/titan/internal/config"
	"github.com/titan-broker/titan/internal/testport"
)

// StartNodes starts three embedded, clustered nodes (R3, sync always) in this process on
// free test ports and closes them when t ends. It fails t when a node does not start.
func StartNodes(t testing.TB) []*cluster.Node {
	t.Helper()
	return StartNodesWith(t, nil)
}

// StartNodesWith is StartNodes with node i's configuration changed by configure (nil:
// unchanged) before it starts.
func StartNodesWith(t testing.TB, configure func(i int, c *config.Cluster)) []*cluster.Node {
	t.Helper()
	ports := []int{testport.Free(t), testport.Free(t), testport.Free(t)}
	var routes []string
	for _, p := range ports {
		routes = append(routes, fmt.Sprintf("nats://127.0.0.1:%d", p))
	}
	dir := t.TempDir()
	nodes := make([]*cluster.Node, 3)
	errs := make([]error, 3)
	var wg sync.WaitGroup
	for i := range nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cfg := config.Cluster{Name: "unit", NodeName: fmt.Sprintf("u%d", i), Listen: fmt.Sprintf("127.0.0.1:%d", ports[i]),
				Routes: routes, Replicas: 3, StoreDir: filepath.Join(dir, fmt.Sprint(i)), Sync: "always"}
			if configure != nil {
				configure(i, &cfg)
			}
			nodes[i], errs[i] = cluster.Start(context.Background(), cfg, 1<<20, nil)
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
