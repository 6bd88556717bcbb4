// Package clock is the time port of the components that own timers: the current time and
// one-shot timers, injectable so that tests can see every timer armed and fire it at will
// (production uses Real). It has no state of its own.
package clock

import (
	"sync"
	"time"
)

// Timer is an armed one-shot timer.
type Timer interface {
	// Stop prevents the timer from firing; it reports whether it did (false: already fired
	// or stopped). Like time.Timer.Stop, it does not wait for a callback already running.
	Stop() bool
}

// Clock tells the time and arms timers. Implementations are safe for concurrent use.
type Clock interface {
	// Now returns the current time.
	Now() time.Time
	// AfterFunc calls f in its own goroutine once d has elapsed, unless stopped first.
	AfterFunc(d time.Duration, f func()) Timer
}

// Real is the system clock.
var Real Clock = real{}

type real struct{}

func (real) Now() time.Time                            { return time.Now() }
func (real) AfterFunc(d time.Duration, f func()) Timer { return time.AfterFunc(d, f) }

// WithNow returns c with its time taken from now (c's timers are kept); nil now returns c.
func WithNow(c Clock, now func() time.Time) Clock {
	if now == nil {
		return c
	}
	return withNow{c, now}
}

type withNow struct {
	Clock
	now func() time.Time
}

func (w withNow) Now() time.Time { return w.now() }

// NowFunc returns c's Now as a plain function, without the interface call when c is Real
// or was made by WithNow (hot paths read the time several times per message).
func NowFunc(c Clock) func() time.Time {
	switch c := c.(type) {
	case real:
		return time.Now
	case withNow:
		return c.now
	}
	return c.Now
}

// Callbacks tracks the running callbacks of the timers one component arms, so that its
// Close can refuse new ones and wait for running ones: the component that starts a timer
// stops it, and nothing a timer fires outlives the component's Close. The zero value is
// ready; safe for concurrent use.
type Callbacks struct {
	mu     sync.Mutex // guards closed and orders Add against Close's Wait
	closed bool
	wg     sync.WaitGroup
}

// Enter reports whether a callback may run (false after Close); on true, Leave must follow.
func (c *Callbacks) Enter() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return false
	}
	c.wg.Add(1)
	return true
}

// Leave ends a callback that Enter admitted.
func (c *Callbacks) Leave() { c.wg.Done() }

// Close refuses later callbacks and waits for running ones. Idempotent.
func (c *Callbacks) Close() {
	c.mu.Lock()
	c.closed = true
	c.mu.Unlock()
	c.wg.Wait()
}
