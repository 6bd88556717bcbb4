package clock

import (
	"sync"
	"sync/atomic"
	"time"
)

// CoarseResolution is how often a Coarse clock's time is refreshed while it is read.
const CoarseResolution = time.Millisecond

// coarseIdleTicks is the number of refreshes without a read after which a Coarse clock's
// ticker stops (the next read restarts it): an idle broker wakes no goroutine.
const coarseIdleTicks = 100

// Coarse is a clock for the timestamps a hot path takes per message where a millisecond is
// precise enough (a message's broker timestamp, publish-to-deliver latency): Now is one atomic
// load of a time refreshed every CoarseResolution by a ticker goroutine, instead of a system
// clock read. The ticker runs only while the clock is read — it stops after 100 refreshes
// without a read, and the next Now starts it (and reads the system clock itself) — and Stop
// ends it. A Coarse time has no monotonic reading and may lag the system clock by about one
// resolution (more when the ticker is starved of CPU). The zero value is ready; safe for
// concurrent use.
type Coarse struct {
	nanos   atomic.Int64 // Unix nanoseconds of the last refresh
	read    atomic.Bool  // Now ran since the last refresh
	running atomic.Bool  // a ticker goroutine refreshes nanos

	mu      sync.Mutex // guards stopped and done
	stopped bool
	done    chan struct{} // closed when the running ticker goroutine ends; nil when none
	stop    chan struct{} // closed by Stop
}

// Now returns the time of the last refresh (the system clock's when no ticker runs). After
// Stop it reads the system clock.
func (c *Coarse) Now() time.Time {
	if !c.read.Load() {
		c.read.Store(true)
	}
	if !c.running.Load() {
		return c.start()
	}
	return time.Unix(0, c.nanos.Load())
}

// NowMilli is Now in Unix milliseconds.
func (c *Coarse) NowMilli() int64 { return c.Now().UnixMilli() }

// start reads the system clock and starts the ticker unless one runs or the clock is
// stopped.
func (c *Coarse) start() time.Time {
	now := time.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stopped || c.running.Load() {
		return now
	}
	if c.done != nil {
		<-c.done // the previous ticker is ending (it cleared running first)
	}
	if c.stop == nil {
		c.stop = make(chan struct{})
	}
	c.nanos.Store(now.UnixNano())
	c.done = make(chan struct{})
	c.running.Store(true)
	go c.tick(c.done, c.stop)
	return now
}

func (c *Coarse) tick(done, stop chan struct{}) {
	defer close(done)
	t := time.NewTicker(CoarseResolution)
	defer t.Stop()
	idle := 0
	for {
		select {
		case <-stop:
			c.running.Store(false)
			return
		case <-t.C:
			c.nanos.Store(time.Now().UnixNano()) // not the tick's time: the goroutine may run late
			if c.read.Swap(false) {
				idle = 0
				continue
			}
			if idle++; idle >= coarseIdleTicks {
				c.running.Store(false)
				return
			}
		}
	}
}

// Stop ends the ticker and waits for it; later reads use the system clock. Idempotent.
func (c *Coarse) Stop() {
	c.mu.Lock()
	if !c.stopped {
		c.stopped = true
		if c.stop != nil {
			close(c.stop)
		}
	}
	done := c.done
	c.mu.Unlock()
	if done != nil {
		<-done
	}
}
