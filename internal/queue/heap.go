package queue

import "time"

// schedEntry is one scheduled message with its sort key copied inline, so heap operations
// compare plain integers in the heap's own array instead of dereferencing each Message.
type schedEntry struct {
	sec  int64  // m.DeliverAt.Unix()
	nsec int32  // m.DeliverAt.Nanosecond()
	seq  uint64 // m.Seq
	m    *Message
}

// newSchedEntry returns the heap entry for m, keyed by its current DeliverAt.
func newSchedEntry(m *Message) schedEntry {
	return schedEntry{sec: m.DeliverAt.Unix(), nsec: int32(m.DeliverAt.Nanosecond()), seq: m.Seq, m: m}
}

// less reports whether e is due before f: earlier DeliverAt (wall clock), then lower Seq.
func (e *schedEntry) less(f *schedEntry) bool {
	if e.sec != f.sec {
		return e.sec < f.sec
	}
	if e.nsec != f.nsec {
		return e.nsec < f.nsec
	}
	return e.seq < f.seq
}

// dueAt reports whether e is due at the instant (sec, nsec): DeliverAt <= now.
func (e *schedEntry) dueAt(sec int64, nsec int32) bool {
	return e.sec < sec || e.sec == sec && e.nsec <= nsec
}

// wallKey returns t's wall-clock key, as stored in schedEntry.
func wallKey(t time.Time) (int64, int32) { return t.Unix(), int32(t.Nanosecond()) }

// schedHeap is a binary min-heap of scheduled messages ordered by (DeliverAt, Seq): the root is
// the message due first, and messages due at the same instant leave in Seq (arrival) order.
// It is typed rather than built on container/heap to avoid interface conversions on the path.
type schedHeap []schedEntry

// push adds m in O(log n). Sifting moves a hole rather than swapping entries.
func (h *schedHeap) push(m *Message) {
	e := newSchedEntry(m)
	*h = append(*h, schedEntry{})
	s := *h
	i := len(s) - 1
	for i > 0 {
		p := (i - 1) / 2
		if !e.less(&s[p]) {
			break
		}
		s[i] = s[p]
		i = p
	}
	s[i] = e
}

// pop removes and returns the root in O(log n); the heap must not be empty.
func (h *schedHeap) pop() *Message {
	s := *h
	m := s[0].m
	last := len(s) - 1
	e := s[last]
	s[last] = schedEntry{}
	s = s[:last]
	*h = s
	if last == 0 {
		return m
	}
	i := 0
	for {
		c := 2*i + 1
		if c >= last {
			break
		}
		if r := c + 1; r < last && s[r].less(&s[c]) {
			c = r
		}
		if !s[c].less(&e) {
			break
		}
		s[i] = s[c]
		i = c
	}
	s[i] = e
	return m
}
