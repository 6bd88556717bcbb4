// Package message defines Message, the immutable unit Titan routes, stores and delivers, and
// the encoding of MESSAGE frames from it.
//
// A Message is built once at ingress and shared read-only by every queue, subscription and
// connection it reaches. The part of a MESSAGE frame that is the same for every subscriber
// (destination, content-length, user headers, body) is encoded once per STOMP version and
// cached on the Message; only the per-delivery headers (subscription, message-id, ack,
// redelivered) are written per subscriber ("encode once, send many"). A SEND's message is
// built by Pack, which encodes the STOMP 1.2 tail at once and keeps the message, its
// headers, the tail and every string in one allocation.
package message

import (
	"errors"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/titan-broker/titan/internal/frame"
)

// Message is one published message. All fields are set before the message is shared and are
// never mutated afterwards, so a *Message is safe for concurrent readers.
type Message struct {
	// ID is the broker-assigned message-id, unique per broker process lifetime (and, for stored
	// messages, stable across redeliveries and restarts).
	ID string
	// Group is the destination group ("default" when the publisher named none).
	Group string
	// Destination is the canonical egress destination ("/topic/orders/eu").
	Destination string
	// Headers are the user-visible headers after ingress mapping (DESIGN §6): standard and
	// custom headers, first occurrence only, machinery and reserved names removed.
	Headers []frame.Header
	// Body is the payload, byte-exact. Read-only.
	Body []byte
	// TimestampMs is the broker's acceptance time in Unix milliseconds.
	TimestampMs int64
	// ExpiresMs is the absolute expiry in Unix milliseconds; 0 means never.
	ExpiresMs int64
	// DeliverAtMs is the scheduled delivery time in Unix milliseconds; 0 means at once.
	DeliverAtMs int64
	// Sequence is the store sequence for durable patterns (0 when not stored).
	Sequence uint64
	// DuplicateSeq is the store sequence of the duplicate-id record committed in the same
	// batch as the message (durable.Log, for a SEND carrying _AMQ_DUPL_ID); 0 for none. It
	// lets a message refused after it was stored take its id record with it.
	DuplicateSeq uint64

	// The shared MESSAGE tail (see Shared). STOMP 1.2's is kept inline: Pack writes it with
	// the message, and nearly every client speaks 1.2. Those of 1.0 and 1.1 live in a block
	// made on first use, so a message no 1.0 or 1.1 subscriber sees does not carry their
	// room (72 bytes per message: the Message is 184 bytes, not 256).
	tail12    []byte                    // STOMP 1.2 tail; written by Pack (packed) or in once12
	legacy    atomic.Pointer[legacyEnc] // 1.0 and 1.1 tails; set once, by compare-and-swap
	dropped12 int32                     // headers 1.2 could not represent; written with tail12
	once12    sync.Once                 // Do's return orders the writes above before every read
	// packed is set by Pack, which writes tail12 and dropped12 before the message is
	// shared: Shared then reads them without once12 (marking a fresh sync.Once done takes
	// its mutex, 1.7% of a durable queue's CPU in a profile of the real binary, issue 33).
	packed bool

	// Persistent is false only when the publisher sent persistent:false.
	Persistent bool
	// DuplicateClaimed is set by the router's duplicate stage when this message's SEND
	// claimed its duplicate id (_AMQ_DUPL_ID) on its destination: the durable store then
	// writes the id's record in the message's own batch (durable.Log.DuplicateHeader). A
	// copy made from it (a durable topic subscription's, a dead letter) does not carry it.
	DuplicateClaimed bool
}

// legacyEnc holds a message's shared tails for STOMP 1.0 and 1.1 (index version-1).
type legacyEnc struct {
	enc     [2][]byte    // written in once
	dropped [2]int32     // written in once
	once    [2]sync.Once // Do's return orders the writes above before every read
}

// Size returns the bytes the message accounts for in queue limits: body plus header text.
func (m *Message) Size() int {
	n := len(m.Body) + len(m.Destination) + len(m.ID)
	for _, h := range m.Headers {
		n += len(h.Key) + len(h.Value) + 2
	}
	return n
}

// Header returns the first user header named key.
func (m *Message) Header(key string) (string, bool) {
	for _, h := range m.Headers {
		if h.Key == key {
			return h.Value, true
		}
	}
	return "", false
}

