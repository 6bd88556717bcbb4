// Package clock is the time port of the components that own timers: the current time and
// one-shot timers, injectable so that tests can see every timer armed and fire it at will
// (production uses Real). It has no state of its own.
package clock

import "time"

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
