package frame

import "sync"

// BufBytes is the size of a pooled Buf: enough for the per-delivery head of a MESSAGE
// (command, subscription, ack, redelivered, delivery-count, sequence) with ordinary ids.
const BufBytes = 256

// Buf is a pooled scratch buffer for a short piece of an outgoing frame that is written
// once and then recycled (the per-delivery MESSAGE head). Get one with GetBuf, fill it with
// the Append functions through B, hand it to the connection writer, and the writer returns
// it with PutBuf once the bytes are on the socket. A Buf is owned by one goroutine at a time.
type Buf struct {
	// B is the content. It starts as a zero-length slice of the pooled array; appending
	// beyond BufBytes moves it to the heap, which is correct but not pooled.
	B   []byte
	arr [BufBytes]byte
}

var bufPool = sync.Pool{New: func() any { return new(Buf) }}

// GetBuf returns an empty Buf from the pool. Safe for concurrent use.
func GetBuf() *Buf {
	b := bufPool.Get().(*Buf)
	b.B = b.arr[:0]
	return b
}

// PutBuf returns b to the pool; b must not be used afterwards. Safe for concurrent use.
func PutBuf(b *Buf) {
	b.B = nil
	bufPool.Put(b)
}
