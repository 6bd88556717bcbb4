package gctune

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/titan-broker/titan/internal/testwait"
)

func TestPercentFor(t *testing.T) {
	const mib = 1 << 20
	cases := []struct {
		live, scan, floor uint64
		base, want        int
	}{
		{32 * mib, 32 * mib, 1024 * mib, 100, 3100}, // goal = 32 + 32×31 = 1 GiB
		{32 * mib, 64 * mib, 1024 * mib, 100, 1550}, // stacks and globals 32 MiB: goal = 32 + 64×15.5
		{32 * mib, 16 * mib, 1024 * mib, 100, 3100}, // scan below live (not expected): live counts
		{2 * mib, 2 * mib, 64 * mib, 100, 1600},     // the runtime's heap minimum: 4 MiB × 16 = 64 MiB
		{1024, 1024, 64 * mib, 100, 1600},           // the same for any small heap
		{32 * mib, 40 * mib, 64 * mib, 100, 100},    // half the floor: GOGC as configured
		{40 * mib, 40 * mib, 64 * mib, 100, 100},
		{0, 0, 64 * mib, 100, 100},               // unknown live heap
		{1024, 1024, 1 << 50, 100, 10_000},       // capped
		{16 * mib, 16 * mib, 64 * mib, 400, 400}, // never below the configured percent
		{8 * mib, 8 * mib, 64 * mib, 50, 700},    // goal = 8 + 8×7 = 64 MiB
	}
	for _, c := range cases {
		if got := PercentFor(c.live, c.scan, c.floor, c.base); got != c.want {
			t.Errorf("PercentFor(%d, %d, %d, %d) = %d, want %d", c.live, c.scan, c.floor, c.base, got, c.want)
		}
	}
}

// With a live heap far below the floor the tuner raises the GC percent after collections,
// and Stop restores the percent in force at Start.
func TestTunerRaisesPercentAndStopRestores(t *testing.T) {
	t.Setenv("GOGC", "") // an operator's GOGC disables the tuner; make sure none is set
	before := debug.SetGCPercent(100)
	defer debug.SetGCPercent(before)
	tu := Start(1 << 30) // 1 GiB: far above this test's live heap
	if tu == nil {
		t.Fatal("Start returned nil")
	}
	for range 3 {
		runtime.GC()
		runtime.GC() // the finalizer of the first cycle's sentinel runs after it
	}
	if p := tu.Percent(); p <= 100 {
		t.Fatalf("percent %d after collections with a small live heap, want > 100", p)
	}
	if got := debug.SetGCPercent(-1); got != tu.Percent() {
		t.Fatalf("runtime GC percent %d, tuner says %d", got, tu.Percent())
	} else {
		debug.SetGCPercent(got)
	}
	tu.Stop()
	if got := debug.SetGCPercent(100); got != 100 {
		t.Fatalf("after Stop the GC percent is %d, want the 100 in force at Start", got)
	}
}

func TestStartRespectsOperatorGOGC(t *testing.T) {
	t.Setenv("GOGC", "200")
	if tu := Start(64 << 20); tu != nil {
		tu.Stop()
		t.Fatal("Start tuned although GOGC is set")
	}
	if tu := Start(0); tu != nil {
		t.Fatal("Start tuned with a zero floor")
	}
}

func TestIdleGarbage(t *testing.T) {
	const mib = 1 << 20
	if !IdleGarbage(2*mib, 40*mib, 100) {
		t.Error("40 MiB of objects over a 2 MiB live heap is idle garbage at GOGC 100")
	}
	if IdleGarbage(2*mib, 4*mib, 100) {
		t.Error("4 MiB of objects over a 2 MiB live heap is what GOGC 100 allows")
	}
}

// A heap left full of garbage by a burst is collected once the process has been quiet for
// an interval, even though the raised percent would not start a collection.
func TestIdleLoopCollectsQuietGarbage(t *testing.T) {
	shortDecay(t, 1)
	tu := startWithGarbage(t, 4)
	testwait.Eventually(t, 10*time.Second, "an idle collection of a quiet heap holding garbage", func() bool { return tu.IdleCollections.Load() > 0 })
}

var garbage [][]byte

// pooled is a buffer parked in a sync.Pool; its finalizer counts it collected.
type pooled struct{ b []byte }

// Memory parked in sync.Pools after a burst (the connections' read buffers, up to 64 KiB
// each) survives one collection as the pools' victim cache, so a single idle collection
// leaves it: once the heap is quiet the idle check collects, and collects again while that
// freed a notable amount, whatever the GC percent (here the floor is below the live heap, so
// the percent is the base one) and whether or not a collection ran after the burst (then
// the heap holds no garbage, only the pools' victims).
func TestIdleLoopFreesPooledMemory(t *testing.T) {
	for _, gcAfter := range []bool{false, true} {
		t.Run(fmt.Sprintf("collection after the burst %v", gcAfter), func(t *testing.T) {
			testIdleLoopFreesPooledMemory(t, gcAfter)
		})
	}
}

