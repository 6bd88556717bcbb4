package cluster

import (
	"strconv"
	"testing"
	"time"

	"github.com/titan-broker/titan/internal/dest"
)

// A cached placement is the one computed for its key; a key differing in any setting that
// selects a stream class (ring size, a retention bound: a settings reload) or in the node's
// duplicate window is computed again; the cache never holds more than PlacementSlots
// however many destinations are sent to; and a hit allocates nothing.
func TestPlacementCacheIsExactAndBounded(t *testing.T) {
	c := NewPlacementCache()
	id := dest.Identity{Group: "g", Pattern: dest.PatternQueues, Channel: "jobs"}
	k := PlacementKey{ID: id, Replicas: 3, Partitions: 12}
	computed := 0
	place := func(k PlacementKey) Placement {
		return c.Place(k, func() Placement { computed++; return PlaceQueue(k.ID, k.RingSize, 3, 12, 0) })
	}
	want := PlaceQueue(id, 0, 3, 12, 0)
	for range 2 {
		if got := place(k); got.Stream != want.Stream || got.Subject != want.Subject || got.Config.Name != want.Config.Name {
			t.Fatalf("placement = %+v, want %+v", got, want)
		}
	}
	if computed != 1 {
		t.Fatalf("computed %d times for one key, want 1", computed)
	}
	for _, changed := range []PlacementKey{
		{ID: id, Replicas: 3, Partitions: 12, RingSize: 5},
		{ID: id, Replicas: 3, Partitions: 12, RetentionMessages: 10},
		{ID: id, Replicas: 3, Partitions: 12, RetentionBytes: 1 << 20},
		{ID: id, Replicas: 3, Partitions: 12, RetentionAge: time.Hour},
		{ID: id, Replicas: 3, Partitions: 12, DuplicateWindow: time.Minute},
		{ID: dest.Identity{Group: "g", Pattern: dest.PatternQueues, Channel: "jobs", Bare: true}, Replicas: 3, Partitions: 12},
	} {
		before := computed
		place(changed)
		if computed != before+1 {
			t.Fatalf("key %+v was answered from another key's placement", changed)
		}
	}
	if n := testing.AllocsPerRun(100, func() { place(k) }); n != 0 {
		t.Fatalf("a cache hit allocates %v times", n)
	}
	for i := range 3 * PlacementSlots {
		id.Channel = "jobs." + strconv.Itoa(i)
		place(PlacementKey{ID: id})
	}
	if n := c.Len(); n > PlacementSlots {
		t.Fatalf("cache holds %d placements, bound %d", n, PlacementSlots)
	}
}
