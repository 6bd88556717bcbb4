package testwait

import (
	"sync/atomic"
	"testing"
	"time"
)

// TestEventuallyReturnsOnceTheConditionHolds checks that Eventually returns as soon as the
// condition holds, having evaluated it until then.
func TestEventuallyReturnsOnceTheConditionHolds(t *testing.T) {
	var calls atomic.Int32
	Eventually(t, 5*time.Second, "third call", func() bool { return calls.Add(1) == 3 })
	if n := calls.Load(); n != 3 {
		t.Fatalf("condition evaluated %d times, want 3", n)
	}
}

// fatalRecorder is a testing.TB whose Fatalf records the message and ends the goroutine, as
// testing.T's does.
type fatalRecorder struct {
	testing.TB
	msg string
}

func (f *fatalRecorder) Helper() {}
func (f *fatalRecorder) Fatalf(format string, args ...any) {
	f.msg = format
	panic(f)
}

// TestEventuallyFailsNamingWhatItWaitedFor checks that a condition that never holds fails
// the test with Fatalf once the bound has passed.
func TestEventuallyFailsNamingWhatItWaitedFor(t *testing.T) {
	rec := &fatalRecorder{TB: t}
	func() {
		defer func() {
			if r := recover(); r != rec {
				t.Fatalf("recovered %v, want the recorder's Fatalf", r)
			}
		}()
		Eventually(rec, 10*time.Millisecond, "never", func() bool { return false })
	}()
	if rec.msg == "" {
		t.Fatal("Eventually returned without failing")
	}
}
