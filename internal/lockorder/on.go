//go:build invariants

package lockorder

import (
	"bytes"
	"fmt"
	"runtime"
	"slices"
	"strconv"
	"sync"
)

// Enabled reports whether this build checks the lock order (the `invariants` build tag).
const Enabled = true

// Mutex is a sync.Mutex of rank R whose acquisitions are checked against the locks the
// goroutine holds (see the package comment). The zero value is unlocked.
type Mutex[R Ranker] struct {
	m sync.Mutex
}

// Lock checks the order and locks m; it panics when the goroutine holds a lock whose rank is
// not below R's.
func (m *Mutex[R]) Lock() {
	var r R
	acquire(m, r.Rank())
	m.m.Lock()
}

// TryLock tries to lock m. Its order is not checked (a TryLock never waits, so it cannot
// deadlock: taking a lower rank by TryLock is how code backs off), but when it succeeds m is
// recorded, and the locks taken while it is held are checked against it.
func (m *Mutex[R]) TryLock() bool {
	if !m.m.TryLock() {
		return false
	}
	var r R
	record(m, r.Rank())
	return true
}

// Unlock unlocks m and forgets it.
func (m *Mutex[R]) Unlock() {
	release(m)
	m.m.Unlock()
}

// RWMutex is a sync.RWMutex of rank R whose acquisitions (read or write) are checked like
// Mutex's. The zero value is unlocked.
type RWMutex[R Ranker] struct {
	m sync.RWMutex
}

// Lock checks the order and write-locks m.
func (m *RWMutex[R]) Lock() {
	var r R
	acquire(m, r.Rank())
	m.m.Lock()
}

// TryLock tries to write-lock m; like Mutex.TryLock, it is recorded but not checked.
func (m *RWMutex[R]) TryLock() bool {
	if !m.m.TryLock() {
		return false
	}
	var r R
	record(m, r.Rank())
	return true
}

// Unlock write-unlocks m and forgets it.
func (m *RWMutex[R]) Unlock() {
	release(m)
	m.m.Unlock()
}

// RLock checks the order and read-locks m.
func (m *RWMutex[R]) RLock() {
	var r R
	acquire(m, r.Rank())
	m.m.RLock()
}

// TryRLock tries to read-lock m; like Mutex.TryLock, it is recorded but not checked.
func (m *RWMutex[R]) TryRLock() bool {
	if !m.m.TryRLock() {
		return false
	}
	var r R
	record(m, r.Rank())
	return true
}

// RUnlock read-unlocks m and forgets it.
func (m *RWMutex[R]) RUnlock() {
	release(m)
	m.m.RUnlock()
}

// RLocker returns a sync.Locker whose Lock and Unlock are m's RLock and RUnlock.
func (m *RWMutex[R]) RLocker() sync.Locker { return rlocker[R]{m} }

type rlocker[R Ranker] struct{ m *RWMutex[R] }

func (l rlocker[R]) Lock()   { l.m.RLock() }
func (l rlocker[R]) Unlock() { l.m.RUnlock() }

// held is one lock a goroutine holds.
type held struct {
	lock any // the *Mutex[R] or *RWMutex[R]
	rank int
}

var (
	heldMu sync.Mutex
	// byG is the locks each goroutine holds, in acquisition order, by goroutine id; guarded
	// by heldMu.
	byG = map[uint64][]held{}
	// free are emptied lists of byG, reused so that the checker does not allocate per lock in
	// steady state (the allocation-budget tests run under the tag); guarded by heldMu.
	free [][]held
	// stackBuf receives the stack trace's first line in goid; guarded by heldMu.
	stackBuf [64]byte
)

// acquire records that the calling goroutine takes lock of rank, after checking that every
// lock it holds has a lower rank.
func acquire(lock any, rank int) {
	heldMu.Lock()
	g := goid()
	hs := byG[g]
	for _, h := range hs {
		if h.rank >= rank {
			heldMu.Unlock()
			panic(fmt.Sprintf("lockorder: goroutine %d takes a lock of rank %d (%T) while holding one of rank %d (%T): internal/broker/LOCKS.md allows only increasing ranks",
				g, rank, lock, h.rank, h.lock))
		}
	}
	push(g, hs, held{lock: lock, rank: rank})
	heldMu.Unlock()
}

// record records that the calling goroutine holds lock of rank, without a check (TryLock).
func record(lock any, rank int) {
	heldMu.Lock()
	g := goid()
	push(g, byG[g], held{lock: lock, rank: rank})
	heldMu.Unlock()
}

// push appends h to goroutine g's locks hs. heldMu must be held.
func push(g uint64, hs []held, h held) {
	if hs == nil && len(free) > 0 {
		hs = free[len(free)-1]
		free = free[:len(free)-1]
	}
	byG[g] = append(hs, h)
}

// release forgets lock: on the calling goroutine, or (unlocked elsewhere than taken) on the
// goroutine that holds it.
func release(lock any) {
	heldMu.Lock()
	defer heldMu.Unlock()
	if forget(goid(), lock) {
		return
	}
	for other := range byG {
		if forget(other, lock) {
			return
		}
	}
}

// forget removes the latest record of lock from goroutine g's locks. heldMu must be held.
func forget(g uint64, lock any) bool {
	hs := byG[g]
	for i := len(hs) - 1; i >= 0; i-- {
		if hs[i].lock == lock {
			hs = slices.Delete(hs, i, i+1)
			if len(hs) == 0 {
				delete(byG, g)
				free = append(free, hs)
			} else {
				byG[g] = hs
			}
			return true
		}
	}
	return false
}

// goid returns the calling goroutine's id, parsed from the first line of its stack trace
// ("goroutine 42 [running]:"). Slow; used only under the invariants tag. heldMu must be held
// (it guards the buffer).
func goid() uint64 {
	b := stackBuf[:runtime.Stack(stackBuf[:], false)]
	b = bytes.TrimPrefix(b, []byte("goroutine "))
	if i := bytes.IndexByte(b, ' '); i > 0 {
		b = b[:i]
	}
	id, err := strconv.ParseUint(string(b), 10, 64)
	if err != nil {
		panic("lockorder: cannot parse the goroutine id from " + strconv.Quote(string(stackBuf[:])))
	}
	return id
}