func testIdleLoopFreesPooledMemory(t *testing.T, gcAfter bool) {
	shortDecay(t, 1)
	t.Setenv("GOGC", "")
	before := debug.SetGCPercent(100)
	defer debug.SetGCPercent(before)
	tu := Start(1) // a floor below any live heap: the percent stays at its base
	if tu == nil {
		t.Fatal("Start returned nil")
	}
	defer tu.Stop()
	live := make([][]byte, 0, 512) // a 32 MiB live heap: no collection starts below 64 MiB
	for range 512 {
		live = append(live, make([]byte, 64<<10))
	}
	runtime.GC()
	var pool sync.Pool
	var collected atomic.Int32
	const n = 128 // 8 MiB of 64 KiB buffers
	for range n {
		p := &pooled{b: make([]byte, 64<<10)}
		runtime.SetFinalizer(p, func(*pooled) { collected.Add(1) })
		pool.Put(p)
	}
	garbage = nil
	for range 128 {
		garbage = append(garbage, make([]byte, 64<<10)) // 8 MiB left behind by the burst
	}
	garbage = nil
	if gcAfter {
		runtime.GC() // the garbage goes; the pooled buffers are now the pool's victims
	}
	deadline := time.Now().Add(15 * time.Second)
	for collected.Load() < n/2 {
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d pooled buffers collected within 15 s of a quiet heap (idle collections %d)", collected.Load(), n, tu.IdleCollections.Load())
		}
		time.Sleep(50 * time.Millisecond)
	}
	runtime.KeepAlive(live)
}

// A steady light load — allocation well below the floor per second, so no collection runs
// for many seconds — is not idleness: the idle check must not force a collection (and give
// the pages back) at every interval while the load lasts, only once it stops.
func TestIdleLoopLeavesBusyHeapAlone(t *testing.T) {
	shortDecay(t, 1)
	t.Setenv("GOGC", "")
	before := debug.SetGCPercent(100)
	defer debug.SetGCPercent(before)
	tu := Start(1 << 30) // no collection starts below 1 GiB
	if tu == nil {
		t.Fatal("Start returned nil")
	}
	defer tu.Stop()
	runtime.GC()
	runtime.GC() // the raised percent is in force now
	// 64 KiB every 10 ms (about 6 MiB/s) for 3.5 idle checks: over 20 MiB of garbage.
	for end := time.Now().Add(3500 * time.Millisecond); time.Now().Before(end); {
		garbage = append(garbage[:0], make([]byte, 64<<10))
		time.Sleep(10 * time.Millisecond)
	}
	if n := tu.IdleCollections.Load(); n != 0 {
		t.Fatalf("%d idle collections while the heap allocated about 6 MiB/s", n)
	}
	garbage = nil
	testwait.Eventually(t, 10*time.Second, "an idle collection after the load stopped", func() bool { return tu.IdleCollections.Load() > 0 })
}

// The floor is the heap goal the runtime ends up with, not a percent computed from a live
// figure that differs from the heap the runtime multiplies (which also counts stacks and
// globals, and rounds): with a live heap of a few MiB, the goal after collections is within
// an eighth of the floor. An overshoot doubles the memory the floor lets garbage take, and
// the pages to fault in again after each idle release.
func TestHeapGoalIsTheFloor(t *testing.T) {
	t.Setenv("GOGC", "")
	before := debug.SetGCPercent(100)
	defer debug.SetGCPercent(before)
	const floor = 64 << 20
	tu := Start(floor)
	if tu == nil {
		t.Fatal("Start returned nil")
	}
	defer tu.Stop()
	for _, liveMiB := range []int{1, 3, 6} {
		keep := make([][]byte, 0, liveMiB*16)
		for range liveMiB * 16 {
			keep = append(keep, make([]byte, 64<<10))
		}
		for range 3 {
			runtime.GC()
			runtime.GC() // the finalizer of the first cycle's sentinel runs after it
		}
		time.Sleep(10 * time.Millisecond)
		s := []metrics.Sample{{Name: "/gc/heap/goal:bytes"}}
		metrics.Read(s)
		goal := s[0].Value.Uint64()
		if goal < floor-floor/8 || goal > floor+floor/8 {
			t.Errorf("live heap %d MiB: heap goal %.1f MiB, want %d MiB ± an eighth (percent %d)", liveMiB, float64(goal)/(1<<20), floor>>20, tu.Percent())
		}
		runtime.KeepAlive(keep)
	}
}

// shortDecay sets idleDecay to n quiet checks for the tuners the test starts.
func shortDecay(t *testing.T, n int) {
	old := idleDecay
	idleDecay = n
	t.Cleanup(func() { idleDecay = old })
}

// Garbage on a quiet heap is kept until the heap has been quiet for idleDecay checks in a
// row, then collected and given back: a broker serving bursts a few seconds apart does not
// fault its pages in again for each burst.
func TestIdleLoopWaitsForTheDecay(t *testing.T) {
	shortDecay(t, 4)
	tu := startWithGarbage(t, 16)
	start := time.Now()
	for tu.IdleCollections.Load() == 0 {
		if time.Since(start) > 15*time.Second {
			t.Fatal("no idle collection within 15 s of a quiet heap holding garbage")
		}
		time.Sleep(20 * time.Millisecond)
	}
	// The first check comes one interval after Start; the heap is quiet from the second.
	if waited := time.Since(start); waited < 3*idleCheck {
		t.Fatalf("idle collection %v after the garbage was left, before the decay of 4 quiet checks", waited)
	}
}

// startWithGarbage starts a tuner with a 1 GiB floor (stopped at the test's end), waits until
// its raised percent is in force, and leaves mib MiB of garbage on the heap.
func startWithGarbage(t *testing.T, mib int) *Tuner {
	t.Helper()
	t.Setenv("GOGC", "")
	before := debug.SetGCPercent(100)
	t.Cleanup(func() { debug.SetGCPercent(before) })
	tu := Start(1 << 30)
	if tu == nil {
		t.Fatal("Start returned nil")
	}
	t.Cleanup(tu.Stop)
	runtime.GC()
	runtime.GC() // the raised percent is in force now
	garbage = nil
	for range mib * 16 {
		garbage = append(garbage, make([]byte, 64<<10))
	}
	garbage = nil
	return tu
}
