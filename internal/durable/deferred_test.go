package durable

import (
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/titan-broker/titan/internal/dest"
	"github.com/titan-broker/titan/internal/message"
	"github.com/titan-broker/titan/internal/store"
	"github.com/titan-broker/titan/internal/store/memstore"
)

// downStore is a memstore whose writes a switch turns into the refusals of a store that is
// down (as pebblestore's, tested in that package with injected disk faults).
type downStore struct {
	*memstore.Store
	down atomic.Bool
}

func (s *downStore) Delete(stream string, seqs ...uint64) error {
	if s.down.Load() {
		return &store.UnavailableError{Cause: syscall.ENOSPC}
	}
	return s.Store.Delete(stream, seqs...)
}

func (s *downStore) Health() store.Health {
	if s.down.Load() {
		return store.Health{State: store.StateDown, Cause: syscall.ENOSPC}
	}
	return s.Store.Health()
}

// Deletes that a down store refuses are kept and applied on the next delete once it is OK
// again, so messages acknowledged during the outage do not come back after a restart.
func TestDeletesDeferredWhileStoreDown(t *testing.T) {
	st := &downStore{Store: memstore.New()}
	l := New(st, nil)
	id := dest.Identity{Group: "default", Pattern: dest.PatternQueues, Channel: "q"}
	var msgs []*message.Message
	for i := range 5 {
		m := &message.Message{ID: strconv.Itoa(i), Destination: "/queue/q", Body: []byte("x")}
		if err := l.Persist(id, m); err != nil {
			t.Fatal(err)
		}
		msgs = append(msgs, m)
	}
	count := func() int64 {
		ss, err := st.Streams()
		if err != nil || len(ss) != 1 {
			t.Fatalf("Streams: %v %v", ss, err)
		}
		return ss[0].Count
	}
	st.down.Store(true)
	l.Retire(id, msgs[:3], nil)
	l.Forget(id, msgs[3])
	if got := l.DeferredDeletes.Load(); got != 4 {
		t.Fatalf("DeferredDeletes = %d, want 4", got)
	}
	if count() != 5 {
		t.Fatal("deleted while the store was down")
	}
	st.down.Store(false)
	l.Retire(id, msgs[4:], nil)
	if n := count(); n != 0 {
		t.Fatalf("%d records left after the store came back, want 0", n)
	}
	if got := l.Deleted.Load(); got != 5 {
		t.Fatalf("Deleted = %d, want 5", got)
	}
}

// notifyStore is a downStore whose Health announces each state change (Changed), as
// pebblestore's does.
type notifyStore struct {
	downStore
	mu      sync.Mutex
	changed chan struct{}
}

func (s *notifyStore) set(down bool) {
	s.mu.Lock()
	s.down.Store(down)
	close(s.changed)
	s.changed = make(chan struct{})
	s.mu.Unlock()
}

func (s *notifyStore) Health() store.Health {
	s.mu.Lock()
	defer s.mu.Unlock()
	h := s.downStore.Health()
	h.Changed = s.changed
	return h
}

// Deletes refused while the store was down are applied as soon as it is OK again, with no
// later delete to carry them (issue 30: after a read-only start and a remount, a clean
// restart delivered every acknowledged message again).
func TestDeferredDeletesAppliedWhenStoreReturns(t *testing.T) {
	st := &notifyStore{downStore: downStore{Store: memstore.New()}, changed: make(chan struct{})}
	l := New(st, nil)
	id := dest.Identity{Group: "default", Pattern: dest.PatternQueues, Channel: "q"}
	var msgs []*message.Message
	for i := range 3 {
		m := &message.Message{ID: strconv.Itoa(i), Destination: "/queue/q", Body: []byte("x")}
		if err := l.Persist(id, m); err != nil {
			t.Fatal(err)
		}
		msgs = append(msgs, m)
	}
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() { defer close(done); l.WatchStore(stop) }()
	defer func() { close(stop); <-done }()
	st.set(true)
	l.Retire(id, msgs, nil)
	if l.DeferredDeletes.Load() != 3 {
		t.Fatalf("DeferredDeletes = %d, want 3", l.DeferredDeletes.Load())
	}
	st.set(false)
	deadline := time.Now().Add(10 * time.Second)
	for l.Deleted.Load() != 3 {
		if time.Now().After(deadline) {
			t.Fatalf("Deleted = %d after the store came back, want 3 without another delete", l.Deleted.Load())
		}
		time.Sleep(time.Millisecond)
	}
	ss, _ := st.Streams()
	if len(ss) != 1 || ss[0].Count != 0 {
		t.Fatalf("streams after the store came back: %+v", ss)
	}
}
