package queue

import (
	"testing"
	"time"
)

func TestFIFO(t *testing.T) {
	q := New(Options{})
	for seq := uint64(1); seq <= 100; seq++ {
		if rm := q.Enqueue(msg(seq), t0); rm != nil {
			t.Fatalf("unbounded enqueue removed %v", seqsOf(rm))
		}
	}
	requireCounts(t, q, 100, 0, 0, "filled")
	for seq := uint64(1); seq <= 100; seq++ {
		m, rm := q.Pop(t0)
		if m == nil || m.Seq != seq || rm != nil {
			t.Fatalf("pop: got %+v, want seq %d", m, seq)
		}
		d, ok := q.Delivering(seq)
		requireEqual(t, ok, true, "Delivering ok")
		requireEqual(t, d, m, "Delivering")
		a, ok := q.Ack(seq)
		requireEqual(t, ok, true, "Ack ok")
		requireEqual(t, a, m, "Ack")
	}
	requireCounts(t, q, 0, 0, 0, "drained")
	if m, rm := q.Pop(t0); m != nil || rm != nil {
		t.Fatalf("pop on empty: %+v %v", m, rm)
	}
	if _, ok := q.Ack(1); ok {
		t.Fatal("second Ack succeeded")
	}
	if _, ok := q.Delivering(1); ok {
		t.Fatal("Delivering after Ack")
	}
}

func TestCancelOrder(t *testing.T) {
	q := New(Options{})
	for seq := uint64(1); seq <= 5; seq++ {
		q.Enqueue(msg(seq), t0)
	}
	for range 4 {
		q.Pop(t0) // 1..4 delivering, 5 ready
	}
	// Given out of consumption order, with an unknown seq and a repeat: same result.
	if rm := q.Cancel([]uint64{3, 1, 99, 4, 3}, t0); rm != nil {
		t.Fatalf("removed %v", seqsOf(rm))
	}
	requireEqual(t, q.readySeqs(), []uint64{1, 3, 4, 5}, "ready after cancel")
	requireCounts(t, q, 5, 1, 0, "after cancel")
	// A redelivered message takes its new consumption order: 2 is still out from before.
	m, _ := q.Pop(t0) // 1 again, consumed after 2
	requireEqual(t, m.Seq, uint64(1), "pop")
	requireEqual(t, m.DeliveryCount, 2, "DeliveryCount")
	q.Cancel([]uint64{1, 2}, t0)
	requireEqual(t, q.readySeqs(), []uint64{2, 1, 3, 4, 5}, "2 consumed first goes to the head")
	requireCounts(t, q, 5, 0, 0, "all back")
	seqs := []uint64{2, 1}
	q.Pop(t0)
	q.Pop(t0)
	q.Cancel(seqs, t0)
	requireEqual(t, seqs, []uint64{2, 1}, "Cancel must not modify its argument")
}

func TestExpiry(t *testing.T) {
	q := New(Options{})
	exp := func(seq uint64, d time.Duration) *Message {
		m := msg(seq)
		m.ExpiresAt = at(d)
		return m
	}
	q.Enqueue(exp(1, time.Minute), t0)
	q.Enqueue(exp(2, 2*time.Minute), t0)
	q.Enqueue(msg(3), t0)
	q.Enqueue(exp(4, time.Minute), t0) // expired behind a live message
	q.Enqueue(msg(5), t0)
	// Expired messages are counted until Pop reaches them.
	requireCounts(t, q, 5, 0, 0, "before expiry")
	m, rm := q.Pop(at(2 * time.Minute)) // ExpiresAt <= now: 1 and 2 expired
	requireEqual(t, m.Seq, uint64(3), "first live message")
	requireEqual(t, seqsOf(rm), []uint64{1, 2}, "expired")
	requireEqual(t, rm[0].Reason, ReasonExpired, "reason")
	requireEqual(t, rm[1].Reason, ReasonExpired, "reason")
	requireCounts(t, q, 3, 1, 0, "after pop")
	requireEqual(t, q.Counts().Bytes, int64(30), "bytes")
	m, rm = q.Pop(at(2 * time.Minute))
	requireEqual(t, m.Seq, uint64(5), "second live message")
	requireEqual(t, seqsOf(rm), []uint64{4}, "expired")
	// Only expired messages left: nil, with the removals.
	q.Enqueue(exp(6, 3*time.Minute), t0)
	m, rm = q.Pop(at(time.Hour))
	if m != nil {
		t.Fatalf("popped %+v", m)
	}
	requireEqual(t, seqsOf(rm), []uint64{6}, "expired")
	requireCounts(t, q, 2, 2, 0, "end")
	// A message in delivery never expires here; Ack still works.
	if _, ok := q.Ack(3); !ok {
		t.Fatal("ack of an expired-in-delivery message")
	}
}

