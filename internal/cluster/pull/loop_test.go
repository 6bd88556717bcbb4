package pull

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// msg is a pulled message (only its identity matters here).
type msg struct {
	jetstream.Msg
	n int
}

func (m *msg) InProgress() error { return nil }

// batch is one Fetch answer: msgs, then the channel closes.
type batch struct{ ch chan jetstream.Msg }

func (b batch) Messages() <-chan jetstream.Msg { return b.ch }
func (b batch) Error() error                   { return nil }

// consumer answers the first Fetch with n messages and every later one with none.
type consumer struct {
	jetstream.Consumer
	n       int
	fetched bool
}

func (c *consumer) Fetch(int, ...jetstream.FetchOpt) (jetstream.MessageBatch, error) {
	ch := make(chan jetstream.Msg, c.n)
	if !c.fetched {
		for i := range c.n {
			ch <- &msg{n: i}
		}
		c.fetched = true
	} else {
		time.Sleep(time.Millisecond) // an empty pull waits on the server
	}
	close(ch)
	return batch{ch}, nil
}

func (c *consumer) Info(context.Context) (*jetstream.ConsumerInfo, error) { return nil, nil }

// handler takes messages only while open; rounds gets a value each time Credit is asked.
type handler struct {
	mu       sync.Mutex
	open     bool
	attempts int
	got      []int
	rounds   chan struct{} // a value per Credit call, until quit closes
	quit     chan struct{}
}

func (h *handler) Credit() int {
	select {
	case h.rounds <- struct{}{}:
	case <-h.quit:
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.got) > 0 && !h.open {
		return 0
	}
	return MaxBatch
}

func (h *handler) Deliver(jm jetstream.Msg) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.attempts++
	if !h.open {
		return false
	}
	h.got = append(h.got, jm.(*msg).n)
	return true
}

func (h *handler) Done() bool                                   { return false }
func (h *handler) InFlight(dst []jetstream.Msg) []jetstream.Msg { return dst }

// A handler that cannot take the head of a pull is asked again once something changed (a
// Kick), not once per message arriving behind it; once it can, it gets every message in
// pull order, exactly once.
func TestLoopRetriesHeadOnKickOnly(t *testing.T) {
	const n = 50
	h := &handler{rounds: make(chan struct{}), quit: make(chan struct{})}
	l := New(&consumer{n: n}, h, true, time.Hour)
	go l.Run()
	<-h.rounds // round 1: pulls n, the head is refused
	<-h.rounds // round 2: the head refused again; the loop now waits for a Kick
	h.mu.Lock()
	if h.attempts != 2 {
		t.Errorf("Deliver called %d times for a refused head behind %d arrivals, want 2 (one per round)", h.attempts, n-1)
	}
	h.open = true
	h.mu.Unlock()
	l.Kick()
	<-h.rounds // round 3: everything delivered
	close(h.quit)
	l.Stop()
	if want := fmt.Sprint(seq(n)); fmt.Sprint(h.got) != want {
		t.Errorf("delivered %v, want %v", h.got, want)
	}
	if held := l.Held(); len(held) != 0 {
		t.Errorf("Held after delivering everything = %d messages, want 0", len(held))
	}
}

// What the loop pulled and the handler never took is handed back by Held, in pull order.
func TestLoopHeldInPullOrder(t *testing.T) {
	const n = 5
	h := &handler{rounds: make(chan struct{}), quit: make(chan struct{})}
	l := New(&consumer{n: n}, h, true, time.Hour)
	go l.Run()
	<-h.rounds
	<-h.rounds
	close(h.quit)
	l.Stop()
	var got []int
	for _, m := range l.Held() {
		got = append(got, m.(*msg).n)
	}
	if want := fmt.Sprint(seq(n)); fmt.Sprint(got) != want {
		t.Errorf("Held = %v, want %v", got, want)
	}
}

func seq(n int) []int {
	s := make([]int, n)
	for i := range s {
		s[i] = i
	}
	return s
}

// feed answers every Fetch with a full batch of the same message (preallocated channels).
type feed struct {
	jetstream.Consumer
	m jetstream.Msg
}

func (f *feed) Fetch(n int, _ ...jetstream.FetchOpt) (jetstream.MessageBatch, error) {
	ch := make(chan jetstream.Msg, n)
	for range n {
		ch <- f.m
	}
	close(ch)
	return batch{ch}, nil
}

// sink takes every message and says when it has had want of them.
type sink struct {
	n, want int
	done    chan struct{}
}

func (s *sink) Credit() int { return MaxBatch }
func (s *sink) Deliver(jetstream.Msg) bool {
	if s.n++; s.n == s.want {
		close(s.done)
	}
	return true
}
func (s *sink) Done() bool                                   { return false }
func (s *sink) InFlight(dst []jetstream.Msg) []jetstream.Msg { return dst }

// BenchmarkLoopDeliver is the loop's own cost per pulled message handed on (the fake
// Fetch's channel included).
func BenchmarkLoopDeliver(b *testing.B) {
	b.ReportAllocs()
	s := &sink{want: b.N, done: make(chan struct{})}
	l := New(&feed{m: &msg{}}, s, true, time.Hour)
	b.ResetTimer()
	go l.Run()
	<-s.done
	b.StopTimer()
	l.Stop()
}
