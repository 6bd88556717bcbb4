package message

import (
	"strconv"
	"unsafe"

	"github.com/titan-broker/titan/internal/frame"
)

// Parts are the fields of a Message that Pack copies into the message's own memory. Every
// string and slice of Parts may point into a read buffer: Pack keeps none of them.
type Parts struct {
	// IDPrefix is the message-id's prefix; Pack appends "-<n>" from the process-wide counter
	// NewID uses.
	IDPrefix string
	// ID, when set, is the message-id as is (IDPrefix is not used): a message rebuilt from
	// another keeps its id.
	ID string
	// Group is the destination group ("default" is kept as the constant, not copied).
	Group string
	// Destination is the canonical egress destination, as bytes (often built on the stack).
	Destination []byte
	// Headers are the user headers after ingress mapping.
	Headers []frame.Header
	// Body is the payload.
	Body []byte
	// TimestampMs, ExpiresMs, DeliverAtMs and Persistent are copied to the Message as given.
	TimestampMs, ExpiresMs, DeliverAtMs int64
	Persistent                          bool
}

// inlineHeaders is the most user headers a packed message holds in its own block, without a
// separate header slice (most SENDs carry content-type and at most a few custom headers).
const inlineHeaders = 4

// defaultGroup is dest.DefaultGroup (not imported: message sits below dest).
const defaultGroup = "default"

// block is a Message, its headers and its bytes in one allocation. H is a frame.Header
// array type (room for the headers: 0, 1, 2 or 4 of them, so that a message without user
// headers carries no header room); A is a byte array type (the size class of the bytes).
// buf holds the STOMP 1.2 shared MESSAGE tail, from which ID, Destination, Group, the header
// strings and Body are sliced, then the raw copies of those that 1.2 escaping changed.
type block[H, A any] struct {
	m   Message
	hdr H
	buf A
}

// newBlock allocates a block with header room H and byte area A and returns its message,
// its header room (empty, with the capacity H holds) and its byte area.
func newBlock[H, A any]() (*Message, []frame.Header, []byte) {
	b := new(block[H, A])
	var hdr []frame.Header
	if nh := unsafe.Sizeof(b.hdr) / unsafe.Sizeof(frame.Header{}); nh > 0 {
		hdr = unsafe.Slice((*frame.Header)(unsafe.Pointer(&b.hdr)), nh)[:0]
	}
	return &b.m, hdr, unsafe.Slice((*byte)(unsafe.Pointer(&b.buf)), unsafe.Sizeof(b.buf))
}

// allocBlock returns a message, room for nh headers and n bytes in as few allocations as
// possible: one for up to inlineHeaders headers and 4 KiB of bytes (the message, headers and
// bytes together), one more for each of the headers and the bytes beyond that.
func allocBlock(nh, n int) (*Message, []frame.Header, []byte) {
	var (
		m   *Message
		hdr []frame.Header
		buf []byte
	)
	switch {
	case nh == 0:
		m, hdr, buf = allocSized[[0]frame.Header](n)
	case nh == 1:
		m, hdr, buf = allocSized[[1]frame.Header](n)
	case nh == 2:
		m, hdr, buf = allocSized[[2]frame.Header](n)
	case nh <= inlineHeaders:
		m, hdr, buf = allocSized[[inlineHeaders]frame.Header](n)
	default:
		m, _, buf = allocSized[[0]frame.Header](n)
		hdr = make([]frame.Header, 0, nh)
	}
	return m, hdr, buf[:0:n]
}

