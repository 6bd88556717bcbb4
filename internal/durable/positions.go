package durable

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"
)

// MetaStore is the part of the store that lists and deletes metadata by prefix, declared
// here by its consumer: the saved positions of durable subscriptions are metadata keys, and
// operators list them, delete them and let idle ones expire. pebblestore and memstore
// implement it.
type MetaStore interface {
	// ScanMeta calls fn in ascending key order for every metadata key starting with prefix,
	// until fn returns false; value is valid only during fn.
	ScanMeta(prefix string, fn func(key string, value []byte) bool) error
	// DeleteMeta removes the keys durably (a missing key is not an error).
	DeleteMeta(keys ...string) error
}

// ErrNoMetaScan is returned by Positions and DeletePositions when the store cannot list or
// delete metadata (it does not implement MetaStore). It wraps errors.ErrUnsupported, which
// is what consumers test for.
var ErrNoMetaScan = fmt.Errorf("durable: the store cannot list or delete metadata: %w", errors.ErrUnsupported)

// positionValue encodes a saved position: the last acknowledged sequence below which
// everything was acknowledged, when it was saved (the subscription's last activity) and the
// sequences above it that were acknowledged individually (ack:client-individual past an
// unacknowledged message), 16 + 8·len(acked) bytes:
//
//	offset 0   seq        u64 BE
//	offset 8   savedAtMs  i64 BE  Unix milliseconds
//	offset 16  acked      u64 BE each, ascending, all > seq
//
// Stores written before the time was added hold only the first 8 bytes, before the
// acknowledged sequences only the first 16.
func positionValue(seq uint64, at time.Time, acked []uint64) []byte {
	b := make([]byte, 0, 16+8*len(acked))
	b = binary.BigEndian.AppendUint64(b, seq)
	b = binary.BigEndian.AppendUint64(b, uint64(at.UnixMilli()))
	for _, a := range acked {
		b = binary.BigEndian.AppendUint64(b, a)
	}
	return b
}

// parsePosition decodes positionValue; at is zero for an 8-byte value (saved by an older
// build: its last activity is unknown).
func parsePosition(v []byte) (seq uint64, at time.Time, ok bool) {
	switch {
	case len(v) == 8:
		return binary.BigEndian.Uint64(v), time.Time{}, true
	case len(v) >= 16 && len(v)%8 == 0:
		return binary.BigEndian.Uint64(v), time.UnixMilli(int64(binary.BigEndian.Uint64(v[8:]))), true
	}
	return 0, time.Time{}, false
}

// parseAcked returns the individually acknowledged sequences of a positionValue (nil when
// there are none); v must have passed parsePosition.
func parseAcked(v []byte) []uint64 {
	if len(v) <= 16 {
		return nil
	}
	acked := make([]uint64, 0, (len(v)-16)/8)
	for i := 16; i+8 <= len(v); i += 8 {
		acked = append(acked, binary.BigEndian.Uint64(v[i:]))
	}
	return acked
}

// Positions calls fn, in key order, for every saved position whose key starts with prefix:
// the key, the sequence and when it was saved (zero when unknown), until fn returns false.
// Malformed values are skipped. Its cost is proportional to the keys under prefix.
// Errors: ErrNoMetaScan, the store's.
func (l *Log) Positions(prefix string, fn func(key string, seq uint64, savedAt time.Time) bool) error {
	ms, ok := l.st.(MetaStore)
	if !ok {
		return ErrNoMetaScan
	}
	var bad error
	err := ms.ScanMeta(prefix, func(k string, v []byte) bool {
		seq, at, ok := parsePosition(v)
		if !ok {
			if bad == nil {
				bad = fmt.Errorf("durable: position %s: malformed value", k)
			}
			return true
		}
		return fn(k, seq, at)
	})
	if bad != nil {
		l.log.Warn("skipping malformed durable positions", "err", bad)
	}
	return err
}

// DeletePositions durably forgets the saved positions under keys (a missing key is not an
// error). Errors: ErrNoMetaScan, the store's.
func (l *Log) DeletePositions(keys ...string) error {
	ms, ok := l.st.(MetaStore)
	if !ok {
		return ErrNoMetaScan
	}
	return ms.DeleteMeta(keys...)
}
