// Package testwait is the one polling helper of Titan's tests: Eventually waits for a
// condition that another goroutine or process makes true (a queue drained, a node elected),
// failing the test with what it waited for when a bound passes. It is test support: only
// _test.go files import it.
//
// Eventually is for conditions that hold from some moment on. To prove that something did
// not happen, use a barrier instead (brokertest.Client.ExpectQuiet): waiting a while and
// seeing nothing proves nothing on a slow machine.
package testwait

import (
	"testing"
	"time"
)

// firstPoll and maxPoll bound the interval between two evaluations of the condition: it
// starts at firstPoll and doubles up to maxPoll, so a condition that holds at once costs
// almost nothing and a long wait does not spin.
const (
	firstPoll = time.Millisecond
	maxPoll   = 50 * time.Millisecond
)

// Eventually evaluates cond until it returns true, and fails tb (Fatalf, naming what and
// total) once total has passed without it. cond runs on the calling goroutine, first at
// once, then at intervals growing from 1 ms to 50 ms; it must not block for long.
func Eventually(tb testing.TB, total time.Duration, what string, cond func() bool) {
	tb.Helper()
	deadline := time.Now().Add(total)
	poll := firstPoll
	for !cond() {
		if time.Now().After(deadline) {
			tb.Fatalf("not within %v: %s", total, what)
		}
		time.Sleep(poll)
		poll = min(2*poll, maxPoll)
	}
}
