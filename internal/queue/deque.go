package queue

// minDequeCap is the smallest backing array a deque allocates: small, because a broker
// restored with many queues holds one per queue that has a message (100,000 queues of one
// message each kept 12 MB of 16-slot arrays); a busy queue doubles past it at once.
const minDequeCap = 4

// shrinkMinCap is the backing-array size (8 KiB of pointers) at or below which a deque never
// shrinks, so queues that repeatedly fill and drain in batches of up to this many messages
// (a consumer window, a rollback) do not reallocate on every cycle.
const shrinkMinCap = 1024

// deque is a double-ended FIFO of *Message on a ring buffer: O(1) push at either end and pop at
// the front. The backing array is reused, so a deque whose length stays within its capacity
// never allocates. It doubles when full and, above shrinkMinCap, halves when a quarter full;
// the factor-two gap between the two thresholds keeps resizing amortized O(1), and a queue that
// drained after a burst gives its memory back.
//
// The zero value is an empty deque.
type deque struct {
	buf  []*Message // nil or a power-of-two length; empty slots are nil so the GC can free them
	head int        // index in buf of the first element
	n    int        // number of elements
}

// len returns the number of messages in the deque.
func (d *deque) len() int { return d.n }

// at returns the i-th message from the front, 0 <= i < len.
func (d *deque) at(i int) *Message { return d.buf[(d.head+i)&(len(d.buf)-1)] }

// front returns the first message, or nil when the deque is empty.
func (d *deque) front() *Message {
	if d.n == 0 {
		return nil
	}
	return d.buf[d.head]
}

// pushBack appends m at the back (the tail of the queue).
func (d *deque) pushBack(m *Message) {
	if d.n == len(d.buf) {
		d.grow()
	}
	d.buf[(d.head+d.n)&(len(d.buf)-1)] = m
	d.n++
}

// pushFront inserts m before the first message (the head of the queue).
func (d *deque) pushFront(m *Message) {
	if d.n == len(d.buf) {
		d.grow()
	}
	d.head = (d.head - 1) & (len(d.buf) - 1)
	d.buf[d.head] = m
	d.n++
}

// popFront removes and returns the first message; the deque must not be empty.
func (d *deque) popFront() *Message {
	m := d.buf[d.head]
	d.buf[d.head] = nil
	d.head = (d.head + 1) & (len(d.buf) - 1)
	d.n--
	if d.n <= len(d.buf)>>2 && len(d.buf) > shrinkMinCap {
		d.shrink()
	}
	return m
}

// rotate removes and returns the first message and appends m at the back, in one step and
// without resizing; the deque must not be empty.
func (d *deque) rotate(m *Message) *Message {
	mask := len(d.buf) - 1
	old := d.buf[d.head]
	d.buf[d.head] = nil
	d.head = (d.head + 1) & mask
	d.buf[(d.head+d.n-1)&mask] = m
	return old
}

// grow doubles the backing array (or allocates the first one).
func (d *deque) grow() { d.resize(max(2*len(d.buf), minDequeCap)) }

// shrink halves the backing array.
func (d *deque) shrink() { d.resize(len(d.buf) / 2) }

// resize moves the elements, front first, into a new backing array of size c (a power of two,
// at least d.n).
func (d *deque) resize(c int) {
	buf := make([]*Message, c)
	if d.n > 0 {
		if d.head+d.n <= len(d.buf) {
			copy(buf, d.buf[d.head:d.head+d.n])
		} else {
			k := copy(buf, d.buf[d.head:])
			copy(buf[k:], d.buf[:d.n-k])
		}
	}
	d.buf = buf
	d.head = 0
}

// reset empties the deque. A backing array larger than shrinkMinCap is released so a queue that
// once held a burst does not keep its memory after a purge.
func (d *deque) reset() {
	if len(d.buf) > shrinkMinCap {
		d.buf = nil
	} else {
		clear(d.buf)
	}
	d.head, d.n = 0, 0
}

// removeAt removes and returns the i-th message from the front, 0 <= i < len, moving the
// shorter side of the deque by one slot.
func (d *deque) removeAt(i int) *Message {
	mask := len(d.buf) - 1
	m := d.buf[(d.head+i)&mask]
	if i < d.n/2 {
		for j := i; j > 0; j-- {
			d.buf[(d.head+j)&mask] = d.buf[(d.head+j-1)&mask]
		}
		d.buf[d.head] = nil
		d.head = (d.head + 1) & mask
	} else {
		for j := i; j < d.n-1; j++ {
			d.buf[(d.head+j)&mask] = d.buf[(d.head+j+1)&mask]
		}
		d.buf[(d.head+d.n-1)&mask] = nil
	}
	d.n--
	if d.n <= len(d.buf)>>2 && len(d.buf) > shrinkMinCap {
		d.shrink()
	}
	return m
}
