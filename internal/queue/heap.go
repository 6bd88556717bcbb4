package queue

// schedHeap is a binary min-heap of scheduled messages ordered by (DeliverAt, Seq): the root is
// the message due first, and messages due at the same instant leave in Seq (arrival) order.
// It is typed rather than built on container/heap to avoid interface conversions on the path.
type schedHeap []*Message

// schedLess reports whether a is due before b.
func schedLess(a, b *Message) bool {
	if c := a.DeliverAt.Compare(b.DeliverAt); c != 0 {
		return c < 0
	}
	return a.Seq < b.Seq
}

// push adds m in O(log n).
func (h *schedHeap) push(m *Message) {
	*h = append(*h, m)
	s := *h
	i := len(s) - 1
	for i > 0 {
		p := (i - 1) / 2
		if !schedLess(s[i], s[p]) {
			break
		}
		s[i], s[p] = s[p], s[i]
		i = p
	}
}

// pop removes and returns the root in O(log n); the heap must not be empty.
func (h *schedHeap) pop() *Message {
	s := *h
	m := s[0]
	last := len(s) - 1
	s[0] = s[last]
	s[last] = nil
	s = s[:last]
	*h = s
	i := 0
	for {
		l := 2*i + 1
		if l >= len(s) {
			break
		}
		c := l
		if r := l + 1; r < len(s) && schedLess(s[r], s[l]) {
			c = r
		}
		if !schedLess(s[c], s[i]) {
			break
		}
		s[i], s[c] = s[c], s[i]
		i = c
	}
	return m
}
