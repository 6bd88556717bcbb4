package queue

import (
	"testing"
	"time"
)

// pmsg returns a ready message of 10 bytes with priority p.
func pmsg(seq uint64, p uint8) *Message { return &Message{Seq: seq, Size: 10, Priority: p} }

// popAll pops every ready message and returns their Seqs in delivery order.
func popAll(t *testing.T, q *Queue, now time.Time) []uint64 {
	t.Helper()
	out := []uint64{}
	for {
		m, _ := q.Pop(now)
		if m == nil {
			checkInvariants(t, q)
			return out
		}
		out = append(out, m.Seq)
	}
}

// TestPriorityOrder: higher priority first, FIFO within a priority, 9 caps larger values.
func TestPriorityOrder(t *testing.T) {
	q := New(Options{})
	for i, p := range []uint8{4, 0, 9, 4, 7, 0, 9, 200, 4} {
		q.Enqueue(pmsg(uint64(i+1), p), t0)
	}
	checkInvariants(t, q)
	requireEqual(t, q.readySeqs(), []uint64{3, 7, 8, 5, 1, 4, 9, 2, 6}, "ready order")
	requireEqual(t, popAll(t, q, t0), []uint64{3, 7, 8, 5, 1, 4, 9, 2, 6}, "delivery order")
}

// TestPriorityCancelAndNack: a message returned to the queue goes back to the head of its
// own priority, ahead of the later ones of that priority and behind higher ones.
func TestPriorityCancelAndNack(t *testing.T) {
	q := New(Options{})
	q.Enqueue(pmsg(1, 4), t0)
	q.Enqueue(pmsg(2, 4), t0)
	q.Enqueue(pmsg(3, 1), t0)
	a, _ := q.Pop(t0) // 1
	b, _ := q.Pop(t0) // 2
	q.Enqueue(pmsg(4, 9), t0)
	q.Enqueue(pmsg(5, 4), t0)
	q.Cancel([]uint64{a.Seq, b.Seq}, t0)
	requireEqual(t, q.readySeqs(), []uint64{4, 1, 2, 5, 3}, "after Cancel")
	m, _ := q.Pop(t0) // 4
	q.Nack(m.Seq, t0)
	requireEqual(t, q.readySeqs(), []uint64{4, 1, 2, 5, 3}, "after Nack")
	checkInvariants(t, q)
}

// TestPriorityScheduled: a scheduled message becoming due joins the head of its priority.
func TestPriorityScheduled(t *testing.T) {
	q := New(Options{})
	q.Enqueue(pmsg(1, 4), t0)
	q.Enqueue(pmsg(2, 9), t0)
	s := pmsg(3, 4)
	s.DeliverAt = at(time.Minute)
	q.Enqueue(s, t0)
	s = pmsg(4, 0)
	s.DeliverAt = at(time.Minute)
	q.Enqueue(s, t0)
	q.Promote(at(time.Minute))
	requireEqual(t, q.readySeqs(), []uint64{2, 3, 1, 4}, "after Promote")
	checkInvariants(t, q)
}

// TestPriorityRedeliveryDelay: a nacked message scheduled by the redelivery delay comes back
// at the head of its priority.
func TestPriorityRedeliveryDelay(t *testing.T) {
	q := New(Options{RedeliveryDelay: time.Second})
	q.Enqueue(pmsg(1, 7), t0)
	q.Enqueue(pmsg(2, 7), t0)
	q.Enqueue(pmsg(3, 2), t0)
	m, _ := q.Pop(t0)
	q.Nack(m.Seq, t0)
	requireEqual(t, q.readySeqs(), []uint64{2, 3}, "while scheduled")
	requireEqual(t, popAll(t, q, at(time.Second)), []uint64{1, 2, 3}, "after the delay")
}

// TestPriorityRing: the ring removes the head, the oldest message of the highest priority
// (Artemis removes from its PriorityLinkedList's head), and a message at the tail of a
// lower priority is kept.
func TestPriorityRing(t *testing.T) {
	q := New(Options{RingSize: 3})
	q.Enqueue(pmsg(1, 9), t0)
	q.Enqueue(pmsg(2, 4), t0)
	q.Enqueue(pmsg(3, 4), t0)
	rm := q.Enqueue(pmsg(4, 0), t0)
	requireEqual(t, seqsOf(rm), []uint64{1}, "removed by the ring")
	rm = q.Enqueue(pmsg(5, 4), t0)
	requireEqual(t, seqsOf(rm), []uint64{2}, "removed by the ring")
	requireEqual(t, q.readySeqs(), []uint64{3, 5, 4}, "ring")
	checkInvariants(t, q)
}

