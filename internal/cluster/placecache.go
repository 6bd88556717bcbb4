package cluster

import (
	"sync"
	"time"

	"github.com/titan-broker/titan/internal/dest"
)

// MaxCachedPlacements bounds a PlacementCache: past it the cache is emptied and fills
// again from the destinations in use, so no client can make it grow without a limit by
// sending to ever new destinations.
const MaxCachedPlacements = 4096

// PlacementKey is everything a placement is computed from (PlaceQueue, PlaceLog): the
// destination, the address settings that select its stream class (ring size; events-store
// retention), and the node's replicas, partitions and duplicate window. A settings reload
// that changes a class changes the key, so a cached placement is never stale.
type PlacementKey struct {
	ID                dest.Identity
	RingSize          int
	RetentionMessages int64
	RetentionBytes    int64
	RetentionAge      time.Duration
	Replicas          int
	Partitions        int
	DuplicateWindow   time.Duration
}

// PlacementCache memoizes placements by PlacementKey, so that a SEND to a destination in
// use costs one map lookup instead of building its stream name, subjects and stream
// configuration again (issue 28: about twenty allocations per queue SEND). A cached
// Placement is shared: callers must not modify its Config (Streams.Ensure and reconcile
// only read it). The zero value is ready to use; safe for concurrent use (readers share a
// read lock).
type PlacementCache struct {
	mu sync.RWMutex
	m  map[PlacementKey]Placement
}

// Get returns k's cached placement, if any.
func (c *PlacementCache) Get(k PlacementKey) (Placement, bool) {
	c.mu.RLock()
	p, ok := c.m[k]
	c.mu.RUnlock()
	return p, ok
}

// Put caches p under k, emptying the cache first when it holds MaxCachedPlacements.
func (c *PlacementCache) Put(k PlacementKey, p Placement) {
	c.mu.Lock()
	if c.m == nil || len(c.m) >= MaxCachedPlacements {
		c.m = make(map[PlacementKey]Placement)
	}
	c.m[k] = p
	c.mu.Unlock()
}

// Len is the number of cached placements.
func (c *PlacementCache) Len() int {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return len(c.m)
}
