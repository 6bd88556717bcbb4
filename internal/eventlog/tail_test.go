package eventlog

import (
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/titan-broker/titan/internal/delivery"
	"github.com/titan-broker/titan/internal/dest"
	"github.com/titan-broker/titan/internal/dispatch"
	"github.com/titan-broker/titan/internal/durable"
	"github.com/titan-broker/titan/internal/frame"
	"github.com/titan-broker/titan/internal/message"
	"github.com/titan-broker/titan/internal/store/memstore"
	"github.com/titan-broker/titan/internal/testwait"
)

func tailMsg(seq uint64, body int) *message.Message {
	return &message.Message{Sequence: seq, Body: make([]byte, body)}
}

// held returns the sequences in [from, to] the tail still has, and checks its byte count.
func held(t *testing.T, tl *tail, from, to uint64) []uint64 {
	t.Helper()
	var got []uint64
	bytes := 0
	for _, m := range tl.ring {
		if m != nil {
			bytes += len(m.Body)
		}
	}
	if bytes != tl.bytes {
		t.Fatalf("tail counts %d body bytes, holds %d", tl.bytes, bytes)
	}
	for s := from; s <= to; s++ {
		if m := tl.get(s); m != nil {
			got = append(got, s)
		}
	}
	return got
}

// The tail keeps the newest tailMinSize sequences; older ones are gone, and a sequence is
// never answered by a message with another sequence in its slot.
func TestTailKeepsTheNewestSequences(t *testing.T) {
	tl := &tail{}
	const n = 3*tailMinSize + 17
	for s := uint64(1); s <= n; s++ {
		tl.put(tailMsg(s, 10))
	}
	if tl.published() != n {
		t.Fatalf("published %d, want %d", tl.published(), n)
	}
	got := held(t, tl, 1, n)
	if len(got) != tailMinSize || got[0] != n-tailMinSize+1 || got[len(got)-1] != n {
		t.Fatalf("holds %d sequences %v..%v, want the newest %d", len(got), got[0], got[len(got)-1], tailMinSize)
	}
	if tl.get(n+1) != nil || tl.get(n-tailMinSize) != nil {
		t.Fatal("answered a sequence it does not hold")
	}
}

// A reader that had to read back a message that left the ring doubles it, up to
// tailMaxSize, keeping what it held; a miss of a message the ring still covers (too big,
// published late) does not.
func TestTailGrowsWhenAReaderMissesIt(t *testing.T) {
	tl := &tail{}
	const n = 2 * tailMinSize
	for s := uint64(1); s <= n; s++ {
		tl.put(tailMsg(s, 10))
	}
	tl.missed(n) // still covered
	if len(tl.ring) != tailMinSize {
		t.Fatalf("ring grew to %d on a miss it covers", len(tl.ring))
	}
	tl.missed(n - tailMinSize) // left the ring
	if len(tl.ring) != 2*tailMinSize {
		t.Fatalf("ring is %d after a miss, want %d", len(tl.ring), 2*tailMinSize)
	}
	if got := held(t, tl, 1, n); len(got) != tailMinSize || got[0] != n-tailMinSize+1 {
		t.Fatalf("after growing holds %d from %d, want the newest %d", len(got), got[0], tailMinSize)
	}
	for s := uint64(n + 1); s <= 2*n; s++ {
		tl.put(tailMsg(s, 10))
	}
	if got := held(t, tl, 1, 2*n); len(got) != 2*tailMinSize || got[len(got)-1] != 2*n {
		t.Fatalf("grown ring holds %d, want the newest %d", len(got), 2*tailMinSize)
	}
	for range 10 {
		tl.missed(1)
	}
	if len(tl.ring) != tailMaxSize {
		t.Fatalf("ring is %d after many misses, want at most %d", len(tl.ring), tailMaxSize)
	}
	held(t, tl, 1, 2*n)
}

