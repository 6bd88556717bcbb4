package queue

import (
	"testing"
	"time"
)

// Reference 002, "Ring Queue": ring 3, send A, B, C, D → A removed, B, C, D remain.
func TestRingBasic(t *testing.T) {
	const A, B, C, D = 1, 2, 3, 4
	q := New(Options{RingSize: 3})
	for i, seq := range []uint64{A, B, C} {
		if rm := q.Enqueue(msg(seq), t0); rm != nil {
			t.Fatalf("enqueue %d removed %v", seq, seqsOf(rm))
		}
		requireCounts(t, q, i+1, 0, 0, "after send")
	}
	rm := q.Enqueue(msg(D), t0)
	requireEqual(t, seqsOf(rm), []uint64{A}, "removed by D")
	requireEqual(t, rm[0].Reason, ReasonRing, "reason")
	requireEqual(t, q.readySeqs(), []uint64{B, C, D}, "ready")
	requireCounts(t, q, 3, 0, 0, "after D")
	requireEqual(t, q.Counts().Bytes, int64(30), "bytes")
}

// Reference 002, "Messages in Delivery & Rollbacks".
func TestRingWalkThroughDelivery(t *testing.T) {
	const A, B, C, D = 1, 2, 3, 4
	q := New(Options{RingSize: 3})
	for i, seq := range []uint64{A, B, C, D} {
		now := at(time.Duration(i) * time.Minute)
		if rm := q.Enqueue(msg(seq), now); rm != nil {
			t.Fatalf("enqueue %d removed %v", seq, seqsOf(rm))
		}
		requireCounts(t, q, i+1, i, 0, "sent")
		m, rm := q.Pop(now)
		if m == nil || m.Seq != seq || m.DeliveryCount != 1 || rm != nil {
			t.Fatalf("pop: got %+v removed %v, want seq %d", m, seqsOf(rm), seq)
		}
		// messageCount=i+1, deliveringCount=i+1, as in the reference.
		requireCounts(t, q, i+1, i+1, 0, "dispatched")
	}
	// The consumer closes without acknowledging anything.
	rm := q.Cancel([]uint64{A, B, C, D}, at(4*time.Minute))
	requireEqual(t, seqsOf(rm), []uint64{A}, "removed on cancel")
	requireEqual(t, rm[0].Reason, ReasonRing, "reason")
	requireEqual(t, q.readySeqs(), []uint64{B, C, D}, "ready after cancel")
	requireCounts(t, q, 3, 0, 0, "after cancel")
	requireEqual(t, q.Counts().Bytes, int64(30), "bytes")
}

// Reference 002, "Scheduled Messages".
func TestRingWalkThroughScheduled(t *testing.T) {
	const A, B, C, D = 1, 2, 3, 4
	q := New(Options{RingSize: 3})
	a := msg(A)
	a.DeliverAt = at(5 * time.Minute)
	if rm := q.Enqueue(a, at(0)); rm != nil {
		t.Fatalf("removed %v", seqsOf(rm))
	}
	requireCounts(t, q, 1, 0, 1, "12:00 A scheduled for 12:05")
	due, ok := q.NextDue()
	requireEqual(t, ok, true, "NextDue ok")
	requireEqual(t, due, at(5*time.Minute), "NextDue")
	for i, seq := range []uint64{B, C, D} {
		now := at(time.Duration(i+1) * time.Minute)
		if rm := q.Enqueue(msg(seq), now); rm != nil {
			t.Fatalf("enqueue %d removed %v", seq, seqsOf(rm))
		}
		requireCounts(t, q, i+2, 0, 1, "12:0x send")
	}
	// 12:04: nothing is due yet.
	requireEqual(t, q.Promote(at(4*time.Minute)), []Removed(nil), "promote at 12:04")
	requireCounts(t, q, 4, 0, 1, "12:04")
	// 12:05: A joins the head and, the ring being full, is removed at once.
	rm := q.Promote(at(5 * time.Minute))
	requireEqual(t, seqsOf(rm), []uint64{A}, "removed at 12:05")
	requireEqual(t, rm[0].Reason, ReasonRing, "reason")
	requireEqual(t, q.readySeqs(), []uint64{B, C, D}, "ready at 12:05")
	requireCounts(t, q, 3, 0, 0, "12:05")
	if _, ok := q.NextDue(); ok {
		t.Fatal("NextDue with nothing scheduled")
	}
}

