package durable

import (
	"strconv"
	"sync/atomic"
	"syscall"
	"testing"

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