// Bodies are bounded in all (tailMaxBytes, the oldest make room) and one by one
// (tailMaxBody: a bigger one is read from the store).
func TestTailBoundsItsBodies(t *testing.T) {
	tl := &tail{}
	const body = 8 << 10
	const n = 2 * tailMaxBytes / body
	for s := uint64(1); s <= n; s++ {
		tl.put(tailMsg(s, body))
	}
	got := held(t, tl, 1, n)
	if want := tailMaxBytes / body; len(got) != want || got[len(got)-1] != n {
		t.Fatalf("holds %v, want the newest %d", got, want)
	}
	tl.put(tailMsg(n+1, tailMaxBody+1))
	if tl.get(n+1) != nil || tl.published() != n+1 {
		t.Fatalf("a body over tailMaxBody was kept (published %d)", tl.published())
	}
	held(t, tl, 1, n+1)
}

// Publications out of order (two producers' pipelines) are kept while within the ring; one
// too far behind the newest is not, and a jump forgets everything older.
func TestTailOutOfOrderAndJumps(t *testing.T) {
	tl := &tail{}
	tl.put(tailMsg(100, 1))
	tl.put(tailMsg(102, 1))
	tl.put(tailMsg(101, 1))
	tl.put(tailMsg(99, 1)) // below the first published: the store has it
	if got := held(t, tl, 90, 110); len(got) != 3 || got[0] != 100 || got[2] != 102 {
		t.Fatalf("holds %v, want 100..102", got)
	}
	tl.put(tailMsg(100+5*tailMinSize, 1))
	if got := held(t, tl, 1, 100+5*tailMinSize); len(got) != 1 {
		t.Fatalf("after a jump holds %v, want only the newest", got)
	}
	tl.put(tailMsg(100+4*tailMinSize, 1)) // published late, out of the ring's reach
	if tl.get(100+4*tailMinSize) != nil {
		t.Fatal("kept a sequence a ring behind the newest")
	}
	held(t, tl, 1, 100+5*tailMinSize)
}

// BenchmarkTailPutGet is one publication to a log's tail and one reader taking it.
func BenchmarkTailPutGet(b *testing.B) {
	tl := &tail{}
	ms := make([]*message.Message, tailMinSize)
	for i := range ms {
		ms[i] = tailMsg(0, 100)
	}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		m := ms[i%tailMinSize]
		m.Sequence = uint64(i + 1)
		tl.put(m)
		if tl.get(m.Sequence) == nil {
			b.Fatal("missing")
		}
	}
}

// recordingWriter is a client connection that takes every MESSAGE and records its sequence.
type recordingWriter struct {
	mu      sync.Mutex
	written []uint64
	shared  []*byte // the first byte of each MESSAGE's shared tail: which Message it came from
}

func (w *recordingWriter) Version() frame.Version { return frame.V12 }
func (w *recordingWriter) QueuedBytes() int64     { return 0 }
func (w *recordingWriter) WriteEvent(p *frame.Buf, shared []byte, _ bool) (bool, <-chan struct{}) {
	return w.WriteMessage(p, shared), nil
}

func (w *recordingWriter) WriteMessage(prefix *frame.Buf, shared []byte) bool {
	m := sequenceHeader.FindSubmatch(prefix.B)
	seq, _ := strconv.ParseUint(string(m[1]), 10, 64)
	frame.PutBuf(prefix)
	w.mu.Lock()
	w.written = append(w.written, seq)
	w.shared = append(w.shared, &shared[0])
	w.mu.Unlock()
	return true
}

func (w *recordingWriter) count() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.written)
}

