package outbox

import (
	"sync"
	"testing"
	"time"

	"github.com/titan-broker/titan/internal/testwait"
)

func TestRegulatorDoublesOnShedAndEasesBack(t *testing.T) {
	r := NewRegulator(time.Second, 30*time.Second)
	want := []time.Duration{2, 4, 8, 16, 30, 30}
	for i, w := range want {
		r.Dropped()
		if got := r.Interval(); got != w*time.Second {
			t.Fatalf("after %d sheds: %v, want %v", i+1, got, w*time.Second)
		}
	}
	// Six sheds outstanding: each clean delivery halves toward the base, then stops.
	wantBack := []time.Duration{15 * time.Second, 7500 * time.Millisecond, 3750 * time.Millisecond, 1875 * time.Millisecond, time.Second, time.Second}
	for i, w := range wantBack {
		r.Clean()
		if got := r.Interval(); got != w {
			t.Fatalf("after %d cleans: %v, want %v", i+1, got, w)
		}
	}
	if r.Shedding() {
		t.Fatal("still shedding after easing back every shed")
	}
	r.Clean() // no shed outstanding: nothing changes
	if r.Interval() != time.Second || r.Eases.Load() != 6 || r.Sheds.Load() != 6 {
		t.Fatalf("interval %v eases %d sheds %d", r.Interval(), r.Eases.Load(), r.Sheds.Load())
	}
}

type fakeSink struct {
	mu        sync.Mutex
	got       []uint64
	shedEvery int
	calls     int
	busy      bool
}

func (s *fakeSink) Busy() bool { s.mu.Lock(); defer s.mu.Unlock(); return s.busy }
func (s *fakeSink) Deliver(seq uint64, _ []byte) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls++
	if s.shedEvery > 0 && s.calls%s.shedEvery == 0 {
		return false
	}
	s.got = append(s.got, seq)
	return true
}

func source(n uint64) Source {
	return func(from uint64, fn func(uint64, []byte) bool) error {
		if from == 0 {
			from = 1
		}
		for s := from; s <= n; s++ {
			if !fn(s, nil) {
				return nil
			}
		}
		return nil
	}
}

func TestPollerDeliversEverythingInOrderDespiteSheds(t *testing.T) {
	sink := &fakeSink{shedEvery: 7}
	reg := NewRegulator(time.Millisecond, 4*time.Millisecond)
	p := NewPoller(source(100), sink, reg, 0, 10)
	done := make(chan struct{})
	go func() { p.Run(); close(done) }()
	deadline := time.Now().Add(5 * time.Second)
	for {
		sink.mu.Lock()
		n := len(sink.got)
		sink.mu.Unlock()
		if n == 100 || time.Now().After(deadline) {
			break
		}
		p.Kick()
		time.Sleep(time.Millisecond)
	}
	p.Stop()
	<-done
	if len(sink.got) != 100 {
		t.Fatalf("delivered %d of 100", len(sink.got))
	}
	for i, s := range sink.got {
		if s != uint64(i+1) {
			t.Fatalf("order broken at %d: %d", i, s)
		}
	}
	if reg.Sheds.Load() == 0 {
		t.Fatal("sheds not reported to the regulator")
	}
}

func TestPollerSkipsFetchWhileSinkBusy(t *testing.T) {
	sink := &fakeSink{busy: true}
	p := NewPoller(source(5), sink, NewRegulator(time.Millisecond, 2*time.Millisecond), 0, 10)
	done := make(chan struct{})
	go func() { p.Run(); close(done) }()
	testwait.Eventually(t, 5*time.Second, "3 fetches skipped", func() bool { return p.Skipped.Load() >= 3 })
	if p.Fetches.Load() != 0 || len(sink.got) != 0 {
		t.Fatal("fetched while the sink was busy")
	}
	sink.mu.Lock()
	sink.busy = false
	sink.mu.Unlock()
	testwait.Eventually(t, 5*time.Second, "5 delivered", func() bool {
		sink.mu.Lock()
		defer sink.mu.Unlock()
		return len(sink.got) == 5
	})
	p.Stop()
	<-done
}

// busyAfterSink turns busy after every every-th delivery and idle again at the next look
// (a writer over its backlog that drains at once).
type busyAfterSink struct {
	mu    sync.Mutex
	every int
	busy  bool
	got   []uint64
}

func (s *busyAfterSink) Busy() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	b := s.busy
	if b && len(s.got) > 0 {
		s.busy = false // drained by the next look after the one that saw it busy
	}
	return b
}

func (s *busyAfterSink) Deliver(seq uint64, _ []byte) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.got = append(s.got, seq)
	s.busy = len(s.got)%s.every == 0
	return true
}

// A fetch cut short because the sink became busy is followed up after BusyRetry, not after
// the regulator's interval: nothing else may kick the poller (the publisher is done).
func TestPollerResumesAfterBusyStopWithoutKick(t *testing.T) {
	sink := &busyAfterSink{every: 5}
	p := NewPoller(source(40), sink, NewRegulator(time.Hour, time.Hour), 0, 10)
	done := make(chan struct{})
	go func() { p.Run(); close(done) }()
	deadline := time.Now().Add(10 * time.Second)
	for {
		sink.mu.Lock()
		n := len(sink.got)
		sink.mu.Unlock()
		if n == 40 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("delivered %d of 40 without a kick: stuck behind the regulator's interval", n)
		}
		time.Sleep(time.Millisecond)
	}
	p.Stop()
	<-done
	for i, s := range sink.got {
		if s != uint64(i+1) {
			t.Fatalf("order broken at %d: %d", i, s)
		}
	}
}

// Offer delivers the cursor's record on the caller's goroutine and moves the cursor; it
// refuses (the caller kicks instead) any other record, a busy sink, an outstanding shed, a
// running fetch and a stopped poller, and counts a refused delivery as a shed.
func TestOfferDeliversOnlyTheNextRecordOfAnIdlePoller(t *testing.T) {
	sink := &fakeSink{}
	p := NewPoller(source(0), sink, NewRegulator(time.Hour, time.Hour), 5, 0)
	deliver := func(seq uint64) func() bool { return func() bool { return sink.Deliver(seq, nil) } }
	if p.Offer(6, deliver(6)) {
		t.Fatal("delivered 6 with the cursor at 5")
	}
	if !p.Offer(5, deliver(5)) || p.Cursor() != 6 {
		t.Fatalf("5 not delivered at the cursor (cursor now %d)", p.Cursor())
	}
	sink.busy = true
	if p.Offer(6, deliver(6)) {
		t.Fatal("delivered to a busy sink")
	}
	sink.busy = false
	p.deliverMu.Lock() // a fetch is running
	if p.Offer(6, deliver(6)) {
		t.Fatal("delivered while a fetch ran")
	}
	p.deliverMu.Unlock()
	if p.Offer(6, func() bool { return false }) || !p.Regulator().Shedding() || p.Cursor() != 6 {
		t.Fatalf("a refused delivery moved the cursor to %d or was not counted as a shed", p.Cursor())
	}
	if p.Offer(6, deliver(6)) {
		t.Fatal("delivered while a shed is outstanding")
	}
	p.Regulator().Clean()
	if !p.Offer(6, deliver(6)) {
		t.Fatal("6 not delivered once the shed eased")
	}
	p.Stop()
	p.Quiesce()
	if p.Offer(7, deliver(7)) {
		t.Fatal("delivered after Stop")
	}
	if got := sink.got; len(got) != 2 || got[0] != 5 || got[1] != 6 {
		t.Fatalf("sink got %v, want [5 6]", got)
	}
}
