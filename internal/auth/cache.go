package auth

import (
	"hash/maphash"

	"github.com/titan-broker/titan/internal/dest"
	"github.com/titan-broker/titan/internal/slotcache"
)

// cacheSlots is the size of the decision cache (a power of two). A slot holds one decision;
// a colliding decision replaces it, so memory is bounded whatever the traffic.
const cacheSlots = 1 << 14

// decisionCache caches Allowed decisions for one snapshot in a slotcache.Table. Lookups
// take no lock and do not allocate.
type decisionCache struct {
	seed  maphash.Seed
	slots *slotcache.Table[decision]
}

type decision struct {
	user, group, channel string
	pattern              dest.Pattern
	perm                 Permission
}

func newDecisionCache() *decisionCache {
	return &decisionCache{seed: maphash.MakeSeed(), slots: slotcache.New[decision](cacheSlots)}
}

func (c *decisionCache) hash(user, group string, pattern dest.Pattern, channel string) uint64 {
	var h maphash.Hash
	h.SetSeed(c.seed)
	_, _ = h.WriteString(user)
	_ = h.WriteByte(0)
	_, _ = h.WriteString(group)
	_ = h.WriteByte(byte(pattern))
	_, _ = h.WriteString(channel)
	return h.Sum64()
}

func (c *decisionCache) get(h uint64, user, group string, pattern dest.Pattern, channel string) (Permission, bool) {
	d := c.slots.Load(h)
	if d == nil || d.pattern != pattern || d.channel != channel || d.user != user || d.group != group {
		return 0, false
	}
	return d.perm, true
}

func (c *decisionCache) put(h uint64, user, group string, pattern dest.Pattern, channel string, p Permission) {
	// The strings may point into a read buffer: keep copies.
	d := &decision{user: clone(user), group: clone(group), channel: clone(channel), pattern: pattern, perm: p}
	c.slots.Store(h, d)
}

func clone(s string) string { return string([]byte(s)) }
