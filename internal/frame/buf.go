package frame

import "sync"

// BufBytes is the size of a pooled Buf: enough for the per-delivery head of a MESSAGE
// (command, subscription, ack, redelivered, delivery-count, sequence) with ordinary ids.
const BufBytes = 256

// Buf is a pooled scratch buffer for a short piece of an outgoing frame that is written
// once and then recycled (the per-delivery MESSAGE head). Get one with GetBuf, fill it with
// the Append functions through B, hand it to the connection writer, and the writer returns
// it with PutBuf once the bytes are on the socket. A Buf is owned by one goroutine at a time,
// except a static one (StaticBuf), which is read-only and may be queued any number of times.
type Buf struct {
	// B is the content. It starts as a zero-length slice of the pooled array; appending
	// beyond BufBytes moves it to the heap, which is correct but not pooled.
	B      []byte
	static bool
	arr    [BufBytes]byte
}

// StaticBuf returns a Buf whose content is build(empty slice) and that PutBuf leaves alone:
// a head that many writes share (a subscription's constant MESSAGE head), so that a delivery
// neither takes a Buf from the pool nor encodes its head. Its B must never be modified once
// made; it may be handed to any number of writers at once (they only read it).
func StaticBuf(build func([]byte) []byte) *Buf {
	b := &Buf{static: true}
	b.B = build(b.arr[:0])
	return b
}

var bufPool = sync.Pool{New: func() any { return new(Buf) }}

// GetBuf returns an empty Buf from the pool. Safe for concurrent use.
func GetBuf() *Buf {
	b := bufPool.Get().(*Buf)
	b.B = b.arr[:0]
	return b
}

// PutBuf returns b to the pool; b must not be used afterwards. A static Buf (StaticBuf) is
// left as it is. Safe for concurrent use.
func PutBuf(b *Buf) {
	if b.static {
		return
	}
	b.B = nil
	bufPool.Put(b)
}