// TestPriorityMaxDeliveries: an exhausted message is removed whatever its priority.
func TestPriorityMaxDeliveries(t *testing.T) {
	q := New(Options{MaxDeliveries: 1})
	q.Enqueue(pmsg(1, 9), t0)
	q.Enqueue(pmsg(2, 1), t0)
	m, _ := q.Pop(t0)
	rm := q.Nack(m.Seq, t0)
	if len(rm) != 1 || rm[0].Msg.Seq != 1 || rm[0].Reason != ReasonMaxDeliveries {
		t.Fatalf("Nack removed %+v, want seq 1 for max deliveries", rm)
	}
	requireEqual(t, popAll(t, q, t0), []uint64{2}, "left")
}

// TestPopFunc: a picky consumer takes the first message it accepts, in delivery order; the
// ones it passes keep their places for others, and expired ones it passes are removed.
func TestPopFunc(t *testing.T) {
	q := New(Options{})
	for i, p := range []uint8{4, 4, 9, 4, 0} {
		q.Enqueue(pmsg(uint64(i+1), p), t0)
	}
	e := pmsg(6, 4)
	e.ExpiresAt = at(time.Second)
	q.Enqueue(e, t0)
	odd := func(m *Message) bool { return m.Seq%2 == 1 }
	var got []uint64
	for {
		m, rm := q.PopFunc(at(time.Second), odd)
		if len(rm) > 0 {
			requireEqual(t, seqsOf(rm), []uint64{6}, "expired on the way")
		}
		if m == nil {
			break
		}
		got = append(got, m.Seq)
	}
	requireEqual(t, got, []uint64{3, 1, 5}, "odd seqs in delivery order")
	requireEqual(t, q.readySeqs(), []uint64{2, 4}, "left for others")
	checkInvariants(t, q)
	m, _ := q.PopFunc(t0, func(*Message) bool { return true })
	requireEqual(t, m.Seq, uint64(2), "head")
	if m.DeliveryCount != 1 {
		t.Fatalf("DeliveryCount %d, want 1", m.DeliveryCount)
	}
	q.Cancel([]uint64{2}, t0)
	requireEqual(t, q.readySeqs(), []uint64{2, 4}, "cancelled back to the head")
	checkInvariants(t, q)
}

// TestPriorityCycleAllocatesNothing: mixed priorities keep the steady state allocation-free.
func TestPriorityCycleAllocatesNothing(t *testing.T) {
	q := New(Options{})
	ms := []*Message{pmsg(0, 0), pmsg(0, 4), pmsg(0, 9)}
	seq := uint64(0)
	cycle := func() {
		for _, m := range ms {
			seq++
			m.Seq = seq
			q.Enqueue(m, t0)
		}
		for range ms {
			m, _ := q.Pop(t0)
			q.Ack(m.Seq)
		}
	}
	cycle()
	if n := testing.AllocsPerRun(1000, cycle); n != 0 {
		t.Fatalf("%v allocations per mixed-priority cycle, want 0", n)
	}
}

// TestPopFuncFromResumes: successive walks with one Cursor deliver the same messages, in the
// same order, as fresh walks, and pick sees each passed message once.
func TestPopFuncFromResumes(t *testing.T) {
	q := New(Options{})
	for i, p := range []uint8{4, 4, 9, 4, 0, 9, 4} {
		q.Enqueue(pmsg(uint64(i+1), p), t0)
	}
	seen := map[uint64]int{}
	odd := func(m *Message) bool { seen[m.Seq]++; return m.Seq%2 == 1 }
	var c Cursor
	var got []uint64
	for {
		m, _ := q.PopFuncFrom(&c, t0, odd)
		if m == nil {
			break
		}
		got = append(got, m.Seq)
	}
	requireEqual(t, got, []uint64{3, 1, 7, 5}, "odd seqs in delivery order")
	requireEqual(t, q.readySeqs(), []uint64{6, 2, 4}, "left for others")
	for seq, n := range seen {
		if n != 1 {
			t.Errorf("seq %d offered %d times in one walk", seq, n)
		}
	}
	checkInvariants(t, q)
}

// TestOnePriorityOneDeque: a queue whose messages share a priority, any one, keeps them on
// its inline deque; a second priority moves them, in order, to one deque per priority.
func TestOnePriorityOneDeque(t *testing.T) {
	q := New(Options{})
	q.Enqueue(pmsg(1, 7), t0)
	q.Enqueue(pmsg(2, 7), t0)
	m, _ := q.Pop(t0)
	q.Ack(m.Seq)
	q.Pop(t0) // empty now: the next message may bring another priority
	q.Enqueue(pmsg(3, 2), t0)
	q.Enqueue(pmsg(4, 2), t0)
	if q.ready.more != nil {
		t.Fatal("one priority at a time allocated a deque per priority")
	}
	checkInvariants(t, q)
	q.Cancel([]uint64{2}, t0) // priority 7 again, beside priority 2
	if q.ready.more == nil {
		t.Fatal("two priorities on the inline deque")
	}
	checkInvariants(t, q)
	requireEqual(t, popAll(t, q, t0), []uint64{2, 3, 4}, "after the move")
}
