package outbox

import (
	"sync"
	"sync/atomic"
	"time"
)

// Regulator defaults (reference 004: base 1 s, cap 30 s).
const (
	DefaultBase = time.Second
	DefaultMax  = 30 * time.Second
)

// Regulator is the feedback regulator of reference 004: Dropped → interval = min(max,
// interval × 2); Clean → interval = max(base, interval × 0.5), but only while a shed is
// outstanding. Safe for concurrent use.
type Regulator struct {
	base, max time.Duration

	mu       sync.Mutex
	interval time.Duration // guarded by mu
	splash   int           // sheds not yet eased back; guarded by mu

	// Sheds counts Dropped calls; Eases counts Clean calls that eased the interval back.
	Sheds atomic.Uint64
	Eases atomic.Uint64
}

// NewRegulator returns a regulator at base. Zero values take DefaultBase and DefaultMax.
func NewRegulator(base, max time.Duration) *Regulator {
	if base <= 0 {
		base = DefaultBase
	}
	if max < base {
		max = DefaultMax
	}
	return &Regulator{base: base, max: max, interval: base}
}

// Dropped records a shed and doubles the interval (capped at max).
func (r *Regulator) Dropped() {
	r.Sheds.Add(1)
	r.mu.Lock()
	r.splash++
	r.interval = min(r.max, r.interval*2)
	r.mu.Unlock()
}

// Clean records a clean delivery; while a shed is outstanding it halves the interval back
// toward base.
func (r *Regulator) Clean() {
	r.mu.Lock()
	if r.splash > 0 {
		r.splash--
		r.interval = max(r.base, r.interval/2)
		r.mu.Unlock()
		r.Eases.Add(1)
		return
	}
	r.mu.Unlock()
}

// Interval returns the current poll interval.
func (r *Regulator) Interval() time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.interval
}

// Shedding reports whether a shed is outstanding (the interval is above base because of it).
func (r *Regulator) Shedding() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.splash > 0
}
