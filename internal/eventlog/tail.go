package eventlog

import (
	"sync"

	"github.com/titan-broker/titan/internal/message"
)

// tailSize is how many of a log's newest messages its tail keeps, and tailMaxBody the largest
// body it keeps (bigger ones are read from the store): at most 128 × 16 KiB per log with live
// readers.
const (
	tailSize    = 128
	tailMaxBody = 16 << 10
)

// tail is the shared live tail of one log with readers: the messages published to it most
// recently, by sequence, as the publisher built them. A reader that is caught up takes its
// next messages from here instead of scanning the store, so a message on the live tail is
// neither read back nor decoded, and its MESSAGE tail is encoded once per STOMP version for
// every subscriber (message.Message.Shared). Only messages already committed (published
// after their fsync) enter it. Safe for concurrent use.
type tail struct {
	mu   sync.Mutex
	ring [tailSize]*message.Message // guarded by mu: ring[seq%tailSize]
	hi   uint64                     // guarded by mu: the highest sequence published since the tail was made
}

// put records m (m.Sequence set).
func (t *tail) put(m *message.Message) {
	t.mu.Lock()
	t.hi = max(t.hi, m.Sequence)
	if len(m.Body) <= tailMaxBody {
		t.ring[m.Sequence%tailSize] = m
	}
	t.mu.Unlock()
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
