package queue

import "math/bits"

// Priorities is the number of message priorities, 0 (lowest) to 9 (highest), as in JMS
// 2.0 §3.4.10 and Artemis.
const Priorities = 10

// DefaultPriority is the priority of a message that names none (JMS 2.0 §3.4.10).
const DefaultPriority = 4

// readyList is the ready list: one FIFO deque per priority. Its head, where Pop takes and the
// ring rule removes, is the head of the highest non-empty priority (Artemis keeps the same
// order in its PriorityLinkedList); pushBack and pushFront add at the tail or head of the
// message's own priority. The non-empty priorities are a bit mask, so every operation is
// O(1) as on a plain deque.
//
// A queue whose messages all have one priority, nearly every queue, keeps them on one inline
// deque (one, of priority p); the ten deques (more, 400 bytes) are allocated when a message
// of a second priority arrives, and kept from then on. A broker restored with 100,000 queues
// thus holds one deque per queue, not ten.
type readyList struct {
	one  deque              // the messages, all of priority p, while more is nil
	more *[Priorities]deque // one deque per priority, once two priorities met; one is then empty
	n    int                // messages over all priorities
	mask uint16             // bit p set when priority p holds a message
	p    uint8              // one's priority while more is nil
}

// level returns the priority m is kept at: Message.Priority, capped at 9.
func level(m *Message) int { return int(min(m.Priority, Priorities-1)) }

// len returns the number of ready messages.
func (r *readyList) len() int { return r.n }

// top returns the highest non-empty priority; r must not be empty.
func (r *readyList) top() int { return bits.Len16(r.mask) - 1 }

// lv returns the deque of priority p, which must hold a message (its mask bit set).
func (r *readyList) lv(p int) *deque {
	if r.more != nil {
		return &r.more[p]
	}
	return &r.one
}

// lvFor returns the deque to add a message of priority p to, moving to one deque per
// priority when p is the second priority the list holds.
func (r *readyList) lvFor(p int) *deque {
	switch {
	case r.more != nil:
		return &r.more[p]
	case p == int(r.p):
		return &r.one
	case r.n == 0:
		r.p = uint8(p)
		return &r.one
	}
	return r.spread(p)
}

// spread moves the inline deque to one deque per priority, for a message of priority p,
// a second priority, and returns p's deque.
func (r *readyList) spread(p int) *deque {
	r.more = new([Priorities]deque)
	r.more[r.p], r.one = r.one, deque{}
	return &r.more[p]
}

// at returns the i-th message in delivery order, 0 <= i < len.
func (r *readyList) at(i int) *Message {
	for mask := r.mask; mask != 0; {
		p := bits.Len16(mask) - 1
		mask &^= 1 << p
		d := r.lv(p)
		if i < d.n {
			return d.at(i)
		}
		i -= d.n
	}
	panic("queue: ready index out of range")
}

// pushBack adds m at the tail of its priority.
func (r *readyList) pushBack(m *Message) {
	p := level(m)
	r.lvFor(p).pushBack(m)
	r.mask |= 1 << p
	r.n++
}

// pushFront adds m at the head of its priority.
func (r *readyList) pushFront(m *Message) {
	p := level(m)
	r.lvFor(p).pushFront(m)
	r.mask |= 1 << p
	r.n++
}

// popFront removes and returns the head; r must not be empty.
func (r *readyList) popFront() *Message {
	p := r.top()
	d := r.lv(p)
	m := d.popFront()
	if d.n == 0 {
		r.mask &^= 1 << p
	}
	r.n--
	return m
}

// rotate removes and returns the head and adds m at the tail of its priority; r must not be
// empty. When m has the head's priority it is one step on that deque, without resizing.
func (r *readyList) rotate(m *Message) *Message {
	if p := r.top(); p == level(m) {
		return r.lv(p).rotate(m)
	}
	old := r.popFront()
	r.pushBack(m)
	return old
}

// removeAt removes and returns the message at index i of priority p.
func (r *readyList) removeAt(p, i int) *Message {
	d := r.lv(p)
	m := d.removeAt(i)
	if d.n == 0 {
		r.mask &^= 1 << p
	}
	r.n--
	return m
}

// reset empties the ready list (see deque.reset).
func (r *readyList) reset() {
	r.one.reset()
	if r.more != nil {
		for p := range r.more {
			r.more[p].reset()
		}
	}
	r.mask, r.n = 0, 0
}