// Reference 002, "Configuration": lowering ring-size deletes nothing at once; new messages push
// old ones out so the queue does not grow; it reaches the new size only through consumption.
func TestRingLowerAtRunTime(t *testing.T) {
	q := New(Options{RingSize: 5})
	for seq := uint64(1); seq <= 5; seq++ {
		q.Enqueue(msg(seq), t0)
	}
	q.SetRingSize(3)
	requireEqual(t, q.RingSize(), 3, "RingSize")
	requireCounts(t, q, 5, 0, 0, "after lowering")
	for seq := uint64(6); seq <= 8; seq++ {
		rm := q.Enqueue(msg(seq), t0)
		requireEqual(t, seqsOf(rm), []uint64{seq - 5}, "pushed out")
		requireCounts(t, q, 5, 0, 0, "no growth")
	}
	requireEqual(t, q.readySeqs(), []uint64{4, 5, 6, 7, 8}, "ready")
	// Consume two: 6 left, then 5... the queue shrinks naturally.
	for _, want := range []uint64{4, 5, 6} {
		m, _ := q.Pop(t0)
		requireEqual(t, m.Seq, want, "pop")
		q.Ack(m.Seq)
	}
	requireCounts(t, q, 2, 0, 0, "after consuming three")
	q.Enqueue(msg(9), t0)
	requireCounts(t, q, 3, 0, 0, "grows back to the ring size")
	rm := q.Enqueue(msg(10), t0)
	requireEqual(t, seqsOf(rm), []uint64{7}, "ring of 3 enforced")
	requireEqual(t, q.readySeqs(), []uint64{8, 9, 10}, "ready")

	// Raising it, or removing the ring, lets the queue grow again.
	q.SetRingSize(0)
	requireEqual(t, q.RingSize(), -1, "no ring reported as -1")
	for seq := uint64(11); seq <= 20; seq++ {
		if rm := q.Enqueue(msg(seq), t0); rm != nil {
			t.Fatalf("unbounded enqueue removed %v", seqsOf(rm))
		}
	}
	requireCounts(t, q, 13, 0, 0, "unbounded")
	requireEqual(t, New(Options{RingSize: -1}).RingSize(), -1, "New(-1)")
	requireEqual(t, New(Options{}).RingSize(), -1, "New(0)")
}

// Messages in delivery are never removed, and a tail Enqueue removes only messages ahead of
// it: sent while the ring is full of deliveries, a message is kept and the queue grows past
// its ring size (reference 002: "a client can actually send more messages to a ring queue than
// it would otherwise permit").
func TestRingNeverRemovesDelivering(t *testing.T) {
	q := New(Options{RingSize: 2})
	q.Enqueue(msg(1), t0)
	q.Enqueue(msg(2), t0)
	q.Pop(t0)
	q.Pop(t0)
	requireCounts(t, q, 2, 2, 0, "two delivering")
	if rm := q.Enqueue(msg(3), t0); rm != nil {
		t.Fatalf("removed %v", seqsOf(rm))
	}
	requireCounts(t, q, 3, 2, 0, "kept over the ring")
	// The next one pushes out 3, the only ready message ahead of it.
	rm := q.Enqueue(msg(4), t0)
	requireEqual(t, seqsOf(rm), []uint64{3}, "older ready message goes")
	requireCounts(t, q, 3, 2, 0, "no further growth")
	// Acking one brings the queue back to its size.
	q.Ack(1)
	requireCounts(t, q, 2, 1, 0, "after ack")
	if rm := q.Enqueue(msg(5), t0); rm == nil || rm[0].Msg.Seq != 4 {
		t.Fatalf("removed %v, want [4]", seqsOf(rm))
	}
	requireEqual(t, q.readySeqs(), []uint64{5}, "ready")
	// A nack to the head over the ring: the nacked message, now the head, is removed.
	q.SetRingSize(1)
	rm = q.Nack(2, t0)
	requireEqual(t, seqsOf(rm), []uint64{2}, "nacked head removed")
	requireEqual(t, q.readySeqs(), []uint64{5}, "ready")
	requireCounts(t, q, 1, 0, 0, "after nack")
}

// A rollback of part of the deliveries, with ready messages behind: at most len(seqs) messages
// are removed, all from the head.
func TestRingCancelBatchBoundsRemovals(t *testing.T) {
	q := New(Options{RingSize: 4})
	for seq := uint64(1); seq <= 4; seq++ {
		q.Enqueue(msg(seq), t0)
	}
	q.Pop(t0) // 1
	q.Pop(t0) // 2
	q.SetRingSize(2)
	// Ring count is 4 (2 ready + 2 delivering), 2 over: cancelling both removes at most 2.
	rm := q.Cancel([]uint64{1, 2}, t0)
	requireEqual(t, seqsOf(rm), []uint64{1, 2}, "removed")
	requireEqual(t, q.readySeqs(), []uint64{3, 4}, "ready")
	// Cancelling one over a ring lowered further removes just one.
	q.Pop(t0) // 3
	q.SetRingSize(1)
	rm = q.Cancel([]uint64{3}, t0)
	requireEqual(t, seqsOf(rm), []uint64{3}, "removed one")
	requireEqual(t, q.readySeqs(), []uint64{4}, "ready")
	requireCounts(t, q, 1, 0, 0, "end")
}

// Several scheduled messages due together join the head in due order; the ring removes from
// the head, the earliest due first.
func TestRingPromoteSeveral(t *testing.T) {
	q := New(Options{RingSize: 4})
	for _, s := range []struct {
		seq uint64
		due time.Duration
	}{{1, 3 * time.Minute}, {2, 2 * time.Minute}, {3, 2 * time.Minute}} {
		m := msg(s.seq)
		m.DeliverAt = at(s.due)
		q.Enqueue(m, t0)
	}
	for seq := uint64(10); seq <= 12; seq++ {
		q.Enqueue(msg(seq), t0)
	}
	requireCounts(t, q, 6, 0, 3, "scheduled")
	rm := q.Promote(at(5 * time.Minute))
	// Head before the ring rule: 2, 3 (due 12:02, Seq order), 1 (12:03), then 10, 11, 12.
	requireEqual(t, seqsOf(rm), []uint64{2, 3}, "removed")
	requireEqual(t, q.readySeqs(), []uint64{1, 10, 11, 12}, "ready")
	requireCounts(t, q, 4, 0, 0, "promoted")
}
