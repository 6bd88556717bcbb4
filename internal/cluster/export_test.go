package cluster

import (
	"testing"
	"time"
)

// SetPartitionsDefer sets how long a node without cluster.partitions defers to a
// configured one on a cluster's first start, until t ends. Not safe while nodes start.
func SetPartitionsDefer(t testing.TB, d time.Duration) {
	old := defaultPartitionsDefer
	defaultPartitionsDefer = d
	t.Cleanup(func() { defaultPartitionsDefer = old })
}