// Shared returns the encoded tail of a MESSAGE frame for version v: every header common to all
// subscribers, the blank line, the body and frame.Terminator (NUL, LF). dropped counts headers v cannot
// represent (they are left out, DESIGN §6). The slice is shared and must not be modified. Safe
// for concurrent use; encodes at most once per version.
func (m *Message) Shared(v frame.Version) (tail []byte, dropped int) {
	if v < frame.V10 || v >= frame.V12 {
		if !m.packed {
			m.once12.Do(func() { m.tail12, m.dropped12 = m.encode(frame.V12) })
		}
		return m.tail12, int(m.dropped12)
	}
	l := m.legacy.Load()
	if l == nil {
		l = new(legacyEnc)
		if !m.legacy.CompareAndSwap(nil, l) {
			l = m.legacy.Load()
		}
	}
	i := int(v) - 1
	l.once[i].Do(func() { l.enc[i], l.dropped[i] = m.encode(v) })
	return l.enc[i], int(l.dropped[i])
}

// encode returns the shared tail for version v and the number of headers v cannot
// represent.
func (m *Message) encode(v frame.Version) ([]byte, int32) {
	b := make([]byte, 0, 128+len(m.Body)+len(m.Destination)+len(frame.Terminator))
	var ok bool
	nd := 0
	b, _ = frame.AppendHeader(b, frame.HdrDestination, m.Destination, v, false)
	b, _ = frame.AppendHeader(b, frame.HdrMessageID, m.ID, v, false)
	if m.Group != "" && m.Group != "default" {
		b, _ = frame.AppendHeader(b, frame.HdrGroup, m.Group, v, false)
	}
	b = frame.AppendContentLength(b, len(m.Body))
	for _, h := range m.Headers {
		if b, ok = frame.AppendHeader(b, h.Key, h.Value, v, false); !ok {
			nd++
		}
	}
	b = append(b, '\n')
	b = append(b, m.Body...)
	b = frame.AppendTerminator(b)
	return b, int32(nd)
}

// Delivery describes the per-subscriber part of one MESSAGE frame.
type Delivery struct {
	Subscription string // subscription id
	AckID        string // ack header value (1.2 and non-auto ack modes); "" for none
	Redelivered  bool
	// Extra are additional per-delivery headers (delivery-count, …); may be nil.
	Extra []frame.Header
	// Sequence, when not 0, is the message's position in its events-store log: the
	// "sequence" header, after Extra (written without a string or a slice for it).
	Sequence uint64
}

// AppendPrefix appends the head of a MESSAGE frame for one delivery at version v: the command
// line and the per-delivery headers. The frame is completed by Shared(v). The per-delivery
// headers come first so that, by first-wins, they override anything the publisher set.
func AppendPrefix(dst []byte, d *Delivery, v frame.Version) []byte {
	dst = append(dst, "MESSAGE\n"...)
	dst, _ = frame.AppendHeader(dst, frame.HdrSubscription, d.Subscription, v, false)
	if d.AckID != "" && v >= frame.V12 {
		dst, _ = frame.AppendHeader(dst, frame.HdrAck, d.AckID, v, false)
	}
	if d.Redelivered {
		dst = append(dst, "redelivered:true\n"...)
	}
	for _, h := range d.Extra {
		dst, _ = frame.AppendHeader(dst, h.Key, h.Value, v, false)
	}
	if d.Sequence != 0 {
		dst = append(dst, "sequence:"...)
		dst = strconv.AppendUint(dst, d.Sequence, 10)
		dst = append(dst, '\n')
	}
	return dst
}

var idCounter atomic.Uint64

// NewID returns a process-unique message-id of the form "<prefix>-<n>".
func NewID(prefix string) string {
	return prefix + "-" + strconv.FormatUint(idCounter.Add(1), 10)
}

// MetadataHeader is the read-only egress header carrying a native publisher's metadata as
// one JSON object (reference 003's x-kubemq-metadata, renamed). No client may set it.
const MetadataHeader = "x-titan-metadata"

// ErrInvalidHeader is the sentinel of a SEND refused for a header value the broker must
// read and cannot (expires, delay).
var ErrInvalidHeader = errors.New("message: invalid header value")