// allocSized returns a block with header room H and at least n bytes (a separate slice
// beyond 4 KiB). The byte area comes in steps of 32 bytes to 512, 64 to 1 KiB and 256 to
// 4 KiB, as the allocator's own size classes do, so that little of a block is unused beyond
// what those classes round up.
func allocSized[H any](n int) (*Message, []frame.Header, []byte) {
	switch {
	case n <= 32:
		return newBlock[H, [32]byte]()
	case n <= 64:
		return newBlock[H, [64]byte]()
	case n <= 96:
		return newBlock[H, [96]byte]()
	case n <= 128:
		return newBlock[H, [128]byte]()
	case n <= 160:
		return newBlock[H, [160]byte]()
	case n <= 192:
		return newBlock[H, [192]byte]()
	case n <= 224:
		return newBlock[H, [224]byte]()
	case n <= 256:
		return newBlock[H, [256]byte]()
	case n <= 288:
		return newBlock[H, [288]byte]()
	case n <= 320:
		return newBlock[H, [320]byte]()
	case n <= 352:
		return newBlock[H, [352]byte]()
	case n <= 384:
		return newBlock[H, [384]byte]()
	case n <= 416:
		return newBlock[H, [416]byte]()
	case n <= 448:
		return newBlock[H, [448]byte]()
	case n <= 480:
		return newBlock[H, [480]byte]()
	case n <= 512:
		return newBlock[H, [512]byte]()
	case n <= 576:
		return newBlock[H, [576]byte]()
	case n <= 640:
		return newBlock[H, [640]byte]()
	case n <= 704:
		return newBlock[H, [704]byte]()
	case n <= 768:
		return newBlock[H, [768]byte]()
	case n <= 832:
		return newBlock[H, [832]byte]()
	case n <= 896:
		return newBlock[H, [896]byte]()
	case n <= 960:
		return newBlock[H, [960]byte]()
	case n <= 1024:
		return newBlock[H, [1024]byte]()
	case n <= 1280:
		return newBlock[H, [1280]byte]()
	case n <= 1536:
		return newBlock[H, [1536]byte]()
	case n <= 1792:
		return newBlock[H, [1792]byte]()
	case n <= 2048:
		return newBlock[H, [2048]byte]()
	case n <= 2304:
		return newBlock[H, [2304]byte]()
	case n <= 2560:
		return newBlock[H, [2560]byte]()
	case n <= 2816:
		return newBlock[H, [2816]byte]()
	case n <= 3072:
		return newBlock[H, [3072]byte]()
	case n <= 3328:
		return newBlock[H, [3328]byte]()
	case n <= 3584:
		return newBlock[H, [3584]byte]()
	case n <= 3840:
		return newBlock[H, [3840]byte]()
	case n <= 4096:
		return newBlock[H, [4096]byte]()
	}
	m, hdr, _ := newBlock[H, [0]byte]()
	return m, hdr, make([]byte, n)
}

// escaped12 returns the length of s escaped for STOMP 1.2 (STOMP 1.2 "Value Encoding": CR,
// LF, colon and backslash take two bytes) and whether s holds a NUL, which no version can
// carry.
func escaped12(s string) (n int, nul bool) {
	n = len(s)
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '\r', '\n', ':', '\\':
			n++
		case 0:
			nul = true
		}
	}
	return n, nul
}

// appendText12 appends s, whose escaped length is esc, escaped for STOMP 1.2.
func appendText12(b []byte, s string, esc int) []byte {
	if esc == len(s) {
		return append(b, s...)
	}
	return appendEscaped12(b, s)
}

// headerLen is one header's escaped key and value lengths; kEsc < 0 marks a header 1.2
// cannot carry (an empty name, a NUL), which the tail leaves out (see frame.Representable).
type headerLen struct{ kEsc, vEsc, at int }

