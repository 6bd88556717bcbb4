package topicsub

import (
	"sync"

	"github.com/titan-broker/titan/internal/dest"
	"github.com/titan-broker/titan/internal/selector"
	"github.com/titan-broker/titan/internal/sublist"
)

// Feed is a durable topic subscription's entry in the fan-out index: the queue a topic
// SEND it matches feeds, and its compiled selector (nil selects every message).
type Feed struct {
	Queue dest.Identity
	Sel   *selector.Selector
}

// Index is the fan-out index of durable topic subscriptions: their Feeds by (group,
// bare-ness) and filter channel, in a sublist so that wildcards match as they do for topic
// subscribers. The single node's Registry and cluster mode's (internal/cluster/durables)
// both keep one. The zero Index is empty and ready; safe for concurrent use (Match takes a
// read lock for one map lookup; each Sublist is safe on its own).
type Index struct {
	mu sync.RWMutex // guards m
	m  map[idxKey]*sublist.Sublist[*Feed]
}

type idxKey struct {
	group string
	bare  bool
}

// Add indexes f under group and filter.
func (x *Index) Add(group string, filter dest.Destination, f *Feed) {
	k := idxKey{group, filter.Bare}
	x.mu.Lock()
	defer x.mu.Unlock()
	sl := x.m[k]
	if sl == nil {
		if x.m == nil {
			x.m = map[idxKey]*sublist.Sublist[*Feed]{}
		}
		sl = sublist.New[*Feed]()
		x.m[k] = sl
	}
	sl.Insert(filter.Channel, f)
}

// Remove removes f, indexed under group and filter (nothing when it is not).
func (x *Index) Remove(group string, filter dest.Destination, f *Feed) {
	k := idxKey{group, filter.Bare}
	x.mu.Lock()
	defer x.mu.Unlock()
	if sl := x.m[k]; sl != nil {
		sl.Remove(filter.Channel, f)
		if sl.Count() == 0 {
			delete(x.m, k)
		}
	}
}

// Match calls fn for every Feed whose filter matches the events destination id (same
// group and bare-ness, dest.Match on the channel). fn must not call Add or Remove.
func (x *Index) Match(id dest.Identity, fn func(*Feed)) {
	x.mu.RLock()
	sl := x.m[idxKey{id.Group, id.Bare}]
	x.mu.RUnlock()
	if sl != nil {
		sl.Match(id.Channel, fn)
	}
}
