package message

import (
	"encoding/binary"
	"errors"

	"github.com/titan-broker/titan/internal/frame"
)

// ErrBadRecord is returned by Decode for bytes that are not a message record of a known
// version (a torn or foreign record).
var ErrBadRecord = errors.New("message: malformed record")

// recordVersion is the first byte of every record Encode writes.
const recordVersion = 1

// Encode appends the durable record form of m to dst.
//
// Record format, version 1 (all integers unsigned varints unless noted; strings and byte
// strings are a uvarint length followed by that many bytes):
//
//	byte    version (1)
//	byte    flags: bit 0 persistent
//	string  id
//	string  group
//	string  destination
//	varint  timestamp ms (zig-zag, encoding/binary AppendVarint)
//	varint  expires ms (zig-zag; 0 = never)
//	varint  deliver-at ms (zig-zag; 0 = at once)
//	uvarint header count n, then n × (string key, string value)
//	bytes   body (the rest of the record; its length is the record length minus the above)
//
// Sequence is not encoded: it is the store's key. A golden test pins this layout.
func Encode(dst []byte, m *Message) []byte {
	dst = append(dst, recordVersion)
	var flags byte
	if m.Persistent {
		flags |= 1
	}
	dst = append(dst, flags)
	dst = appendString(dst, m.ID)
	dst = appendString(dst, m.Group)
	dst = appendString(dst, m.Destination)
	dst = binary.AppendVarint(dst, m.TimestampMs)
	dst = binary.AppendVarint(dst, m.ExpiresMs)
	dst = binary.AppendVarint(dst, m.DeliverAtMs)
	dst = binary.AppendUvarint(dst, uint64(len(m.Headers)))
	for _, h := range m.Headers {
		dst = appendString(dst, h.Key)
		dst = appendString(dst, h.Value)
	}
	return append(dst, m.Body...)
}

func appendString(dst []byte, s string) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(s)))
	return append(dst, s...)
}

// Decode parses a record written by Encode. The returned message owns its memory (b may be
// reused afterwards). Errors: ErrBadRecord.
func Decode(b []byte) (*Message, error) {
	d := decoder{b: append([]byte(nil), b...)}
	if d.byte() != recordVersion {
		return nil, ErrBadRecord
	}
	flags := d.byte()
	m := &Message{Persistent: flags&1 != 0}
	m.ID = d.string()
	m.Group = d.string()
	m.Destination = d.string()
	m.TimestampMs = d.varint()
	m.ExpiresMs = d.varint()
	m.DeliverAtMs = d.varint()
	n := d.uvarint()
	if d.err || n > uint64(len(d.b)) {
		return nil, ErrBadRecord
	}
	if n > 0 {
		m.Headers = make([]frame.Header, n)
		for i := range m.Headers {
			m.Headers[i].Key = d.string()
			m.Headers[i].Value = d.string()
		}
	}
	if d.err {
		return nil, ErrBadRecord
	}
	m.Body = d.b[d.off:]
	return m, nil
}

type decoder struct {
	b   []byte
	off int
	err bool
}

func (d *decoder) byte() byte {
	if d.off >= len(d.b) {
		d.err = true
		return 0
	}
	c := d.b[d.off]
	d.off++
	return c
}

func (d *decoder) uvarint() uint64 {
	v, n := binary.Uvarint(d.b[d.off:])
	if n <= 0 {
		d.err = true
		return 0
	}
	d.off += n
	return v
}

func (d *decoder) varint() int64 {
	v, n := binary.Varint(d.b[d.off:])
	if n <= 0 {
		d.err = true
		return 0
	}
	d.off += n
	return v
}

func (d *decoder) string() string {
	n := d.uvarint()
	if d.err || n > uint64(len(d.b)-d.off) {
		d.err = true
		return ""
	}
	s := string(d.b[d.off : d.off+int(n)])
	d.off += int(n)
	return s
}