// Pack builds a Message from p with its STOMP 1.2 shared MESSAGE tail (see Shared) already
// encoded, in one allocation when p has at most 4 headers and its tail fits 4 KiB (the
// message, its headers, its tail; every string of the message is a slice of the tail or of
// the bytes after it). The message-id is IDPrefix-<n> from the counter NewID uses. Safe for
// concurrent use; keeps no reference into p.
func Pack(p *Parts) *Message {
	var digits [21]byte
	prefix, num := p.ID, []byte(nil)
	if prefix == "" {
		prefix = p.IDPrefix
		num = strconv.AppendUint(append(digits[:0], '-'), idCounter.Add(1), 10)
	}
	custom := p.Group != defaultGroup && p.Group != ""
	destination := unsafe.String(unsafe.SliceData(p.Destination), len(p.Destination))

	// Sizes: the tail, then the raw copies of strings that escaping changed.
	idLen := len(prefix) + len(num)
	destEsc, _ := escaped12(destination)
	prefixEsc, _ := escaped12(prefix)
	idEsc := prefixEsc + len(num)
	n := len(frame.HdrDestination) + 2 + destEsc + len(frame.HdrMessageID) + 2 + idEsc
	extra := 0
	if destEsc != len(destination) {
		extra += len(destination)
	}
	if idEsc != idLen {
		extra += idLen
	}
	groupEsc := 0
	if custom {
		groupEsc, _ = escaped12(p.Group)
		n += len(frame.HdrGroup) + 2 + groupEsc
		if groupEsc != len(p.Group) {
			extra += len(p.Group)
		}
	}
	var cl [20]byte
	clen := strconv.AppendInt(cl[:0], int64(len(p.Body)), 10)
	n += len(frame.HdrContentLength) + 2 + len(clen)
	dropped := 0
	var lensArr [8]headerLen
	lens := lensArr[:0]
	for _, h := range p.Headers {
		k, knul := escaped12(h.Key)
		v, vnul := escaped12(h.Value)
		if h.Key == "" || knul || vnul {
			dropped++
			extra += len(h.Key) + len(h.Value)
			lens = append(lens, headerLen{kEsc: -1})
			continue
		}
		n += k + 1 + v + 1
		if k != len(h.Key) {
			extra += len(h.Key)
		}
		if v != len(h.Value) {
			extra += len(h.Value)
		}
		lens = append(lens, headerLen{kEsc: k, vEsc: v})
	}
	n += 1 + len(p.Body) + len(frame.Terminator)

	m, hdr, b := allocBlock(len(p.Headers), n+extra)
	b = append(b, frame.HdrDestination...)
	b = append(b, ':')
	destAt := len(b)
	b = appendText12(b, destination, destEsc)
	b = append(b, '\n')
	b = append(b, frame.HdrMessageID...)
	b = append(b, ':')
	idAt := len(b)
	b = appendText12(b, prefix, prefixEsc)
	b = append(b, num...)
	b = append(b, '\n')
	groupAt := 0
	if custom {
		b = append(b, frame.HdrGroup...)
		b = append(b, ':')
		groupAt = len(b)
		b = appendText12(b, p.Group, groupEsc)
		b = append(b, '\n')
	}
	b = append(b, frame.HdrContentLength...)
	b = append(b, ':')
	b = append(b, clen...)
	b = append(b, '\n')
	for i, h := range p.Headers {
		l := &lens[i]
		if l.kEsc < 0 {
			continue
		}
		l.at = len(b)
		b = appendText12(b, h.Key, l.kEsc)
		b = append(b, ':')
		b = appendText12(b, h.Value, l.vEsc)
		b = append(b, '\n')
	}
	b = append(b, '\n')
	bodyAt := len(b)
	b = append(b, p.Body...)
	b = frame.AppendTerminator(b)
	tail := b[:len(b):len(b)]

	// Raw strings: slices of the tail where escaping left them alone, copies after it otherwise.
	m.Destination, b = rawString(b, destination, destAt, destEsc)
	if idEsc == idLen {
		m.ID = unsafe.String(&b[idAt], idLen)
	} else {
		from := len(b)
		b = append(b, prefix...)
		b = append(b, num...)
		m.ID = unsafe.String(&b[from], idLen)
	}
	m.Group = defaultGroup
	if custom {
		m.Group, b = rawString(b, p.Group, groupAt, groupEsc)
	}
	for i, h := range p.Headers {
		var key, value string
		if l := lens[i]; l.kEsc < 0 {
			key, b = rawString(b, h.Key, 0, -1)
			value, b = rawString(b, h.Value, 0, -1)
		} else {
			key, b = rawString(b, h.Key, l.at, l.kEsc)
			value, b = rawString(b, h.Value, l.at+l.kEsc+1, l.vEsc)
		}
		hdr = append(hdr, frame.Header{Key: key, Value: value})
	}
	if len(hdr) > 0 {
		m.Headers = hdr[:len(hdr):len(hdr)] // clipped: an append copies, never writes in place
	}
	if p.Body != nil {
		m.Body = tail[bodyAt : bodyAt+len(p.Body) : bodyAt+len(p.Body)]
	}
	m.TimestampMs, m.ExpiresMs, m.DeliverAtMs, m.Persistent = p.TimestampMs, p.ExpiresMs, p.DeliverAtMs, p.Persistent
	m.tail12, m.dropped12, m.packed = tail, int32(dropped), true
	return m
}

// rawString returns s as held by b: the unescaped bytes at b[at:] when escaping left s
// alone (esc == len(s)), else a copy appended to b (which has the room: its capacity was
// sized by Pack, so it never moves).
func rawString(b []byte, s string, at, esc int) (string, []byte) {
	if len(s) == 0 {
		return "", b
	}
	if esc != len(s) {
		at = len(b)
		b = append(b, s...)
	}
	return unsafe.String(&b[at], len(s)), b
}

// appendEscaped12 appends s escaped for STOMP 1.2 header text.
func appendEscaped12(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case '\r':
			b = append(b, '\\', 'r')
		case '\n':
			b = append(b, '\\', 'n')
		case ':':
			b = append(b, '\\', 'c')
		case '\\':
			b = append(b, '\\', '\\')
		default:
			b = append(b, c)
		}
	}
	return b
}

// Rebuilt returns a packed copy of m with headers instead of m's (same id, group,
// destination, body, times, persistence and sequence): messages are immutable once built, so
// a stage that changes headers builds a new one.
func Rebuilt(m *Message, headers []frame.Header) *Message {
	var destBuf [128]byte
	r := Pack(&Parts{
		ID: m.ID, Group: m.Group, Destination: append(destBuf[:0], m.Destination...),
		Headers: headers, Body: m.Body,
		TimestampMs: m.TimestampMs, ExpiresMs: m.ExpiresMs, DeliverAtMs: m.DeliverAtMs, Persistent: m.Persistent,
	})
	r.Sequence = m.Sequence
	return r
}