// A message published to caught-up live readers is delivered to each of them before Publish
// returns, on the publisher's goroutine: no reader's poller is woken or fetches for it
// (issue 33). A reader whose connection refuses it is left to its poller.
func TestLiveTailIsDeliveredByThePublisher(t *testing.T) {
	log := durable.New(memstore.New(), nil)
	p := New(dispatch.New(dispatch.Options{}), Options{Store: log, PollBase: time.Hour, PollMax: time.Hour})
	defer p.Close()
	id := dest.Identity{Group: "default", Pattern: dest.PatternEventsStore, Channel: "live"}
	var ws [2]*recordingWriter
	var rs [2]*reader
	for i := range ws {
		ws[i] = &recordingWriter{}
		sub := &delivery.Subscription{ID: "s", Conn: delivery.NewConn(ws[i], nil), Group: "default",
			Dest: dest.Destination{Pattern: dest.PatternEventsStore, Channel: "live"}}
		if err := p.Subscribe(sub); err != nil {
			t.Fatal(err)
		}
		p.mu.Lock()
		rs[i] = p.readers[sub]
		p.mu.Unlock()
	}
	stalled := &delivery.Subscription{ID: "s", Conn: delivery.NewConn(stalledWriter{}, nil), Group: "default",
		Dest: dest.Destination{Pattern: dest.PatternEventsStore, Channel: "live"}}
	if err := p.Subscribe(stalled); err != nil {
		t.Fatal(err)
	}
	var fetches [2]uint64
	for i, ls := range rs {
		// The poller's first fetch (at its start) is over: Quiesce waits for a running one.
		testwait.Eventually(t, 5*time.Second, "the poller's first fetch", func() bool { return ls.poller.Fetches.Load() >= 1 })
		ls.poller.Quiesce()
		fetches[i] = ls.poller.Fetches.Load()
	}
	const n = 100
	for i := range n {
		m := &message.Message{Destination: "/events-store/live", Body: []byte{byte(i)}}
		if err := log.Persist(id, m); err != nil {
			t.Fatal(err)
		}
		if _, err := p.Publish(id, m, nil); err != nil {
			t.Fatal(err)
		}
		for j, w := range ws {
			if got := w.count(); got != i+1 {
				t.Fatalf("reader %d: %d of %d delivered when Publish returned", j, got, i+1)
			}
		}
	}
	for i, ls := range rs {
		if got := ls.poller.Fetches.Load(); got != fetches[i] {
			t.Fatalf("reader %d's poller fetched %d times for the live tail, want 0", i, got-fetches[i])
		}
		if c := ls.poller.Cursor(); c != n+1 {
			t.Fatalf("reader %d's cursor is %d, want %d", i, c, n+1)
		}
	}
}

// A message published out of order (another producer's pipeline publishes the one before it
// later) sends the reader to the store for the gap only: the earlier message is read back,
// the later ones already on the tail are delivered from it, the publisher's own Messages,
// not decoded again.
func TestGapReadsOnlyTheGapFromTheStore(t *testing.T) {
	log := durable.New(memstore.New(), nil)
	p := New(dispatch.New(dispatch.Options{}), Options{Store: log, PollBase: time.Hour, PollMax: time.Hour})
	defer p.Close()
	id := dest.Identity{Group: "default", Pattern: dest.PatternEventsStore, Channel: "gap"}
	w := &recordingWriter{}
	sub := &delivery.Subscription{ID: "s", Conn: delivery.NewConn(w, nil), Group: "default",
		Dest: dest.Destination{Pattern: dest.PatternEventsStore, Channel: "gap"}}
	if err := p.Subscribe(sub); err != nil {
		t.Fatal(err)
	}
	ms := make([]*message.Message, 4)
	for i := range ms {
		ms[i] = message.Pack(&message.Parts{Destination: []byte("/events-store/gap"), Body: []byte{byte('a' + i)}, Group: "default"})
		if err := log.Persist(id, ms[i]); err != nil {
			t.Fatal(err)
		}
	}
	for _, m := range ms[1:] { // ms[0] is still on its producer's pipeline
		if _, err := p.Publish(id, m, nil); err != nil {
			t.Fatal(err)
		}
	}
	testwait.Eventually(t, 5*time.Second, "4 deliveries", func() bool { return w.count() == 4 })
	w.mu.Lock()
	defer w.mu.Unlock()
	for i, m := range ms {
		if w.written[i] != m.Sequence {
			t.Fatalf("delivered %v, want the sequences in order", w.written)
		}
		shared, _ := m.Shared(frame.V12)
		if fromTail := w.shared[i] == &shared[0]; fromTail != (i > 0) {
			t.Fatalf("sequence %d delivered from the tail: %v, want %v", m.Sequence, fromTail, i > 0)
		}
	}
}
