// Package slotcache is a bounded memo for hot paths: a direct-mapped table of immutable
// entries behind atomic pointers. The caller hashes its key, Load returns the entry in the
// key's slot (the caller checks that it is its key), and Store replaces whatever the slot
// held. Memory is bounded by the slot count whatever the traffic (a colliding entry
// replaces the older one), and a lookup takes no lock, writes no shared memory and does not
// allocate. Used by the authorization decisions (auth) and the cluster's stream placements
// (cluster.PlacementCache).
package slotcache

import "sync/atomic"

// Table holds up to its slot count of *E. The zero value has no slots; New makes one. Safe
// for concurrent use; entries must not be modified once stored.
type Table[E any] struct {
	slots []atomic.Pointer[E]
	mask  uint64
}

// New returns a table of slots entries; slots must be a power of two (it panics otherwise:
// a programming error).
func New[E any](slots int) *Table[E] {
	if slots <= 0 || slots&(slots-1) != 0 {
		panic("slotcache: slot count is not a power of two")
	}
	return &Table[E]{slots: make([]atomic.Pointer[E], slots), mask: uint64(slots - 1)}
}

// Load returns the entry in hash h's slot, or nil. It may be another key's entry with the
// same slot: the caller compares it with its key.
func (t *Table[E]) Load(h uint64) *E { return t.slots[h&t.mask].Load() }

// Store puts e in hash h's slot, replacing the entry there.
func (t *Table[E]) Store(h uint64, e *E) { t.slots[h&t.mask].Store(e) }

// Len counts the slots holding an entry (a scan of every slot: for tests and reports, not
// hot paths).
func (t *Table[E]) Len() int {
	n := 0
	for i := range t.slots {
		if t.slots[i].Load() != nil {
			n++
		}
	}
	return n
}
