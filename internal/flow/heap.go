package flow

import (
	"math"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Heap is the broker-wide pair of heap watermarks (Titan's flow-control.heap): when the Go
// heap passes High every producer pauses before publishing (Congested is not nil) until it
// falls to Low. Update feeds it samples; Run samples the runtime on a ticker. Safe for
// concurrent use; Congested is lock-free.
type Heap struct {
	// High and Low are the watermarks in bytes of heap objects (0 High: never congested).
	High, Low uint64

	mu     sync.Mutex
	resume atomic.Pointer[chan struct{}] // not nil while over High; closed at Low
	// Trips counts crossings of the high watermark.
	Trips atomic.Uint64
}

// HeapLimit returns the byte limit heap fractions refer to: max when it is > 0; none (0)
// when it is < 0; else the Go memory limit (GOMEMLIMIT or debug.SetMemoryLimit), else half
// of the memory available to the process (AvailableMemory; Artemis's global-max-size
// defaults to half the heap in the same way), so that what clients make the broker hold is
// bounded out of the box; 0 when that is unknown.
func HeapLimit(max int64) uint64 {
	switch {
	case max > 0:
		return uint64(max)
	case max < 0:
		return 0
	}
	if l := debug.SetMemoryLimit(-1); l > 0 && l != math.MaxInt64 {
		return uint64(l)
	}
	return AvailableMemory(os.ReadFile) / 2
}

// AvailableMemory returns the memory available to the process in bytes, read through
// readFile: the cgroup v2 (memory.max) or v1 (memory.limit_in_bytes) limit when one is set
// and below physical memory, else MemTotal of /proc/meminfo; 0 when none can be read (not
// Linux).
func AvailableMemory(readFile func(string) ([]byte, error)) uint64 {
	var total uint64
	if b, err := readFile("/proc/meminfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if rest, ok := strings.CutPrefix(line, "MemTotal:"); ok {
				f := strings.Fields(rest)
				if len(f) == 2 && f[1] == "kB" {
					if kb, err := strconv.ParseUint(f[0], 10, 64); err == nil {
						total = kb << 10
					}
				}
				break
			}
		}
	}
	for _, path := range []string{"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"} {
		b, err := readFile(path)
		if err != nil {
			continue
		}
		v, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64) // "max": no limit
		if err == nil && v > 0 && (total == 0 || v < total) {
			return v
		}
		break
	}
	return total
}

// NewHeap returns watermarks at the fractions high and low of limit bytes (low is clamped
// below high). A zero limit or high fraction makes a Heap that is never congested.
func NewHeap(limit uint64, high, low float64) *Heap {
	if limit == 0 || high <= 0 {
		return &Heap{}
	}
	if low <= 0 || low >= high {
		low = high * 0.8
	}
	return &Heap{High: uint64(float64(limit) * high), Low: uint64(float64(limit) * low)}
}

// Update applies one sample of heap bytes and reports whether it changed the state.
func (h *Heap) Update(bytes uint64) bool {
	if h.High == 0 {
		return false
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	cur := h.resume.Load()
	switch {
	case cur == nil && bytes > h.High:
		ch := make(chan struct{})
		h.resume.Store(&ch)
		h.Trips.Add(1)
		return true
	case cur != nil && bytes <= h.Low:
		h.resume.Store(nil)
		close(*cur)
		return true
	}
	return false
}

// Congested returns nil under the watermarks, else a channel closed when the heap falls to
// Low (or Release is called).
func (h *Heap) Congested() <-chan struct{} {
	if p := h.resume.Load(); p != nil {
		return *p
	}
	return nil
}

// Release ends a congestion (shutdown): every waiting producer continues.
func (h *Heap) Release() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if cur := h.resume.Load(); cur != nil {
		h.resume.Store(nil)
		close(*cur)
	}
}

// heapMetric is the runtime/metrics sample of heap object bytes.
const heapMetric = "/memory/classes/heap/objects:bytes"

// HeapBytes returns the bytes of live and not-yet-swept heap objects (runtime/metrics; no
// stop-the-world).
func HeapBytes() uint64 {
	s := []metrics.Sample{{Name: heapMetric}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return s[0].Value.Uint64()
}

// forceGCEvery is how often Run forces a garbage collection while the heap is over its
// high watermark and not yet back at the low one. Producers are paused then, so little is
// allocated and the collector may not run on its own for minutes: the heap sample (live
// plus not yet swept objects) would stay high after consumers drained what filled it, and
// the producers would stay paused. A forced collection on a paused broker is cheap.
const forceGCEvery = time.Second

// Run samples HeapBytes every interval until stop closes; onChange (may be nil) is called
// after each state change with the state now (true: over the high watermark). While over
// the high watermark it forces a collection at most every forceGCEvery (see there).
func (h *Heap) Run(stop <-chan struct{}, interval time.Duration, onChange func(over bool, bytes uint64)) {
	if h.High == 0 {
		return
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	defer h.Release()
	var lastGC time.Time
	for {
		select {
		case <-stop:
			return
		case <-t.C:
			b := HeapBytes()
			if h.Congested() != nil && b > h.Low && time.Since(lastGC) >= forceGCEvery {
				runtime.GC()
				lastGC = time.Now()
				b = HeapBytes()
			}
			if h.Update(b) && onChange != nil {
				onChange(h.Congested() != nil, b)
			}
		}
	}
}
