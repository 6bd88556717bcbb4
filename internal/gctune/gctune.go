// Package gctune keeps the Go collector from running back to back while the live heap is
// small: it raises the GC percent after each collection so that the next one starts no
// earlier than a floor of heap bytes, and returns to the configured percent once the live
// heap reaches half the floor.
//
// Why: a broker's live heap at full speed is often a few MiB (messages pass through), while
// it allocates about a kilobyte per message. With GOGC=100 the heap goal is then about twice
// a few MiB, so the collector runs tens of times a second, and each cycle's fixed costs —
// starting mark workers, write barriers on every pointer store while marking, sweeping — cost
// a tenth of the broker's CPU. A floor of a few tens of MiB makes that a few cycles a second
// and leaves larger heaps exactly as GOGC sets them. This is the technique of Uber's
// GOGC tuner ("How We Saved 70K Cores Across 30 Mission-Critical Services", 2021) and of a
// heap ballast, done with the runtime's own knob (debug.SetGCPercent) instead of a dummy
// allocation.
//
// The price of a floor is garbage left uncollected when the broker falls idle right after a
// burst (up to the floor). So once the broker has been quiet for ten seconds — each second
// without a collection and with less than a mebibyte allocated — while the heap holds more
// garbage than the configured percent allows (or, whatever the percent, more than a quarter
// of its live heap), or a collection it did not force ran since its last one, the tuner
// collects and returns the freed pages to the OS (debug.FreeOSMemory), and collects again
// (up to twice) while that freed much, so that what sync.Pools parked (read buffers after a
// burst) goes too: an idle broker gives its memory back.
//
// A GOGC environment variable set by the operator is respected: the tuner does nothing.
package gctune

import (
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
	"sync/atomic"
	"time"
)

// Metrics read (runtime/metrics): the heap marked live by the last collection (Go 1.21), the
// heap objects now (live and not yet swept) and the collections so far.
const (
	liveMetric    = "/gc/heap/live:bytes"
	objectsMetric = "/memory/classes/heap/objects:bytes"
	cyclesMetric  = "/gc/cycles/total:gc-cycles"
	allocsMetric  = "/gc/heap/allocs:bytes"
	stacksMetric  = "/gc/scan/stack:bytes"
	globalsMetric = "/gc/scan/globals:bytes"
)

// idleCheck is how often the tuner looks for a quiet heap full of garbage (see the package
// documentation).
const idleCheck = time.Second

// maxPercent bounds the raised GC percent (a live heap of a few KiB would ask for millions).
const maxPercent = 10_000

// Tuner raises the GC percent after each collection (see the package documentation). Start
// returns it; Stop ends it. Safe for concurrent use.
type Tuner struct {
	floor   uint64 // heap bytes below which the collector should not need to start
	base    int    // the GC percent in force at Start (GOGC's 100 by default)
	stopped atomic.Bool
	mu      sync.Mutex // guards percent and serialises adjust with Stop
	percent int        // the GC percent last set

	// Adjusts counts the GC percent changes made; IdleCollections the collections forced
	// on a quiet heap (for tests and metrics).
	Adjusts         atomic.Uint64
	IdleCollections atomic.Uint64

	done  chan struct{} // closed by Stop: ends the idle check
	decay int           // idleDecay at Start
}

// Start returns a Tuner that keeps the next collection from starting below floor bytes of
// heap, or nil (nothing done) when floor is 0, when the GOGC environment variable is set,
// or when collection is off (GC percent < 0). It adjusts once at once and then after every
// collection, from a finalizer (the runtime's finalizer goroutine).
func Start(floor uint64) *Tuner {
	if floor == 0 || os.Getenv("GOGC") != "" {
		return nil
	}
	base := debug.SetGCPercent(100)
	debug.SetGCPercent(base)
	if base < 0 {
		return nil
	}
	t := &Tuner{floor: floor, base: base, percent: base, done: make(chan struct{}), decay: idleDecay}
	t.adjust()
	t.arm()
	go t.idleLoop(idleCheck)
	return t
}

