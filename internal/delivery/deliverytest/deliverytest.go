// Package deliverytest holds the delivery.Writer fakes the tests of delivery and of the
// pattern packages share: Null, which takes every MESSAGE, and Buffered, an outbound buffer
// that drains only when the test says so. It is test support: only _test.go files import
// it. It imports frame and nothing else of ours, so delivery's own tests can use it.
package deliverytest

import (
	"bytes"
	"sync"

	"github.com/titan-broker/titan/internal/frame"
)

// Null is a delivery.Writer that takes every MESSAGE and recycles its head: the writer of
// benchmarks that measure the path up to the write. It speaks STOMP 1.2.
type Null struct{}

// Version implements delivery.Writer: STOMP 1.2.
func (Null) Version() frame.Version { return frame.V12 }

// QueuedBytes implements delivery.Writer: nothing is ever queued.
func (Null) QueuedBytes() int64 { return 0 }

// WriteMessage implements delivery.Writer: it returns the head to the pool and takes it.
func (Null) WriteMessage(p *frame.Buf, _ []byte) bool {
	frame.PutBuf(p)
	return true
}

// WriteEvent implements delivery.Writer like WriteMessage; it never reports congestion.
func (w Null) WriteEvent(p *frame.Buf, s []byte, _ bool) (bool, <-chan struct{}) {
	return w.WriteMessage(p, s), nil
}

// Buffered is a delivery.Writer and delivery.SlowCloser with an outbound buffer that
// nothing drains unless the test says so (Drain): a stalled subscriber never does. Every
// accepted MESSAGE adds its head and shared tail to QueuedBytes; a write without force is
// refused when something is queued and it would take the total over Limit (0: no limit),
// as a connection over its outbound limit refuses; CloseSlowConsumer closes it, after which
// every write is refused. It records each accepted MESSAGE's body. It speaks STOMP 1.2
// and is safe for concurrent use.
type Buffered struct {
	// Limit is the outbound limit in bytes, 0 for none; set it before the first write.
	Limit int64

	mu      sync.Mutex
	queued  int64
	bodies  []string
	closing bool
	slow    []string
}

// Version implements delivery.Writer: STOMP 1.2.
func (w *Buffered) Version() frame.Version { return frame.V12 }

// QueuedBytes implements delivery.Writer: the bytes accepted since the last Drain.
func (w *Buffered) QueuedBytes() int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.queued
}

// WriteMessage implements delivery.Writer: WriteEvent without force.
func (w *Buffered) WriteMessage(p *frame.Buf, shared []byte) bool {
	ok, _ := w.WriteEvent(p, shared, false)
	return ok
}

// WriteEvent implements delivery.Writer under the rules of the type's doc; on acceptance
// it records the body and returns the head to the pool. It never reports congestion.
func (w *Buffered) WriteEvent(p *frame.Buf, shared []byte, force bool) (bool, <-chan struct{}) {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := int64(len(p.B) + len(shared))
	if w.closing || (!force && w.Limit > 0 && w.queued > 0 && w.queued+n > w.Limit) {
		return false, nil
	}
	w.queued += n
	w.bodies = append(w.bodies, Body(shared))
	frame.PutBuf(p)
	return true, nil
}

// CloseSlowConsumer implements delivery.SlowCloser: it records detail and refuses every
// later write.
func (w *Buffered) CloseSlowConsumer(detail string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.closing = true
	w.slow = append(w.slow, detail)
}

// Drain empties the outbound buffer, as a client that read everything.
func (w *Buffered) Drain() {
	w.mu.Lock()
	w.queued = 0
	w.mu.Unlock()
}

// Bodies returns the bodies of the MESSAGEs accepted so far, in write order.
func (w *Buffered) Bodies() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string{}, w.bodies...)
}

// SlowCloses returns the detail of each CloseSlowConsumer call, in order.
func (w *Buffered) SlowCloses() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string{}, w.slow...)
}

// Body returns the body of a MESSAGE's shared tail: what follows its blank line, without
// the NUL and trailing newlines.
func Body(shared []byte) string {
	_, body, _ := bytes.Cut(shared, []byte("\n\n"))
	return string(bytes.TrimRight(body, "\x00\n"))
}
