package durable

import (
	"testing"
	"time"

	"github.com/titan-broker/titan/internal/dedup"
	"github.com/titan-broker/titan/internal/dest"
	"github.com/titan-broker/titan/internal/frame"
	"github.com/titan-broker/titan/internal/message"
	"github.com/titan-broker/titan/internal/store"
	"github.com/titan-broker/titan/internal/store/memstore"
)

// multiStore is a memstore that appends several streams in one call, and records each
// call's streams: the batches a crash keeps or loses as a whole.
type multiStore struct {
	*memstore.Store
	batches [][]string
}

func (s *multiStore) AppendMulti(entries []store.StreamRecords) ([]uint64, func() error, error) {
	var names []string
	firsts := make([]uint64, len(entries))
	for i, e := range entries {
		seq, err := s.Append(e.Stream, e.Records...)
		if err != nil {
			return nil, nil, err
		}
		firsts[i] = seq
		names = append(names, e.Stream)
	}
	s.batches = append(s.batches, names)
	return firsts, func() error { return nil }, nil
}

func dupMessage(dupID string) *message.Message {
	return &message.Message{ID: dupID, Destination: "/queue/q", TimestampMs: time.Now().UnixMilli(),
		Headers: []frame.Header{{Key: dedup.Header, Value: dupID}}, Persistent: true, DuplicateClaimed: true}
}

// TestDuplicateIDInMessageBatch: every way a message whose SEND claimed its id is persisted
// (Persist, PersistAsync, PersistLazy, a transaction's PersistAll) writes its duplicate id in
// the same store batch as the message, a message without one (or with the header but no
// claim) writes none, the stored ids load back, and Forget removes a refused message's id
// with it.
func TestDuplicateIDInMessageBatch(t *testing.T) {
	st := &multiStore{Store: memstore.New()}
	l := New(st, nil)
	l.DuplicateHeader = dedup.Header
	id := dest.Identity{Group: "default", Pattern: dest.PatternQueues, Channel: "q"}
	q := StreamName(id)

	if err := l.Persist(id, dupMessage("a")); err != nil {
		t.Fatal(err)
	}
	for i, persist := range []func(dest.Identity, *message.Message) (func() error, error){l.PersistAsync, l.PersistLazy} {
		w, err := persist(id, dupMessage(string(rune('b'+i))))
		if err != nil {
			t.Fatal(err)
		}
		if err := w(); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.PersistAll([]dest.Identity{id, id}, []*message.Message{dupMessage("d"), {ID: "plain", Destination: "/queue/q"}}); err != nil {
		t.Fatal(err)
	}
	refused := dupMessage("e")
	if err := l.Persist(id, refused); err != nil {
		t.Fatal(err)
	}
	if err := l.Persist(id, &message.Message{ID: "no-id", Destination: "/queue/q"}); err != nil { // no batch of ids
		t.Fatal(err)
	}
	// A copy carrying the header whose SEND claimed no id here (a durable subscription's
	// copy, a dead letter): no batch of ids, no stored id.
	claimed := dupMessage("f")
	if err := l.Persist(id, message.Rebuilt(claimed, claimed.Headers)); err != nil {
		t.Fatal(err)
	}
	want := [][]string{{q, duplicateIDStream}, {q, duplicateIDStream}, {q, duplicateIDStream}, {q, q, duplicateIDStream}, {q, duplicateIDStream}}
	if len(st.batches) != len(want) {
		t.Fatalf("batches %q, want %q", st.batches, want)
	}
	for i := range want {
		if len(st.batches[i]) != len(want[i]) || st.batches[i][len(want[i])-1] != duplicateIDStream {
			t.Fatalf("batch %d = %q, want %q", i, st.batches[i], want[i])
		}
	}
	l.Forget(id, refused)
	var got []string
	if err := l.LoadDuplicateIDs(func(key string, _ time.Time) { got = append(got, key) }); err != nil {
		t.Fatal(err)
	}
	wantKeys := []string{dedup.Key(id, "a"), dedup.Key(id, "b"), dedup.Key(id, "c"), dedup.Key(id, "d")}
	if len(got) != len(wantKeys) {
		t.Fatalf("stored ids %q, want %q", got, wantKeys)
	}
	for i := range got {
		if got[i] != wantKeys[i] {
			t.Fatalf("stored ids %q, want %q", got, wantKeys)
		}
	}
	// Trim drops the ids accepted before a time, oldest first.
	if err := l.TrimDuplicateIDs(time.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	got = got[:0]
	_ = l.LoadDuplicateIDs(func(key string, _ time.Time) { got = append(got, key) })
	if len(got) != 0 {
		t.Fatalf("after trim: %q", got)
	}
}