// quietAlloc is the most a heap may allocate in one idle check's interval and still count
// as quiet. Without it a steady light load (a few thousand messages a second, which fills
// the floor only after tens of seconds) would look idle at every check, and every check
// would force a full collection and give the pages back to the OS, for the load to fault
// them in again: latency spikes once a second for nothing.
const quietAlloc = 1 << 20

// idleSlack is the garbage (and the memory a collection frees) below which an idle heap is
// left as it is: a forced collection is not worth less.
const idleSlack = 4 << 20

// idleFollowUps bounds the collections idleLoop makes after one it had a reason for.
const idleFollowUps = 2

// idleSettle is how many quiet checks in a row idleLoop waits after a collection it did not
// force before it collects once anyway (see idleLoop).
const idleSettle = 2

// idleDecay is how many quiet checks in a row (seconds) idleLoop waits before it gives memory
// back at all, like jemalloc's dirty_decay_ms (10 s by default): pages given back are faulted
// in again by the next burst (64 MiB of floor is 16,384 faults, 14 us each measured on a
// 2-core VM: 0.23 s of CPU), so a broker serving bursts a few seconds apart keeps its pages
// between them, and one that stays quiet still gives them back within seconds. A variable
// only so that tests can shorten it.
var idleDecay = 10

// idleLoop collects, and returns the freed pages to the OS, when the heap has been quiet for
// t.decay checks in a row (idleDecay at Start; quiet: a whole interval passed without a
// collection and with less than quietAlloc allocated) and
//   - it holds garbage: more than the raised percent's floor left behind, or, whatever the
//     percent, more than a quarter of the live heap and idleSlack; or
//   - a collection the tuner did not force ran since its last one, and idleSettle checks
//     (at least t.decay) in a row found the heap quiet: memory parked in sync.Pools (the connections' read
//     buffers after a burst) is live to a collection, which only moves it to the pools'
//     victim caches, so a heap whose last collection came after a burst holds it without
//     any garbage to show;
//
// and then again at the next quiet checks (at most idleFollowUps times) while the last one
// freed more than idleSlack: what the first collection moved to the pools' victim caches
// goes with the next. The bounds keep a steady trickle of garbage from making every check
// collect a large live heap: at most one collection per check, each a follow-up, a heap a
// quarter garbage, or the first quiet moment after activity. Until Stop.
func (t *Tuner) idleLoop(interval time.Duration) {
	tick := time.NewTicker(interval)
	defer tick.Stop()
	last, lastAllocs := ^uint64(0), uint64(0)
	follow := 0    // collections still allowed after the last one, while each frees much
	quietRun := 0  // quiet checks in a row
	active := true // a collection the tuner did not force ran since its last one
	for {
		select {
		case <-t.done:
			return
		case <-tick.C:
		}
		s := []metrics.Sample{{Name: cyclesMetric}, {Name: liveMetric}, {Name: objectsMetric}, {Name: allocsMetric}}
		metrics.Read(s)
		cycles, live, objects, allocs := s[0].Value.Uint64(), s[1].Value.Uint64(), s[2].Value.Uint64(), s[3].Value.Uint64()
		busy := allocs-lastAllocs >= quietAlloc
		lastAllocs = allocs
		if cycles != last || busy {
			last, quietRun, follow, active = cycles, 0, 0, true
			continue
		}
		quietRun++
		if quietRun < t.decay {
			continue
		}
		garbage := objects > live+idleSlack &&
			((t.Percent() > t.base && IdleGarbage(live, objects, t.base)) || objects > live+live/4)
		settled := active && quietRun >= max(idleSettle, t.decay)
		if !garbage && !settled && follow == 0 {
			continue
		}
		// Collect and return the freed pages to the OS: the scavenger alone keeps about as
		// much as the raised heap goal.
		debug.FreeOSMemory()
		t.IdleCollections.Add(1)
		metrics.Read(s)
		last, active, lastAllocs = s[0].Value.Uint64(), false, s[3].Value.Uint64()
		after := s[2].Value.Uint64()
		switch {
		case objects <= after || objects-after <= idleSlack:
			follow = 0
		case garbage || settled:
			follow = idleFollowUps
		default:
			follow--
		}
	}
}

