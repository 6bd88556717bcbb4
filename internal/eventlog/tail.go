package eventlog

import (
	"sync"

	"github.com/titan-broker/titan/internal/message"
)

// tailMinSize is how many of a log's newest messages its tail keeps at first, tailMaxSize
// the most it grows to, tailMaxBody the largest body it keeps and tailMaxBytes the bodies it
// keeps in all (bigger or older ones are read from the store). A group commit publishes a
// SEND pipeline's SENDs in one burst (router pipelineLateBudget, shared by every
// connection), faster than a reader may deliver them, and a reader still catching up on
// earlier bursts, or on several producers' bursts, should find them here rather than in the
// store (with a 1024-deep ring, 4% of scenario g's messages were read back). So the ring
// starts small, which is all a log whose readers keep up needs, and doubles (up to
// tailMaxSize) each time a reader misses it: a message it had to read back from the store
// had left the ring (grow). Per log with live readers: an 8 KiB ring at first, 128 KiB at
// most, and at most tailMaxBytes of bodies held.
const (
	tailMinSize  = 1024
	tailMaxSize  = 16384
	tailMaxBody  = 16 << 10
	tailMaxBytes = 4 << 20
)

// tail is the shared live tail of one log with readers: the messages published to it most
// recently, by sequence, as the publisher built them. A reader that is caught up takes its
// next messages from here instead of scanning the store, so a message on the live tail is
// neither read back nor decoded, and its MESSAGE tail is encoded once per STOMP version for
// every subscriber (message.Message.Shared). Only messages already committed (published
// after their fsync) enter it. Safe for concurrent use.
type tail struct {
	mu sync.Mutex
	// ring holds ring[seq&(len(ring)-1)], sequences in [lo, hi]; its length is a power of
	// two from tailMinSize to tailMaxSize (nil before the first put). Guarded by mu.
	ring  []*message.Message
	hi    uint64 // guarded by mu: the highest sequence published since the tail was made
	lo    uint64 // guarded by mu: no sequence below lo is held (0 before the first put)
	bytes int    // guarded by mu: the bodies held
}

// put records m (m.Sequence set). The oldest messages make room: the ring holds at most
// len(ring) sequences and tailMaxBytes of bodies.
func (t *tail) put(m *message.Message) {
	seq := m.Sequence
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.ring == nil {
		t.ring = make([]*message.Message, tailMinSize)
	}
	size := uint64(len(t.ring))
	if t.lo == 0 {
		t.lo = seq
	}
	t.hi = max(t.hi, seq)
	if t.hi >= size {
		t.dropBelow(t.hi - size + 1)
	}
	if seq < t.lo || len(m.Body) > tailMaxBody {
		return // too old for the ring (published late by another connection), or too big
	}
	for t.bytes+len(m.Body) > tailMaxBytes && t.lo < seq {
		t.dropBelow(t.lo + 1)
	}
	i := seq & (size - 1)
	if old := t.ring[i]; old != nil {
		t.bytes -= len(old.Body)
	}
	t.ring[i] = m
	t.bytes += len(m.Body)
}

// dropBelow forgets the messages below seq. Amortized constant time per sequence published:
// lo only grows, and a jump of more than the ring visits each slot once. t.mu must be held.
func (t *tail) dropBelow(seq uint64) {
	if seq <= t.lo {
		return
	}
	size := uint64(len(t.ring))
	from := t.lo
	if seq-from > size {
		from = seq - size
	}
	for s := from; s < seq; s++ {
		i := s & (size - 1)
		if m := t.ring[i]; m != nil && m.Sequence < seq {
			t.bytes -= len(m.Body)
			t.ring[i] = nil
		}
	}
	t.lo = seq
}

// missed is told that a reader had to read seq, published after it subscribed, from the
// store. When seq had already left the ring (below lo), the ring doubles, up to
// tailMaxSize, so that the reader's lag fits in it next time.
func (t *tail) missed(seq uint64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	size := len(t.ring)
	if size == 0 || size >= tailMaxSize || seq >= t.lo {
		return
	}
	ring := make([]*message.Message, 2*size)
	for _, m := range t.ring {
		if m != nil { // every held sequence lies in [lo, hi], a span of at most size
			ring[m.Sequence&uint64(2*size-1)] = m
		}
	}
	t.ring = ring
}

// published returns the highest sequence published since the tail was made.
func (t *tail) published() uint64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.hi
}

// get returns the message with sequence seq when the tail still has it, else nil.
func (t *tail) get(seq uint64) *message.Message {
	t.mu.Lock()
	var m *message.Message
	if n := uint64(len(t.ring)); n > 0 {
		m = t.ring[seq&(n-1)]
	}
	t.mu.Unlock()
	if m == nil || m.Sequence != seq {
		return nil
	}
	return m
}
