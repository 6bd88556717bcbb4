package broker_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/titan-broker/titan/internal/broker"
	"github.com/titan-broker/titan/internal/brokertest"
	"github.com/titan-broker/titan/internal/clock"
	"github.com/titan-broker/titan/internal/config"
	"github.com/titan-broker/titan/internal/frame"
	"github.com/titan-broker/titan/internal/store"
	"github.com/titan-broker/titan/internal/store/memstore"
)

// fakeTimers records every timer the patterns arm; a test fires them at will.
type fakeTimers struct {
	mu     sync.Mutex
	timers []*fakeTimer
}

type fakeTimer struct {
	d       time.Duration
	f       func()
	stopped bool // guarded by fakeTimers.mu
	fired   bool
	owner   *fakeTimers
}

func (ft *fakeTimers) Now() time.Time { return time.Now() }

func (ft *fakeTimers) AfterFunc(d time.Duration, f func()) clock.Timer {
	ft.mu.Lock()
	defer ft.mu.Unlock()
	t := &fakeTimer{d: d, f: f, owner: ft}
	ft.timers = append(ft.timers, t)
	return t
}

func (t *fakeTimer) Stop() bool {
	t.owner.mu.Lock()
	defer t.owner.mu.Unlock()
	was := !t.stopped && !t.fired
	t.stopped = true
	return was
}

// armed returns how many timers were armed and how many of them are still live.
func (ft *fakeTimers) armed() (n, live int) {
	ft.mu.Lock()
	defer ft.mu.Unlock()
	for _, t := range ft.timers {
		if !t.stopped && !t.fired {
			live++
		}
	}
	return len(ft.timers), live
}

// fireAll runs every timer's callback, stopped or not, as a timer that fires late would.
func (ft *fakeTimers) fireAll() {
	ft.mu.Lock()
	ts := append([]*fakeTimer(nil), ft.timers...)
	for _, t := range ts {
		t.fired = true
	}
	ft.mu.Unlock()
	for _, t := range ts {
		t.f()
	}
}

// watchedStore records any call made to the store after Close.
type watchedStore struct {
	store.Store
	mu     sync.Mutex
	closed bool
	late   []string
}

func (s *watchedStore) touch(op string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		s.late = append(s.late, op)
	}
}

func (s *watchedStore) lateCalls() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.late...)
}

func (s *watchedStore) Append(stream string, records ...[]byte) (uint64, error) {
	s.touch("Append " + stream)
	return s.Store.Append(stream, records...)
}

func (s *watchedStore) Delete(stream string, seqs ...uint64) error {
	s.touch("Delete " + stream)
	return s.Store.Delete(stream, seqs...)
}

func (s *watchedStore) Scan(stream string, from uint64, fn func(uint64, []byte) bool) error {
	s.touch("Scan " + stream)
	return s.Store.Scan(stream, from, fn)
}

func (s *watchedStore) Streams() ([]store.StreamInfo, error) {
	s.touch("Streams")
	return s.Store.Streams()
}

func (s *watchedStore) Trim(stream string, before uint64) error {
	s.touch("Trim " + stream)
	return s.Store.Trim(stream, before)
}

func (s *watchedStore) SetMeta(key string, value []byte) error {
	s.touch("SetMeta " + key)
	return s.Store.SetMeta(key, value)
}

func (s *watchedStore) Meta(key string) ([]byte, bool, error) {
	s.touch("Meta " + key)
	return s.Store.Meta(key)
}

func (s *watchedStore) Close() error {
	s.mu.Lock()
	if s.closed {
		s.late = append(s.late, "Close again")
	}
	s.closed = true
	s.mu.Unlock()
	return s.Store.Close()
}