// IdleGarbage reports whether a heap of objects bytes, with live bytes marked live by the
// last collection, holds more garbage than GC percent base would let grow.
func IdleGarbage(live, objects uint64, base int) bool {
	return objects > live+live*uint64(base)/100
}

// Stop ends the tuning and restores the GC percent in force at Start. Safe on a nil Tuner.
func (t *Tuner) Stop() {
	if t == nil || t.stopped.Swap(true) {
		return
	}
	close(t.done)
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.percent != t.base {
		debug.SetGCPercent(t.base)
		t.percent = t.base
	}
}

// Percent returns the GC percent the tuner last set.
func (t *Tuner) Percent() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.percent
}

// sentinel is garbage made for one collection: its finalizer runs after the cycle that
// found it unreachable, adjusts the percent and makes the next sentinel.
type sentinel struct{ t *Tuner }

func (t *Tuner) arm() {
	s := &sentinel{t: t}
	runtime.SetFinalizer(s, func(s *sentinel) {
		if s.t.stopped.Load() {
			return
		}
		s.t.adjust()
		s.t.arm()
	})
}

// adjust sets the GC percent for the live heap the last collection found.
func (t *Tuner) adjust() {
	s := []metrics.Sample{{Name: liveMetric}, {Name: stacksMetric}, {Name: globalsMetric}}
	metrics.Read(s)
	var live, scan uint64
	if s[0].Value.Kind() == metrics.KindUint64 {
		live = s[0].Value.Uint64()
		scan = live
		for _, x := range s[1:] {
			if x.Value.Kind() == metrics.KindUint64 {
				scan += x.Value.Uint64()
			}
		}
	}
	p := PercentFor(live, scan, t.floor, t.base)
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.stopped.Load() || p == t.percent {
		return
	}
	// Small changes are not worth the runtime's recomputation: keep within an eighth.
	if p > t.base && t.percent > t.base && p < t.percent+t.percent/8 && p > t.percent-t.percent/8 {
		return
	}
	debug.SetGCPercent(p)
	t.percent = p
	t.Adjusts.Add(1)
}

// PercentFor returns the GC percent that puts the next collection's heap goal at floor
// bytes, never below base nor above 10,000: base once the live heap is half the floor or
// more (or unknown, 0). live is the heap the last collection marked; scan is what the
// percent multiplies, the marked heap plus the goroutine stacks and globals scanned (the
// runtime's pacer, Go 1.18+: goal = marked + (marked + stacks + globals) × percent / 100;
// runtime/metrics /gc/scan/stack:bytes and /gc/scan/globals:bytes). The runtime also never
// sets a goal below its heap minimum, 4 MiB × percent / 100 (runtime/mgcpacer.go,
// defaultHeapMinimum), so the percent is at most floor / 4 MiB × 100: without that bound a
// 1 MiB live heap put the goal of a 64 MiB floor at 216 MiB (percent 5,410 from the marked
// heap alone).
func PercentFor(live, scan, floor uint64, base int) int {
	if live == 0 || live*2 >= floor {
		return base
	}
	scan = max(scan, live)
	p := min((floor-live)*100/scan, floor*100/runtimeHeapMinimum)
	return max(base, min(int(p), maxPercent))
}

// runtimeHeapMinimum is the Go runtime's heap minimum at GOGC=100 (defaultHeapMinimum): the
// heap goal is never below runtimeHeapMinimum × percent / 100.
const runtimeHeapMinimum = 4 << 20