func TestMaxDeliveries(t *testing.T) {
	q := New(Options{MaxDeliveries: 2})
	q.Enqueue(msg(1), t0)
	q.Enqueue(msg(2), t0)
	q.Pop(t0)
	q.Pop(t0)
	if rm := q.Cancel([]uint64{1, 2}, t0); rm != nil {
		t.Fatalf("first cancel removed %v", seqsOf(rm))
	}
	m, _ := q.Pop(t0)
	requireEqual(t, m.DeliveryCount, 2, "DeliveryCount")
	rm := q.Nack(1, t0)
	requireEqual(t, seqsOf(rm), []uint64{1}, "dead-lettered on nack")
	requireEqual(t, rm[0].Reason, ReasonMaxDeliveries, "reason")
	requireCounts(t, q, 1, 0, 0, "after nack")
	q.Pop(t0)
	rm = q.Cancel([]uint64{2}, t0)
	requireEqual(t, seqsOf(rm), []uint64{2}, "dead-lettered on cancel")
	requireEqual(t, rm[0].Reason, ReasonMaxDeliveries, "reason")
	requireCounts(t, q, 0, 0, 0, "empty")
	requireEqual(t, q.Counts().Bytes, int64(0), "bytes")

	// A preset DeliveryCount (recovered message) counts too; unlimited never dead-letters.
	q = New(Options{MaxDeliveries: 3})
	r := msg(7)
	r.DeliveryCount = 2
	q.Enqueue(r, t0)
	q.Pop(t0)
	requireEqual(t, seqsOf(q.Nack(7, t0)), []uint64{7}, "recovered")
	q = New(Options{})
	q.Enqueue(msg(8), t0)
	for range 100 {
		q.Pop(t0)
		if rm := q.Nack(8, t0); rm != nil {
			t.Fatalf("unlimited removed %v", seqsOf(rm))
		}
	}
}

// Dead-lettered messages are reported first, in consumption order, then the ring's removals.
func TestCancelRemovalOrder(t *testing.T) {
	q := New(Options{MaxDeliveries: 2, RingSize: 2})
	for seq := uint64(1); seq <= 4; seq++ {
		m := msg(seq)
		if seq%2 == 0 {
			m.DeliveryCount = 1
		}
		q.Enqueue(m, t0)
	}
	requireCounts(t, q, 2, 0, 0, "ring of 2") // 1, 2 pushed out
	q.SetRingSize(0)
	for seq := uint64(5); seq <= 6; seq++ {
		m := msg(seq)
		m.DeliveryCount = 1
		q.Enqueue(m, t0)
	}
	for range 4 {
		q.Pop(t0) // 3 (count 1), 4 (2), 5 (2), 6 (2)
	}
	q.SetRingSize(1)
	rm := q.Cancel([]uint64{6, 5, 4, 3}, t0)
	requireEqual(t, seqsOf(rm), []uint64{4, 5, 6}, "dead letters in consumption order")
	requireEqual(t, q.readySeqs(), []uint64{3}, "ready")
	requireCounts(t, q, 1, 0, 0, "end")
}

func TestRedeliveryDelay(t *testing.T) {
	q := New(Options{RedeliveryDelay: 30 * time.Second})
	q.Enqueue(msg(1), t0)
	q.Enqueue(msg(2), t0)
	q.Pop(t0)
	if rm := q.Nack(1, at(10*time.Second)); rm != nil {
		t.Fatalf("removed %v", seqsOf(rm))
	}
	requireCounts(t, q, 2, 0, 1, "nacked 1 scheduled")
	due, ok := q.NextDue()
	requireEqual(t, ok, true, "NextDue ok")
	requireEqual(t, due, at(40*time.Second), "NextDue")
	m, _ := q.Pop(at(20 * time.Second))
	requireEqual(t, m.Seq, uint64(2), "2 overtakes the delayed 1")
	q.Enqueue(msg(3), at(20*time.Second))
	// At 12:00:40, 1 is due and joins the head, ahead of 3.
	m, _ = q.Pop(at(40 * time.Second))
	requireEqual(t, m.Seq, uint64(1), "1 redelivered at the head")
	requireEqual(t, m.DeliveryCount, 2, "DeliveryCount")
	requireCounts(t, q, 3, 2, 0, "end")
	// Cancel ignores the delay.
	q.Cancel([]uint64{1}, at(41*time.Second))
	requireEqual(t, q.readySeqs(), []uint64{1, 3}, "cancel goes to the head")
	// A nack of an unknown seq does nothing.
	if rm := q.Nack(42, at(time.Minute)); rm != nil {
		t.Fatal("unknown nack removed")
	}
	requireCounts(t, q, 3, 1, 0, "unchanged")
}

