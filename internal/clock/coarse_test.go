package clock

import (
	"testing"
	"time"

	"github.com/titan-broker/titan/internal/testwait"
	"go.uber.org/goleak"
)

// TestCoarse checks that a Coarse clock follows the system clock within a few resolutions
// while read, never goes backwards, stops its ticker when idle and restarts it on the next
// read, and that Stop ends it for good (later reads use the system clock).
func TestCoarse(t *testing.T) {
	defer goleak.VerifyNone(t)
	var c Coarse
	first := c.Now()
	if d := time.Since(first); d < 0 || d > time.Second {
		t.Fatalf("first read %v off the system clock", d)
	}
	if !c.running.Load() {
		t.Fatal("the first read did not start the ticker")
	}
	// It advances while read.
	testwait.Eventually(t, 5*time.Second, "the coarse time advances", func() bool { return c.Now().Sub(first) >= 5*time.Millisecond })
	last := c.Now()
	for range 1000 {
		now := c.Now()
		if now.Before(last) {
			t.Fatalf("went backwards: %v after %v", now, last)
		}
		last = now
	}
	// Idle: the ticker stops by itself.
	testwait.Eventually(t, 5*time.Second, "the idle ticker stops", func() bool { return !c.running.Load() })
	if d := time.Since(c.Now()); d < 0 || d > time.Second {
		t.Fatalf("read after the idle stop %v off the system clock", d)
	}
	if !c.running.Load() {
		t.Fatal("a read did not restart the ticker")
	}
	c.Stop()
	c.Stop() // idempotent
	if c.running.Load() {
		t.Fatal("running after Stop")
	}
	if d := time.Since(c.Now()); d < 0 || d > time.Second {
		t.Fatalf("read after Stop %v off the system clock", d)
	}
	if c.running.Load() {
		t.Fatal("a read after Stop restarted the ticker")
	}
}

// BenchmarkCoarseNow measures a read of a running Coarse clock, beside BenchmarkTimeNow.
func BenchmarkCoarseNow(b *testing.B) {
	var c Coarse
	defer c.Stop()
	b.ReportAllocs()
	for b.Loop() {
		c.Now()
	}
}

func BenchmarkTimeNow(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		time.Now()
	}
}
