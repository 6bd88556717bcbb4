package eventlog

import (
	"sync"

	"github.com/titan-broker/titan/internal/message"
)

// tailSize is how many of a log's newest messages its tail keeps, tailMaxBody the largest body
// it keeps and tailMaxBytes the bodies it keeps in all (bigger or older ones are read from the
// store). tailSize covers many bursts of SEND pipelines (router pipelineDepth, 256 per
// connection): a group commit publishes a pipeline's SENDs in one burst, faster than a
// reader delivers them, and a reader still catching up on earlier bursts, or on several
// producers' bursts, should find them here rather than in the store (with a 1024-deep
// pipeline a 1024-slot ring left 4% of scenario g's messages to be read back). Per log with
// live readers: a 32 KiB ring and at most tailMaxBytes of bodies held.
const (
	tailSize     = 4096
	tailMaxBody  = 16 << 10
	tailMaxBytes = 1 << 20
)

// tail is the shared live tail of one log with readers: the messages published to it most
// recently, by sequence, as the publisher built them. A reader that is caught up takes its
// next messages from here instead of scanning the store, so a message on the live tail is
// neither read back nor decoded, and its MESSAGE tail is encoded once per STOMP version for
// every subscriber (message.Message.Shared). Only messages already committed (published
// after their fsync) enter it. Safe for concurrent use.
type tail struct {
	mu    sync.Mutex
	ring  [tailSize]*message.Message // guarded by mu: ring[seq%tailSize], sequences in [lo, hi]
	hi    uint64                     // guarded by mu: the highest sequence published since the tail was made
	lo    uint64                     // guarded by mu: no sequence below lo is held (0 before the first put)
	bytes int                        // guarded by mu: the bodies held
}

// put records m (m.Sequence set). The oldest messages make room: the ring holds at most tailSize sequences and tailMaxBytes of
// bodies.
func (t *tail) put(m *message.Message) {
	seq := m.Sequence
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.lo == 0 {
		t.lo = seq
	}
	t.hi = max(t.hi, seq)
	if t.hi >= tailSize {
		t.dropBelow(t.hi - tailSize + 1)
	}
	if seq < t.lo || len(m.Body) > tailMaxBody {
		return // too old for the ring (published late by another connection), or too big
	}
	for t.bytes+len(m.Body) > tailMaxBytes && t.lo < seq {
		t.dropBelow(t.lo + 1)
	}
	i := seq % tailSize
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
	from := t.lo
	if seq-from > tailSize {
		from = seq - tailSize
	}
	for s := from; s < seq; s++ {
		i := s % tailSize
		if m := t.ring[i]; m != nil && m.Sequence < seq {
			t.bytes -= len(m.Body)
			t.ring[i] = nil
		}
	}
	t.lo = seq
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
	m := t.ring[seq%tailSize]
	t.mu.Unlock()
	if m == nil || m.Sequence != seq {
		return nil
	}
	return m
}
