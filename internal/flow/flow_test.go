package flow

import (
	"sync"
	"testing"
	"time"

	"github.com/titan-broker/titan/internal/testwait"
)

func closed(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// The watermarks have hysteresis: congested past High, released only at Low.
func TestOutboundHysteresis(t *testing.T) {
	o := NewOutbound(100, 40, 0, nil)
	if o.Grow(100) || o.Congested() != nil {
		t.Fatal("at the high watermark is not over it")
	}
	if !o.Grow(1) {
		t.Fatal("past the high watermark must congest")
	}
	c := o.Congested()
	if c == nil || closed(c) {
		t.Fatal("congested connection must hand out an open channel")
	}
	if o.Grow(500) {
		t.Fatal("already congested: no second crossing")
	}
	if o.Shrink(560) || closed(c) { // 41 left: between the marks
		t.Fatal("released above the low watermark")
	}
	if o.Congested() != c {
		t.Fatal("still congested: same channel")
	}
	if !o.Shrink(1) || !closed(c) || o.Congested() != nil {
		t.Fatal("at the low watermark the producers must be released")
	}
	if !o.Grow(100) || o.Congested() == c {
		t.Fatal("a new crossing needs a new channel")
	}
}

// A single write larger than the high watermark still goes in (the owner queues it); it only
// congests.
func TestOutboundSingleMessageOverHigh(t *testing.T) {
	o := NewOutbound(10, 5, 0, nil)
	if !o.Grow(1000) || o.Bytes() != 1000 {
		t.Fatal("a message over the watermark is queued and congests")
	}
	if !o.Shrink(1000) {
		t.Fatal("written: released")
	}
}

// Close releases the waiters and makes later writes never congest.
func TestOutboundClose(t *testing.T) {
	o := NewOutbound(10, 5, time.Hour, func() {})
	o.Grow(20)
	c := o.Congested()
	o.Close()
	if !closed(c) || o.Congested() != nil {
		t.Fatal("close must release the producers")
	}
	if o.Grow(100) {
		t.Fatal("closed: no congestion")
	}
	o.Close() // idempotent
}

// The slow-consumer timer fires only while the queue is over and has not shrunk; progress
// re-arms it.
func TestOutboundSlowConsumer(t *testing.T) {
	var mu sync.Mutex
	fired := make(chan bool, 4)
	var o *Outbound
	o = NewOutbound(10, 5, 20*time.Millisecond, func() {
		mu.Lock()
		defer mu.Unlock()
		fired <- o.CheckSlow()
	})
	mu.Lock()
	o.Grow(30)
	mu.Unlock()
	// The first check sees no progress since arming: slow.
	if !<-fired {
		t.Fatal("no progress over the timeout must be a slow consumer")
	}
	// Progress re-arms: the next check after shrinking (still over) is not slow.
	mu.Lock()
	o.Shrink(30)
	o.Grow(30) // released and congested again: timer armed from 30
	o.Shrink(2)
	mu.Unlock()
	if <-fired {
		t.Fatal("a queue that shrank is not slow")
	}
	if !<-fired {
		t.Fatal("no progress after the re-arm: slow")
	}
	mu.Lock()
	o.Shrink(28)
	mu.Unlock()
	select {
	case v := <-fired:
		t.Fatalf("timer must stop at the low watermark, fired %v", v)
	case <-time.After(60 * time.Millisecond):
	}
}

func TestStatsWaitCountsAndEnds(t *testing.T) {
	var st Stats
	open := make(chan struct{})
	done := make(chan bool)
	go func() { done <- st.Wait([]<-chan struct{}{nil, open}, nil, nil) }()
	testwait.Eventually(t, 5*time.Second, "producer paused", func() bool { return st.Paused.Load() == 1 })
	close(open)
	if !<-done || st.Pauses.Load() != 1 || st.Resumes.Load() != 1 || st.Paused.Load() != 0 {
		t.Fatalf("pause/resume counts: %d %d %d", st.Pauses.Load(), st.Resumes.Load(), st.Paused.Load())
	}
	// Nothing congested: no pause counted.
	if !st.Wait([]<-chan struct{}{open}, nil, nil) || st.Pauses.Load() != 1 {
		t.Fatal("a released channel must not count a pause")
	}
	// cancel ends a wait (the producer's connection closed).
	cancel := make(chan struct{})
	close(cancel)
	if st.Wait([]<-chan struct{}{make(chan struct{})}, cancel, nil) {
		t.Fatal("cancel must end the wait with false")
	}
	if st.Paused.Load() != 0 {
		t.Fatal("a cancelled pause is still resumed in the gauge")
	}
}

func TestHeapWatermarks(t *testing.T) {
	h := NewHeap(1000, 0.9, 0.7)
	if h.High != 900 || h.Low != 700 {
		t.Fatalf("marks %d %d", h.High, h.Low)
	}
	if h.Update(900) || h.Congested() != nil {
		t.Fatal("at the high mark is not over")
	}
	if !h.Update(901) {
		t.Fatal("over the high mark must congest")
	}
	c := h.Congested()
	if h.Update(800) || closed(c) {
		t.Fatal("between the marks stays congested")
	}
	if !h.Update(700) || !closed(c) || h.Congested() != nil {
		t.Fatal("at the low mark producers resume")
	}
	off := NewHeap(0, 0.9, 0.7)
	if off.Update(1<<62) || off.Congested() != nil {
		t.Fatal("no limit: heap watermarks off")
	}
	h.Update(1000)
	c = h.Congested()
	h.Release()
	if !closed(c) {
		t.Fatal("release (shutdown) must free the producers")
	}
	if HeapBytes() == 0 {
		t.Fatal("runtime heap sample missing")
	}
}

// BenchmarkOutboundGrowShrink is the per-frame cost flow control adds to a connection's
// writer path: one Grow when a frame is queued, one Shrink when it is written, and the
// Congested check.
func BenchmarkOutboundGrowShrink(b *testing.B) {
	o := NewOutbound(16<<20, 8<<20, 30*time.Second, func() {})
	b.ReportAllocs()
	for b.Loop() {
		o.Grow(1024)
		if o.Congested() != nil {
			b.Fatal("congested")
		}
		o.Shrink(1024)
	}
}
