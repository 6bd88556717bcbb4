package queue

import (
	"reflect"
	"testing"
	"time"
)

// t0 is 12:00, the reference walk-throughs' clock.
var t0 = time.Date(2024, 1, 1, 12, 0, 0, 0, time.UTC)

// at returns t0 plus d.
func at(d time.Duration) time.Time { return t0.Add(d) }

func requireEqual[T any](t testing.TB, got, want T, what string) {
	t.Helper()
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("%s: got %v, want %v", what, got, want)
	}
}

// msg returns a ready message of 10 bytes.
func msg(seq uint64) *Message { return &Message{Seq: seq, Size: 10} }

// seqsOf returns the Seq of each message removed, in order.
func seqsOf(rs []Removed) []uint64 {
	out := []uint64{}
	for _, r := range rs {
		out = append(out, r.Msg.Seq)
	}
	return out
}

// readySeqs returns the ready list, head first.
func (q *Queue) readySeqs() []uint64 {
	out := []uint64{}
	for i := range q.ready.len() {
		out = append(out, q.ready.at(i).Seq)
	}
	return out
}

// requireCounts checks the three reference gauges plus Ready, and the invariants.
func requireCounts(t testing.TB, q *Queue, messages, delivering, scheduled int, step string) {
	t.Helper()
	c := q.Counts()
	if c.Messages != messages || c.Delivering != delivering || c.Scheduled != scheduled {
		t.Fatalf("%s: messageCount=%d deliveringCount=%d scheduledCount=%d, want %d %d %d",
			step, c.Messages, c.Delivering, c.Scheduled, messages, delivering, scheduled)
	}
	if c.Ready != messages-delivering-scheduled {
		t.Fatalf("%s: Ready=%d, want %d", step, c.Ready, messages-delivering-scheduled)
	}
	checkInvariants(t, q)
}

// checkInvariants verifies the Queue's internal consistency: deque and heap shape, byte
// accounting, each Seq in one state only, and clean scratch buffers.
func checkInvariants(t testing.TB, q *Queue) {
	t.Helper()
	seen := map[uint64]string{}
	var bytes int64
	note := func(m *Message, state string) {
		if m == nil {
			t.Fatalf("nil message in %s", state)
		}
		if prev, ok := seen[m.Seq]; ok {
			t.Fatalf("seq %d both %s and %s", m.Seq, prev, state)
		}
		seen[m.Seq] = state
		bytes += int64(m.Size)
	}
	total := 0
	r := &q.ready
	if r.more != nil && (r.one.n != 0 || r.one.buf != nil) {
		t.Fatalf("inline deque holds %d messages beside the per-priority ones", r.one.n)
	}
	if r.more == nil && r.mask&^(1<<r.p) != 0 {
		t.Fatalf("one deque of priority %d, mask %b", r.p, r.mask)
	}
	for p := range Priorities {
		d := &deque{}
		switch {
		case r.more != nil:
			d = &r.more[p]
		case p == int(r.p):
			d = &r.one
		}
		if len(d.buf)&(len(d.buf)-1) != 0 || d.n < 0 || d.n > len(d.buf) {
			t.Fatalf("deque %d shape: len(buf)=%d n=%d", p, len(d.buf), d.n)
		}
		if len(d.buf) > shrinkMinCap && d.n < len(d.buf)/4 {
			t.Fatalf("deque %d not shrunk: len(buf)=%d n=%d", p, len(d.buf), d.n)
		}
		if (d.n > 0) != (q.ready.mask&(1<<p) != 0) {
			t.Fatalf("priority %d: %d messages, mask %b", p, d.n, q.ready.mask)
		}
		total += d.n
		for i := range len(d.buf) {
			m := d.buf[(d.head+i)&(len(d.buf)-1)]
			if i < d.n {
				note(m, "ready")
				if level(m) != p {
					t.Fatalf("seq %d of priority %d on deque %d", m.Seq, m.Priority, p)
				}
			} else if m != nil {
				t.Fatalf("deque %d slot %d past the end holds seq %d", p, i, m.Seq)
			}
		}
	}
	if total != q.ready.n {
		t.Fatalf("ready count %d, deques hold %d", q.ready.n, total)
	}
	for i, e := range q.scheduled {
		note(e.m, "scheduled")
		if e != newSchedEntry(e.m) {
			t.Fatalf("heap entry %d key %+v, message DeliverAt %v Seq %d", i, e, e.m.DeliverAt, e.m.Seq)
		}
		if i > 0 && e.less(&q.scheduled[(i-1)/2]) {
			t.Fatalf("heap property broken at %d", i)
		}
	}
	for _, e := range q.scheduled[len(q.scheduled):cap(q.scheduled)] {
		if e.m != nil {
			t.Fatalf("heap retains seq %d past its end", e.m.Seq)
		}
	}
	orders := map[uint64]bool{}
	for seq, dl := range q.delivering {
		if dl.m.Seq != seq {
			t.Fatalf("delivering key %d holds seq %d", seq, dl.m.Seq)
		}
		if dl.order == 0 || dl.order > q.popCount || orders[dl.order] {
			t.Fatalf("bad consumption order %d for seq %d", dl.order, seq)
		}
		orders[dl.order] = true
		note(dl.m, "delivering")
	}
	if bytes != q.bytes {
		t.Fatalf("bytes: accounted %d, actual %d", q.bytes, bytes)
	}
	if len(q.due) != 0 || len(q.cancel) != 0 {
		t.Fatalf("scratch not reset: due=%d cancel=%d", len(q.due), len(q.cancel))
	}
	for _, m := range q.due[:cap(q.due)] {
		if m != nil {
			t.Fatalf("promote scratch retains seq %d", m.Seq)
		}
	}
	for _, c := range q.cancel[:cap(q.cancel)] {
		if c.m != nil {
			t.Fatalf("cancel scratch retains seq %d", c.m.Seq)
		}
	}
}