// After Shutdown — with time to spare, or with a context that had already expired — every
// timer the patterns armed (a scheduled message, a redelivery delay, a request timeout) is
// stopped, firing them anyway does nothing, and nothing touches the store once it is
// closed. goleak (TestMain) checks no goroutine outlives the test.
func TestShutdownStopsTimersAndLeavesTheStoreAlone(t *testing.T) {
	for _, expired := range []bool{false, true} {
		t.Run(fmt.Sprintf("ctx-expired=%v", expired), func(t *testing.T) {
			ft := &fakeTimers{}
			st := &watchedStore{Store: memstore.New()}
			cfg := brokertest.DefaultTestConfig()
			cfg.Servers[0].Port, cfg.Store.Type = 0, "memory"
			off := false
			cfg.Monitor.Enabled = &off
			delay := 60000
			cfg.AddressSettings = []config.AddressSetting{{Match: "redeliver", RedeliveryDelay: &delay}}
			b, err := broker.New(cfg, broker.Options{Store: st, Timers: ft})
			if err != nil {
				t.Fatal(err)
			}
			if err := b.Start(); err != nil {
				t.Fatal(err)
			}
			addr := b.Addrs()[0]

			c := brokertest.Connect(t, addr)
			// A scheduled message: its queue arms a timer for its due time.
			c.SendFrame("SEND", "later", "destination:/queue/later", "delay:60000", "receipt:1")
			c.Expect(frame.CmdReceipt, "receipt-id:1")
			// A NACKed message under a redelivery delay: another timer.
			c.SendFrame("SUBSCRIBE", "", "destination:/queue/redeliver", "id:r", "ack:client-individual", "receipt:2")
			c.Expect(frame.CmdReceipt, "receipt-id:2")
			c.SendFrame("SEND", "again", "destination:/queue/redeliver")
			m := c.Expect(frame.CmdMessage, "subscription:r")
			c.SendFrame("NACK", "", "id:"+m.Value("ack"), "receipt:4")
			c.Expect(frame.CmdReceipt, "receipt-id:4")
			// A request no responder answers: its timeout timer.
			resp := brokertest.Connect(t, addr)
			resp.SendFrame("SUBSCRIBE", "", "destination:/command/slow", "id:s", "receipt:5")
			resp.Expect(frame.CmdReceipt, "receipt-id:5")
			c.SendFrame("SEND", "do", "destination:/command/slow", "reply-to:/queue/replies", "timeout:60000", "receipt:6")
			resp.Expect(frame.CmdMessage, "destination:/command/slow")
			c.Expect(frame.CmdReceipt, "receipt-id:6")
			// A live events-store reader (an outbox poller goroutine).
			c.SendFrame("SUBSCRIBE", "", "destination:/events-store/log", "id:l", "start-position:first", "durable-name:d1", "receipt:7")
			c.Expect(frame.CmdReceipt, "receipt-id:7")
			c.SendFrame("SEND", "entry", "destination:/events-store/log")
			c.Expect(frame.CmdMessage, "subscription:l")

			if n, live := ft.armed(); n < 3 || live < 3 {
				t.Fatalf("%d timers armed, %d live; want the scheduled, redelivery and request timers", n, live)
			}
			ctx := context.Background()
			if expired {
				var cancel context.CancelFunc
				ctx, cancel = context.WithCancel(ctx)
				cancel()
			}
			err = b.Shutdown(ctx)
			if !expired && err != nil {
				t.Fatal(err)
			}
			if expired && err != nil && !strings.Contains(err.Error(), "context canceled") {
				t.Fatal(err)
			}
			if n, live := ft.armed(); live != 0 {
				t.Fatalf("%d of %d timers still armed after Shutdown", live, n)
			}
			ft.fireAll() // a timer that fires anyway must find its owner closed
			if late := st.lateCalls(); len(late) > 0 {
				t.Fatalf("store touched after it was closed: %v", late)
			}
			st.mu.Lock()
			closed := st.closed
			st.mu.Unlock()
			if !closed {
				t.Fatal("store not closed by Shutdown")
			}
		})
	}
}
