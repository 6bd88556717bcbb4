package queue

import (
	"testing"
	"time"
)

// benchMsgs returns n preallocated messages so the benchmarks measure the queue, not the
// caller's allocations.
func benchMsgs(n int) []*Message {
	msgs := make([]*Message, n)
	for i := range msgs {
		msgs[i] = &Message{Seq: uint64(i), Size: 256}
	}
	return msgs
}

// reportRate adds a msgs/s metric for one message per iteration.
func reportRate(b *testing.B) {
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
}

// BenchmarkCycle is the steady state of a consumed queue: Enqueue, Pop and Ack one message.
func BenchmarkCycle(b *testing.B) {
	q := New(Options{})
	m := &Message{Size: 256}
	now := t0
	b.ReportAllocs()
	for b.Loop() {
		m.Seq++
		q.Enqueue(m, now)
		p, _ := q.Pop(now)
		q.Ack(p.Seq)
	}
	reportRate(b)
}

// BenchmarkEnqueue compares Enqueue into a full ring of 1000, where each enqueue removes the
// head, with Enqueue into an unbounded queue (the issue allows the ring at most 20% more).
//
// The unbounded queue really grows; to bound memory it is replaced by a fresh one every
// unboundedReset messages, so its figure includes the amortized cost of growing the deque.
// "unbounded-warm" instead empties the deque in place (not timed as a queue operation, but
// still inside the loop), measuring the pure append into a backing array that is already big
// enough.
func BenchmarkEnqueue(b *testing.B) {
	const ringSize = 1000
	const unboundedReset = 1 << 16
	msgs := benchMsgs(1024)
	now := t0

	b.Run("ring=1000", func(b *testing.B) {
		q := New(Options{RingSize: ringSize})
		for i := range ringSize {
			q.Enqueue(msgs[i], now)
		}
		i := 0
		b.ReportAllocs()
		for b.Loop() {
			i++
			q.Enqueue(msgs[i&1023], now)
		}
		if c := q.Counts(); c.Messages != ringSize {
			b.Fatalf("ring holds %d", c.Messages)
		}
		reportRate(b)
	})
	b.Run("unbounded", func(b *testing.B) {
		q := New(Options{})
		i := 0
		b.ReportAllocs()
		for b.Loop() {
			i++
			if i&(unboundedReset-1) == 0 {
				q = New(Options{})
			}
			q.Enqueue(msgs[i&1023], now)
		}
		reportRate(b)
	})
	b.Run("unbounded-warm", func(b *testing.B) {
		q := New(Options{})
		i := 0
		b.ReportAllocs()
		for b.Loop() {
			i++
			if i&(unboundedReset-1) == 0 {
				d := q.ready.lv(0) // every benchmark message has priority 0
				clear(d.buf)
				d.head, d.n = 0, 0
				q.ready.n = 0
			}
			q.Enqueue(msgs[i&1023], now)
		}
		reportRate(b)
	})
}

// BenchmarkCancel returns a batch of 64 deliveries to the head, as a consumer close does, and
// takes them again.
func BenchmarkCancel(b *testing.B) {
	const batch = 64
	q := New(Options{RingSize: 1000})
	msgs := benchMsgs(batch)
	seqs := make([]uint64, batch)
	for i, m := range msgs {
		q.Enqueue(m, t0)
		seqs[i] = m.Seq
	}
	b.ReportAllocs()
	for b.Loop() {
		for range batch {
			q.Pop(t0)
		}
		q.Cancel(seqs, t0)
	}
	b.ReportMetric(float64(b.N*batch)/b.Elapsed().Seconds(), "msgs/s")
}

// BenchmarkScheduled enqueues a message scheduled one second later and pops the one that came
// due, with 1000 messages on the heap.
func BenchmarkScheduled(b *testing.B) {
	q := New(Options{})
	msgs := benchMsgs(2048)
	now := t0
	for i := range 1000 {
		msgs[i].DeliverAt = now.Add(time.Duration(i+1) * time.Millisecond)
		q.Enqueue(msgs[i], now)
	}
	i := 1000
	b.ReportAllocs()
	for b.Loop() {
		now = now.Add(time.Millisecond)
		m := msgs[i&2047]
		i++
		m.DeliverAt = now.Add(time.Second)
		q.Enqueue(m, now)
		if p, _ := q.Pop(now); p != nil {
			q.Ack(p.Seq)
		}
	}
	reportRate(b)
}