func TestScheduled(t *testing.T) {
	q := New(Options{})
	for _, s := range []struct {
		seq uint64
		due time.Duration
	}{{1, 3 * time.Minute}, {2, time.Minute}, {3, 2 * time.Minute}, {4, time.Minute}, {5, 0}} {
		m := msg(s.seq)
		if s.due > 0 {
			m.DeliverAt = at(s.due)
		}
		q.Enqueue(m, t0)
	}
	// A DeliverAt not after now is ready at once.
	now := at(2 * time.Minute)
	m := msg(6)
	m.DeliverAt = now
	q.Enqueue(m, now) // promotes 2, 4, 3 first, then 6 at the tail
	requireEqual(t, q.readySeqs(), []uint64{2, 4, 3, 5, 6}, "ready")
	requireCounts(t, q, 6, 0, 1, "one still scheduled")
	if m, _ := q.Pop(at(time.Hour)); m.Seq != 1 {
		t.Fatalf("pop got %d, want the just-due 1 at the head", m.Seq)
	}
}

func TestBytesAndPurge(t *testing.T) {
	q := New(Options{RedeliveryDelay: time.Minute})
	sized := func(seq uint64, size int, due time.Duration) *Message {
		m := &Message{Seq: seq, Size: int32(size)}
		if due > 0 {
			m.DeliverAt = at(due)
		}
		return m
	}
	q.Enqueue(sized(1, 100, 0), t0)
	q.Enqueue(sized(2, 20, 0), t0)
	q.Enqueue(sized(3, 3, time.Hour), t0)
	q.Enqueue(sized(4, 4000, 0), t0)
	q.Enqueue(sized(5, 50000, 2*time.Hour), t0)
	requireEqual(t, q.Counts().Bytes, int64(54123), "all states")
	q.Pop(t0) // 1
	q.Pop(t0) // 2
	requireEqual(t, q.Counts().Bytes, int64(54123), "delivering still counts")
	q.Ack(1)
	requireEqual(t, q.Counts().Bytes, int64(54023), "ack")
	q.Nack(2, t0) // scheduled at 12:01
	requireEqual(t, q.Counts().Bytes, int64(54023), "nack to scheduled")
	requireCounts(t, q, 4, 0, 3, "before purge")
	q.Pop(t0) // 4
	rm := q.Purge()
	requireEqual(t, seqsOf(rm), []uint64{2, 3, 5}, "purged in due order")
	for _, r := range rm {
		requireEqual(t, r.Reason, ReasonPurged, "reason")
	}
	requireCounts(t, q, 1, 1, 0, "delivering survives purge")
	requireEqual(t, q.Counts().Bytes, int64(4000), "bytes after purge")
	requireEqual(t, q.Purge(), []Removed(nil), "empty purge")
	q.Ack(4)
	requireCounts(t, q, 0, 0, 0, "empty")
	requireEqual(t, q.Counts().Bytes, int64(0), "bytes")

	// Purge of a large ready list releases the backing array and keeps order.
	for seq := uint64(10); seq < 5010; seq++ {
		q.Enqueue(msg(seq), t0)
	}
	rm = q.Purge()
	requireEqual(t, len(rm), 5000, "purged")
	requireEqual(t, rm[0].Msg.Seq, uint64(10), "head first")
	requireEqual(t, rm[4999].Msg.Seq, uint64(5009), "tail last")
	requireEqual(t, len(q.ready.lv(0).buf), 0, "backing array released")
	requireCounts(t, q, 0, 0, 0, "purged")
}

// The []Removed buffer is reused: the previous result is cleared by the next call.
func TestRemovedBufferReuse(t *testing.T) {
	q := New(Options{RingSize: 1})
	q.Enqueue(msg(1), t0)
	rm := q.Enqueue(msg(2), t0)
	requireEqual(t, seqsOf(rm), []uint64{1}, "first")
	rm2 := q.Enqueue(msg(3), t0)
	requireEqual(t, seqsOf(rm2), []uint64{2}, "second")
	if rm[0].Msg.Seq != 2 {
		t.Fatal("result buffer not reused")
	}
	if rm3 := q.Enqueue(msg(4), t0); len(rm3) != 1 {
		t.Fatal("expected one removal")
	}
	if rm := q.Promote(t0); rm != nil || q.removed[:1][0].Msg != nil {
		t.Fatal("an empty result must clear the previous one")
	}
}

func TestReasonString(t *testing.T) {
	want := map[Reason]string{ReasonRing: "ring", ReasonExpired: "expired",
		ReasonMaxDeliveries: "max_deliveries", ReasonPurged: "purged", 0: "unknown", 200: "unknown"}
	for r, s := range want {
		requireEqual(t, r.String(), s, "String")
	}
	requireEqual(t, len(AllReasons()), int(numReasons)-1, "AllReasons")
}

