package queue

import (
	"testing"
	"time"
)

// Peek shows ready messages head first, then scheduled ones by due time, and changes nothing.
func TestPeekShowsReadyThenScheduledWithoutConsuming(t *testing.T) {
	q := New(Options{})
	now := time.Unix(1000, 0)
	q.Enqueue(&Message{Seq: 1, Size: 1}, now)
	q.Enqueue(&Message{Seq: 2, Size: 1, DeliverAt: now.Add(2 * time.Second)}, now)
	q.Enqueue(&Message{Seq: 3, Size: 1, DeliverAt: now.Add(time.Second)}, now)
	q.Enqueue(&Message{Seq: 4, Size: 1}, now)
	var seqs []uint64
	for _, m := range q.Peek(10) {
		seqs = append(seqs, m.Seq)
	}
	if len(seqs) != 4 || seqs[0] != 1 || seqs[1] != 4 || seqs[2] != 3 || seqs[3] != 2 {
		t.Fatalf("Peek(10) = %v, want [1 4 3 2]", seqs)
	}
	if got := q.Peek(1); len(got) != 1 || got[0].Seq != 1 {
		t.Fatalf("Peek(1) = %v", got)
	}
	if q.Peek(0) != nil {
		t.Fatal("Peek(0) is not nil")
	}
	if c := q.Counts(); c.Messages != 4 || c.Delivering != 0 {
		t.Fatalf("counts after Peek: %+v", c)
	}
	if m, _ := q.Pop(now); m == nil || m.Seq != 1 || m.DeliveryCount != 1 {
		t.Fatalf("Pop after Peek = %+v", m)
	}
}
