package cluster

import (
	"hash/maphash"
	"time"

	"github.com/titan-broker/titan/internal/dest"
	"github.com/titan-broker/titan/internal/slotcache"
)

// PlacementSlots is a PlacementCache's slot count: the most placements it holds, whatever
// the number of destinations clients send to (a colliding placement replaces the older one).
const PlacementSlots = 4096

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

// PlacementCache memoizes placements by PlacementKey in a slotcache.Table, so that a SEND
// to a destination in use costs a hash and one atomic load instead of building its stream
// name, subjects and stream configuration again (issue 28: eight allocations per queue
// SEND) — no lock, no allocation. A cached Placement is shared: callers must not modify
// its Config's slices (Streams.Ensure and reconcile only read them). Make it with
// NewPlacementCache; safe for concurrent use.
type PlacementCache struct {
	seed  maphash.Seed
	slots *slotcache.Table[placed]
}

type placed struct {
	key PlacementKey
	p   Placement
}

// NewPlacementCache returns an empty cache of PlacementSlots.
func NewPlacementCache() *PlacementCache {
	return &PlacementCache{seed: maphash.MakeSeed(), slots: slotcache.New[placed](PlacementSlots)}
}

// Place returns k's placement: the cached one, or compute's, which it caches.
func (c *PlacementCache) Place(k PlacementKey, compute func() Placement) Placement {
	h := c.hash(&k)
	if e := c.slots.Load(h); e != nil && e.key == k {
		return e.p
	}
	p := compute()
	c.slots.Store(h, &placed{key: k, p: p})
	return p
}

// Len is the number of cached placements (a scan: for tests).
func (c *PlacementCache) Len() int { return c.slots.Len() }

// hash hashes every field of k without allocating (maphash.Comparable would move k to
// the heap).
func (c *PlacementCache) hash(k *PlacementKey) uint64 {
	var h maphash.Hash
	h.SetSeed(c.seed)
	_, _ = h.WriteString(k.ID.Group)
	_ = h.WriteByte(0)
	_, _ = h.WriteString(k.ID.Channel)
	_ = h.WriteByte(byte(k.ID.Pattern))
	if k.ID.Bare {
		_ = h.WriteByte(1)
	}
	var b [8]byte
	for _, v := range [...]int64{int64(k.RingSize), k.RetentionMessages, k.RetentionBytes, int64(k.RetentionAge),
		int64(k.Replicas), int64(k.Partitions), int64(k.DuplicateWindow)} {
		for i := range b {
			b[i] = byte(v >> (8 * i))
		}
		_, _ = h.Write(b[:])
	}
	return h.Sum64()
}
