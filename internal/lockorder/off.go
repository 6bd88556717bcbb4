//go:build !invariants

package lockorder

import "sync"

// Enabled reports whether this build checks the lock order (the `invariants` build tag).
const Enabled = false

// Mutex is a sync.Mutex of rank R. Without the `invariants` tag it is sync.Mutex itself (a
// type alias: no wrapper, no cost).
type Mutex[R Ranker] = sync.Mutex

// RWMutex is a sync.RWMutex of rank R. Without the `invariants` tag it is sync.RWMutex itself.
type RWMutex[R Ranker] = sync.RWMutex
