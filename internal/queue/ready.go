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
// message's own priority. A queue whose messages all have one priority uses one deque, and
// every operation is O(1) as on a plain deque: the non-empty priorities are a bit mask.
type readyList struct {
	lv   [Priorities]deque
	mask uint16 // bit p set when lv[p] holds a message
	n    int    // messages over all priorities
}

// level returns the priority m is kept at: Message.Priority, capped at 9.
func level(m *Message) int { return int(min(m.Priority, Priorities-1)) }

// len returns the number of ready messages.
func (r *readyList) len() int { return r.n }

// top returns the highest non-empty priority; r must not be empty.
func (r *readyList) top() int { return bits.Len16(r.mask) - 1 }

// at returns the i-th message in delivery order, 0 <= i < len.
func (r *readyList) at(i int) *Message {
	for p := r.top(); p >= 0; p-- {
		if i < r.lv[p].n {
			return r.lv[p].at(i)
		}
		i -= r.lv[p].n
	}
	panic("queue: ready index out of range")
}

// pushBack adds m at the tail of its priority.
func (r *readyList) pushBack(m *Message) {
	p := level(m)
	r.lv[p].pushBack(m)
	r.mask |= 1 << p
	r.n++
}

// pushFront adds m at the head of its priority.
func (r *readyList) pushFront(m *Message) {
	p := level(m)
	r.lv[p].pushFront(m)
	r.mask |= 1 << p
	r.n++
}

// popFront removes and returns the head; r must not be empty.
func (r *readyList) popFront() *Message {
	p := r.top()
	m := r.lv[p].popFront()
	if r.lv[p].n == 0 {
		r.mask &^= 1 << p
	}
	r.n--
	return m
}

// rotate removes and returns the head and adds m at the tail of its priority; r must not be
// empty. When m has the head's priority it is one step on that deque, without resizing.
func (r *readyList) rotate(m *Message) *Message {
	if p := r.top(); p == level(m) {
		return r.lv[p].rotate(m)
	}
	old := r.popFront()
	r.pushBack(m)
	return old
}

// removeAt removes and returns the message at index i of priority p.
func (r *readyList) removeAt(p, i int) *Message {
	m := r.lv[p].removeAt(i)
	if r.lv[p].n == 0 {
		r.mask &^= 1 << p
	}
	r.n--
	return m
}

// reset empties the ready list (see deque.reset).
func (r *readyList) reset() {
	for p := range r.lv {
		if r.lv[p].n > 0 || r.lv[p].buf != nil {
			r.lv[p].reset()
		}
	}
	r.mask, r.n = 0, 0
}