// Steady state allocates nothing: Enqueue+Pop+Ack on an unbounded queue, and Enqueue into a
// full ring, each removal reported through the reused buffer.
func TestAllocs(t *testing.T) {
	q := New(Options{})
	m := msg(1)
	cycle := func() {
		m.Seq++
		q.Enqueue(m, t0)
		p, _ := q.Pop(t0)
		q.Ack(p.Seq)
	}
	for range 100 {
		cycle()
	}
	if n := testing.AllocsPerRun(1000, cycle); n != 0 {
		t.Errorf("Enqueue+Pop+Ack: %v allocs, want 0", n)
	}

	r := New(Options{RingSize: 1000})
	msgs := make([]*Message, 1024)
	for i := range msgs {
		msgs[i] = msg(uint64(i))
		r.Enqueue(msgs[i], t0)
	}
	i := 0
	if n := testing.AllocsPerRun(10000, func() {
		i++
		if rm := r.Enqueue(msgs[i&1023], t0); len(rm) != 1 {
			t.Fatal("ring did not remove one")
		}
	}); n != 0 {
		t.Errorf("ring Enqueue: %v allocs, want 0", n)
	}

	// Cancel and Nack back to the head, and scheduled messages through the heap.
	s := New(Options{RedeliveryDelay: time.Second})
	seqs := []uint64{1, 2, 3}
	for _, seq := range seqs {
		s.Enqueue(msg(seq), t0)
	}
	now := t0
	other := func() {
		now = now.Add(2 * time.Second)
		for range seqs {
			s.Pop(now)
		}
		s.Cancel(seqs, now)
		s.Pop(now)
		s.Nack(1, now)
	}
	for range 100 {
		other()
	}
	if n := testing.AllocsPerRun(1000, other); n != 0 {
		t.Errorf("Cancel/Nack/Promote: %v allocs, want 0", n)
	}
}

func TestDeque(t *testing.T) {
	var d deque
	var model []uint64
	check := func(what string) {
		t.Helper()
		requireEqual(t, d.len(), len(model), what+": len")
		for i, seq := range model {
			if d.at(i).Seq != seq {
				t.Fatalf("%s: at(%d)=%d, want %d", what, i, d.at(i).Seq, seq)
			}
		}
		if len(model) > 0 && d.front().Seq != model[0] {
			t.Fatalf("%s: front", what)
		}
	}
	if d.front() != nil {
		t.Fatal("front of empty deque")
	}
	seq := uint64(0)
	// Grow through wrap-around from both ends, then shrink back.
	for round := range 3 {
		for i := range 3000 {
			seq++
			if i%3 == 0 {
				d.pushFront(msg(seq))
				model = append([]uint64{seq}, model...)
			} else {
				d.pushBack(msg(seq))
				model = append(model, seq)
			}
			check("push")
		}
		for len(model) > 10*round {
			m := d.popFront()
			requireEqual(t, m.Seq, model[0], "popFront")
			model = model[1:]
			check("pop")
		}
	}
	requireEqual(t, len(d.buf) <= 2*shrinkMinCap, true, "shrunk")
	// rotate, including on a full backing array and across the wrap-around.
	for len(model) < len(d.buf) {
		seq++
		d.pushBack(msg(seq))
		model = append(model, seq)
	}
	for range 3 * len(d.buf) / 2 {
		seq++
		old := d.rotate(msg(seq))
		requireEqual(t, old.Seq, model[0], "rotate")
		model = append(model[1:], seq)
		check("rotate")
	}
	d.reset()
	model = nil
	check("reset")
}

// Times compare on the wall clock: a DeliverAt set by Nack carries no monotonic reading, so
// the owner's timer (NextDue minus now) and Promote agree.
func TestWallClock(t *testing.T) {
	q := New(Options{RedeliveryDelay: time.Second})
	now := time.Now() // has a monotonic reading
	q.Enqueue(msg(1), now)
	q.Pop(now)
	q.Nack(1, now)
	due, ok := q.NextDue()
	requireEqual(t, ok, true, "NextDue ok")
	requireEqual(t, due, due.Round(0), "DeliverAt without monotonic reading")
	requireEqual(t, due.Equal(now.Add(time.Second)), true, "due a second later")
	if rm := q.Promote(due.Add(-time.Nanosecond)); rm != nil || q.Counts().Scheduled != 1 {
		t.Fatal("promoted early")
	}
	q.Promote(due)
	requireCounts(t, q, 1, 0, 0, "promoted when due")
}
