package queue

import (
	"cmp"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// model is the reference model the property tests compare Queue against: plain slices and
// linear scans, written straight from the rules in the package doc.
type model struct {
	ring, maxDeliveries int
	delay               time.Duration
	ready               []*mmsg // head first
	scheduled           []*mmsg // any order
	delivering          []*mmsg // consumption order
	removed             []rem
}

type mmsg struct {
	seq                 uint64
	size                int
	prio                int // 0-9
	deliverAt, expireAt time.Time
	count               int
}

type rem struct {
	seq    uint64
	reason Reason
}

func (m *model) drop(x *mmsg, r Reason) { m.removed = append(m.removed, rem{x.seq, r}) }

func (m *model) ringCount() int { return len(m.ready) + len(m.delivering) }

// insertTail adds x at the tail of its priority: the ready list is kept in delivery order,
// higher priorities first.
func (m *model) insertTail(x *mmsg) {
	i := len(m.ready)
	for i > 0 && m.ready[i-1].prio < x.prio {
		i--
	}
	m.ready = slices.Insert(m.ready, i, x)
}

// insertHead adds x at the head of its priority.
func (m *model) insertHead(x *mmsg) {
	i := 0
	for i < len(m.ready) && m.ready[i].prio > x.prio {
		i++
	}
	m.ready = slices.Insert(m.ready, i, x)
}

// enforce: up to n times, while over the ring, remove the head.
func (m *model) enforce(n int) {
	for range n {
		if m.ring > 0 && m.ringCount() > m.ring && len(m.ready) > 0 {
			m.drop(m.ready[0], ReasonRing)
			m.ready = m.ready[1:]
		}
	}
}

func (m *model) promote(now time.Time) {
	var due, rest []*mmsg
	for _, x := range m.scheduled {
		if x.deliverAt.After(now) {
			rest = append(rest, x)
		} else {
			due = append(due, x)
		}
	}
	m.scheduled = rest
	slices.SortFunc(due, func(a, b *mmsg) int {
		return cmp.Or(a.deliverAt.Compare(b.deliverAt), cmp.Compare(a.seq, b.seq))
	})
	for i := len(due) - 1; i >= 0; i-- {
		m.insertHead(due[i])
	}
	m.enforce(len(due))
}

func (m *model) enqueue(x *mmsg, now time.Time) {
	m.promote(now)
	if x.deliverAt.After(now) {
		m.scheduled = append(m.scheduled, x)
		return
	}
	// The ring rule for a tail enqueue: the head goes first when the ring is full and a
	// message is ready, never x itself.
	if m.ring > 0 && len(m.ready) > 0 && m.ringCount()+1 > m.ring {
		m.drop(m.ready[0], ReasonRing)
		m.ready = m.ready[1:]
	}
	m.insertTail(x)
}

// popFunc is PopFunc: the first ready message pick accepts, expired ones passed removed.
func (m *model) popFunc(now time.Time, pick func(*mmsg) bool) *mmsg {
	m.promote(now)
	for i := 0; i < len(m.ready); {
		x := m.ready[i]
		if !x.expireAt.IsZero() && !x.expireAt.After(now) {
			m.drop(x, ReasonExpired)
			m.ready = slices.Delete(m.ready, i, i+1)
			continue
		}
		if !pick(x) {
			i++
			continue
		}
		m.ready = slices.Delete(m.ready, i, i+1)
		x.count++
		m.delivering = append(m.delivering, x)
		return x
	}
	return nil
}

func (m *model) pop(now time.Time) *mmsg {
	m.promote(now)
	for len(m.ready) > 0 {
		x := m.ready[0]
		m.ready = m.ready[1:]
		if !x.expireAt.IsZero() && !x.expireAt.After(now) {
			m.drop(x, ReasonExpired)
			continue
		}
		x.count++
		m.delivering = append(m.delivering, x)
		return x
	}
	return nil
}

func (m *model) take(seq uint64) *mmsg {
	for i, x := range m.delivering {
		if x.seq == seq {
			m.delivering = slices.Delete(m.delivering, i, i+1)
			return x
		}
	}
	return nil
}

func (m *model) ack(seq uint64) *mmsg { return m.take(seq) }

func (m *model) exhausted(x *mmsg) bool { return m.maxDeliveries > 0 && x.count >= m.maxDeliveries }

func (m *model) cancel(seqs []uint64, now time.Time) {
	m.promote(now)
	var back []*mmsg // consumption order: delivering is kept in Pop order
	for _, x := range m.delivering {
		if slices.Contains(seqs, x.seq) {
			back = append(back, x)
		}
	}
	for _, x := range back {
		m.take(x.seq)
	}
	var keep []*mmsg
	for _, x := range back {
		if m.exhausted(x) {
			m.drop(x, ReasonMaxDeliveries)
		} else {
			keep = append(keep, x)
		}
	}
	// Reverse order of consumption, each to the head of its priority: the first consumed
	// ends up first.
	for i := len(keep) - 1; i >= 0; i-- {
		m.insertHead(keep[i])
	}
	m.enforce(len(keep))
}

func (m *model) nack(seq uint64, now time.Time) {
	m.promote(now)
	x := m.take(seq)
	switch {
	case x == nil:
	case m.exhausted(x):
		m.drop(x, ReasonMaxDeliveries)
	case m.delay > 0:
		x.deliverAt = now.Add(m.delay)
		m.scheduled = append(m.scheduled, x)
	default:
		m.insertHead(x)
		m.enforce(1)
	}
}

func (m *model) purge() {
	for _, x := range m.ready {
		m.drop(x, ReasonPurged)
	}
	slices.SortFunc(m.scheduled, func(a, b *mmsg) int {
		return cmp.Or(a.deliverAt.Compare(b.deliverAt), cmp.Compare(a.seq, b.seq))
	})
	for _, x := range m.scheduled {
		m.drop(x, ReasonPurged)
	}
	m.ready, m.scheduled = nil, nil
}

func (m *model) counts() Counts {
	c := Counts{Ready: len(m.ready), Delivering: len(m.delivering), Scheduled: len(m.scheduled)}
	c.Messages = c.Ready + c.Delivering + c.Scheduled
	for _, s := range [][]*mmsg{m.ready, m.delivering, m.scheduled} {
		for _, x := range s {
			c.Bytes += int64(x.size)
		}
	}
	return c
}

// runModel drives a Queue and the model with the same random operations and compares every
// result and the full state after each one.
// With prios, messages get random priorities and some Pops are PopFuncs.
func runModel(t *testing.T, seed uint64, o Options, ops int, prios bool) {
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	q := New(o)
	m := &model{ring: max(o.RingSize, 0), maxDeliveries: max(o.MaxDeliveries, 0), delay: o.RedeliveryDelay}
	now := t0
	var seq uint64
	var log []string
	fail := func(format string, args ...any) {
		t.Helper()
		start := max(0, len(log)-20)
		t.Fatalf("seed %d, op %d: %s\nlast ops:\n%v", seed, len(log), fmt.Sprintf(format, args...), log[start:])
	}
	compareRemoved := func(got []Removed) {
		t.Helper()
		if len(got) != len(m.removed) {
			fail("removed %v, model %v", seqsOf(got), m.removed)
		}
		for i, r := range got {
			if r.Msg.Seq != m.removed[i].seq || r.Reason != m.removed[i].reason {
				fail("removed[%d] = %d/%v, model %v", i, r.Msg.Seq, r.Reason, m.removed)
			}
		}
		m.removed = m.removed[:0]
	}
	deliveringSeqs := func() []uint64 {
		var s []uint64
		for _, x := range m.delivering {
			s = append(s, x.seq)
		}
		return s
	}
	for range ops {
		if rng.IntN(4) == 0 {
			now = now.Add(time.Duration(rng.IntN(3000)) * time.Millisecond)
		}
		switch op := rng.IntN(100); {
		case op < 35: // Enqueue
			seq++
			x := &mmsg{seq: seq, size: rng.IntN(1000), prio: DefaultPriority}
			if prios && rng.IntN(2) == 0 {
				x.prio = rng.IntN(Priorities)
			}
			if rng.IntN(5) == 0 {
				x.deliverAt = now.Add(time.Duration(rng.IntN(10)-2) * time.Second)
			}
			if rng.IntN(5) == 0 {
				x.expireAt = now.Add(time.Duration(rng.IntN(10)-2) * time.Second)
			}
			log = append(log, fmt.Sprintf("@%v Enqueue(%d prio %d due %v exp %v)", now.Sub(t0), seq, x.prio, rel(x.deliverAt), rel(x.expireAt)))
			m.enqueue(x, now)
			compareRemoved(q.Enqueue(&Message{Seq: seq, Size: int32(x.size), Priority: uint8(x.prio), DeliverAt: x.deliverAt, ExpiresAt: x.expireAt}, now))
		case op < 45 && prios: // PopFunc with a picky consumer: seq ≡ k (mod 3)
			k := rng.Uint64N(3)
			log = append(log, fmt.Sprintf("@%v PopFunc(seq%%3 == %d)", now.Sub(t0), k))
			want := m.popFunc(now, func(x *mmsg) bool { return x.seq%3 == k })
			got, rm := q.PopFunc(now, func(x *Message) bool { return x.Seq%3 == k })
			compareRemoved(rm)
			switch {
			case want == nil && got == nil:
			case want == nil || got == nil || got.Seq != want.seq || int(got.DeliveryCount) != want.count:
				fail("PopFunc = %+v, model %+v", got, want)
			}
		case op < 60: // Pop
			log = append(log, fmt.Sprintf("@%v Pop", now.Sub(t0)))
			want := m.pop(now)
			got, rm := q.Pop(now)
			compareRemoved(rm)
			switch {
			case want == nil && got == nil:
			case want == nil || got == nil || got.Seq != want.seq || int(got.DeliveryCount) != want.count:
				fail("Pop = %+v, model %+v", got, want)
			}
		case op < 75: // Ack, sometimes of an unknown seq
			s := rng.Uint64N(seq + 2)
			if d := deliveringSeqs(); len(d) > 0 && rng.IntN(4) > 0 {
				s = d[rng.IntN(len(d))]
			}
			log = append(log, fmt.Sprintf("Ack(%d)", s))
			want := m.ack(s)
			got, ok := q.Ack(s)
			if ok != (want != nil) || ok && got.Seq != s {
				fail("Ack(%d) = %v %v, model %v", s, got, ok, want)
			}
		case op < 83: // Cancel a random subset, in consumption or random order, with noise
			d := deliveringSeqs()
			var seqs []uint64
			for _, s := range d {
				if rng.IntN(3) > 0 {
					seqs = append(seqs, s)
				}
			}
			if rng.IntN(2) == 0 {
				rng.Shuffle(len(seqs), func(i, j int) { seqs[i], seqs[j] = seqs[j], seqs[i] })
			}
			if rng.IntN(4) == 0 {
				seqs = append(seqs, seq+1) // unknown
				if len(seqs) > 1 {
					seqs = append(seqs, seqs[0]) // repeat
				}
			}
			log = append(log, fmt.Sprintf("@%v Cancel(%v)", now.Sub(t0), seqs))
			m.cancel(seqs, now)
			compareRemoved(q.Cancel(seqs, now))
		case op < 91: // Nack
			s := seq + 1
			if d := deliveringSeqs(); len(d) > 0 && rng.IntN(5) > 0 {
				s = d[rng.IntN(len(d))]
			}
			log = append(log, fmt.Sprintf("@%v Nack(%d)", now.Sub(t0), s))
			m.nack(s, now)
			compareRemoved(q.Nack(s, now))
		case op < 95: // Promote
			log = append(log, fmt.Sprintf("@%v Promote", now.Sub(t0)))
			m.promote(now)
			compareRemoved(q.Promote(now))
		case op < 96: // Purge
			log = append(log, "Purge")
			m.purge()
			compareRemoved(q.Purge())
		default: // SetRingSize, only on ring runs
			if o.RingSize <= 0 {
				continue
			}
			n := rng.IntN(2*o.RingSize+1) - 1
			log = append(log, fmt.Sprintf("SetRingSize(%d)", n))
			m.ring = max(n, 0)
			q.SetRingSize(n)
			if want := max(n, -1); want == 0 && q.RingSize() != -1 || want != 0 && q.RingSize() != want {
				fail("RingSize() = %d after SetRingSize(%d)", q.RingSize(), n)
			}
		}
		if got, want := q.Counts(), m.counts(); got != want {
			fail("Counts = %+v, model %+v", got, want)
		}
		var wantReady []uint64
		for _, x := range m.ready {
			wantReady = append(wantReady, x.seq)
		}
		if got := q.readySeqs(); !slices.Equal(got, wantReady) {
			fail("ready = %v, model %v", got, wantReady)
		}
		for _, x := range m.delivering {
			if d, ok := q.Delivering(x.seq); !ok || int(d.DeliveryCount) != x.count {
				fail("Delivering(%d) = %+v %v", x.seq, d, ok)
			}
		}
		if len(m.scheduled) > 0 {
			first := slices.MinFunc(m.scheduled, func(a, b *mmsg) int { return a.deliverAt.Compare(b.deliverAt) })
			if due, ok := q.NextDue(); !ok || !due.Equal(first.deliverAt) {
				fail("NextDue = %v %v, model %v", due, ok, first.deliverAt)
			}
		} else if _, ok := q.NextDue(); ok {
			fail("NextDue with nothing scheduled")
		}
		checkInvariants(t, q)
	}
}

// rel formats a model time relative to t0, "-" for the zero time.
func rel(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.Sub(t0).String()
}

func TestModel(t *testing.T) {
	for _, tc := range []struct {
		name  string
		o     Options
		prios bool
	}{
		{"unbounded", Options{}, false},
		{"ring", Options{RingSize: 5}, false},
		{"ring1", Options{RingSize: 1}, false},
		{"ring-maxdeliveries", Options{RingSize: 8, MaxDeliveries: 3}, false},
		{"ring-delay", Options{RingSize: 4, MaxDeliveries: 4, RedeliveryDelay: 2 * time.Second}, false},
		{"delay", Options{RedeliveryDelay: time.Second}, false},
		{"priority", Options{}, true},
		{"priority-ring", Options{RingSize: 5}, true},
		{"priority-ring-delay", Options{RingSize: 4, MaxDeliveries: 4, RedeliveryDelay: 2 * time.Second}, true},
		{"priority-delay", Options{RedeliveryDelay: time.Second, MaxDeliveries: 3}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// The seeds explore the state space; every configuration reaches the same
			// statements from 20 seeds on (go test -cover). A Queue is single-goroutine,
			// so the race detector has nothing to find here and only makes each seed
			// five to ten times dearer: a -race run (scripts/test) takes 40.
			seeds := 200
			switch {
			case testing.Short():
				seeds = 20
			case raceEnabled:
				seeds = 40
			}
			for seed := range uint64(seeds) {
				runModel(t, seed, tc.o, 400, tc.prios)
			}
		})
	}
}

// FuzzModel explores more seeds and configurations: go test -fuzz=FuzzModel ./internal/queue/
func FuzzModel(f *testing.F) {
	f.Add(uint64(1), int8(0), int8(0), false, false)
	f.Add(uint64(2), int8(3), int8(2), true, true)
	f.Fuzz(func(t *testing.T, seed uint64, ring, maxDeliveries int8, delay, prios bool) {
		o := Options{RingSize: int(ring), MaxDeliveries: int(maxDeliveries)}
		if delay {
			o.RedeliveryDelay = time.Second
		}
		runModel(t, seed, o, 300, prios)
	})
}
