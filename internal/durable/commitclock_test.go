package durable

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/titan-broker/titan/internal/dest"
	"github.com/titan-broker/titan/internal/message"
	"github.com/titan-broker/titan/internal/store/memstore"
)

// clockStore is a memstore with asynchronous appends and a store.CommitClock whose landing
// time the test sets: each wait "lands" at landAt (0: no landing noted).
type clockStore struct {
	*memstore.Store
	landAt time.Duration
	last   atomic.Int64
}

func (s *clockStore) AppendAsync(stream string, records ...[]byte) (uint64, func() error, error) {
	seq, err := s.Append(stream, records...)
	return seq, func() error { s.last.Store(int64(s.landAt)); return err }, err
}

func (s *clockStore) LastCommit() time.Duration { return time.Duration(s.last.Load()) }

type observations struct{ v []float64 }

func (o *observations) Observe(v float64) { o.v = append(o.v, v) }

// The commit latency of an asynchronous append ends at the store's noted landing
// (store.CommitClock) when it has one, and at the end of the wait when it has none.
func TestCommitLatencyEndsAtTheStoresLanding(t *testing.T) {
	st := &clockStore{Store: memstore.New()}
	l := New(st, nil)
	obs := &observations{}
	l.CommitLatency = obs
	id := dest.Identity{Group: "default", Pattern: dest.PatternQueues, Channel: "q"}
	persist := func() {
		t.Helper()
		wait, err := l.PersistAsync(id, &message.Message{ID: "m", Destination: "/queue/q", Body: []byte("x")})
		if err != nil {
			t.Fatal(err)
		}
		if err := wait(); err != nil {
			t.Fatal(err)
		}
	}

	st.landAt = sinceEpoch() + time.Hour // a landing noted an hour after the append
	persist()
	if got := obs.v[0]; got < 3599 || got > 3601 {
		t.Fatalf("latency %.3fs, want the noted landing's (about 3600s)", got)
	}

	st.landAt = 0 // no landing noted: the wait's end is used
	st.last.Store(0)
	persist()
	if got := obs.v[1]; got <= 0 || got > 60 {
		t.Fatalf("latency %.6fs without a noted landing, want a small positive time", got)
	}
}
