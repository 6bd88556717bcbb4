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

// positionValue encodes a saved position: the last acknowledged sequence and when it was
// saved (the subscription's last activity), 16 bytes:
//
//	offset 0  seq        u64 BE
//	offset 8  savedAtMs  i64 BE  Unix milliseconds
//
// Stores written before the time was added hold only the first 8 bytes.
func positionValue(seq uint64, at time.Time) []byte {
	b := make([]byte, 0, 16)
	b = binary.BigEndian.AppendUint64(b, seq)
	return binary.BigEndian.AppendUint64(b, uint64(at.UnixMilli()))
}

// parsePosition decodes positionValue; at is zero for an 8-byte value (saved by an older
// build: its last activity is unknown).
func parsePosition(v []byte) (seq uint64, at time.Time, ok bool) {
	switch len(v) {
	case 8:
		return binary.BigEndian.Uint64(v), time.Time{}, true
	case 16:
		return binary.BigEndian.Uint64(v), time.UnixMilli(int64(binary.BigEndian.Uint64(v[8:]))), true
	}
	return 0, time.Time{}, false
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
