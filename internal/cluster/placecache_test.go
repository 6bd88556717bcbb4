package cluster

import (
	"strconv"
	"testing"

	"github.com/titan-broker/titan/internal/dest"
)

// A cached placement is the one PlaceQueue computes, a key differing only in its ring size
// (a settings reload) misses, and the cache never holds more than MaxCachedPlacements
// however many destinations are sent to.
func TestPlacementCacheIsExactAndBounded(t *testing.T) {
	var c PlacementCache
	id := dest.Identity{Group: "g", Pattern: dest.PatternQueues, Channel: "jobs"}
	k := PlacementKey{ID: id, Replicas: 3, Partitions: 12}
	want := PlaceQueue(id, 0, 3, 12, 0)
	c.Put(k, want)
	got, ok := c.Get(k)
	if !ok || got.Stream != want.Stream || got.Subject != want.Subject || got.Config.Name != want.Config.Name {
		t.Fatalf("cached placement = %+v, %v; want %+v", got, ok, want)
	}
	k.RingSize = 5
	if _, ok := c.Get(k); ok {
		t.Fatal("a placement cached for ring size 0 was returned for ring size 5")
	}
	for i := range 3 * MaxCachedPlacements {
		id.Channel = "jobs." + strconv.Itoa(i)
		c.Put(PlacementKey{ID: id}, Placement{})
		if n := c.Len(); n > MaxCachedPlacements {
			t.Fatalf("cache holds %d placements, bound %d", n, MaxCachedPlacements)
		}
	}
}
