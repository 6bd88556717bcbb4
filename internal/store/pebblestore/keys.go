package pebblestore

import (
	"encoding/binary"
	"errors"
)

// Key prefixes: the first byte of every key. See doc.go for the full layout.
const (
	prefixMeta   = 'm' // 'm' | meta key → value
	prefixRecord = 'r' // a stream's keys; with nameLen u16 BE | name:
	//                    'r' | nameLen | name                     → streamState (the state key)
	//                    'r' | nameLen | name | seq u64 BE        → record data
	//                    'r' | nameLen | name | seq u64 BE | 0x00 → streamState (a checkpoint)
	prefixVersion = 'v' // 'v' → format u32 BE

	// prefixStreamV1 is where format 1 kept each stream's state ('s' | nameLen | name),
	// after every record key; Open moves those states to the state keys (migrateV1).
	prefixStreamV1 = 's'
)

// formatVersion is the layout version written under the 'v' key. Open upgrades format 1
// (migrateV1) and refuses any other.
const formatVersion uint32 = 2

// stateLen is the size in bytes of an encoded streamState.
const stateLen = 24

var versionKey = []byte{prefixVersion}

// errBadKey is returned when a stored key does not parse under the layout above.
var errBadKey = errors.New("pebblestore: malformed key")

// streamPrefix returns prefix | nameLen u16 BE | name. With prefixRecord it is the stream's
// state key and the common prefix of all its record and checkpoint keys. The length prefix
// keeps one stream's keys from interleaving with those of a stream whose name extends it
// ("a" and "a\x00b").
func streamPrefix(prefix byte, name string) []byte {
	k := make([]byte, 0, 3+len(name)+8)
	k = append(k, prefix)
	k = binary.BigEndian.AppendUint16(k, uint16(len(name)))
	return append(k, name...)
}

// recordKey appends seq, big-endian so that keys sort in seq order, to a copy of the
// stream's record prefix.
func recordKey(recPrefix []byte, seq uint64) []byte {
	k := make([]byte, len(recPrefix), len(recPrefix)+8)
	copy(k, recPrefix)
	return binary.BigEndian.AppendUint64(k, seq)
}

// checkpointKey returns recordKey(recPrefix, seq) | 0x00: the key of a checkpoint of the
// stream's state whose high-water mark is seq. It sorts right after record seq and before
// record seq+1, inside the range the stream's records fill in order, so that a batch of
// records that carries one still spans only those records' keys.
func checkpointKey(recPrefix []byte, seq uint64) []byte {
	return append(recordKey(recPrefix, seq), 0)
}

// streamEnd returns a key above every record and checkpoint key of the stream whose record
// prefix is recPrefix, and below every key of the next stream.
func streamEnd(recPrefix []byte) []byte {
	return append(recordKey(recPrefix, ^uint64(0)), 0xff)
}

// isRecordKey reports whether k, a key under recPrefix, is a record key (and not a
// checkpoint key).
func isRecordKey(recPrefix, k []byte) bool {
	return len(k) == len(recPrefix)+8
}

// seqOf returns the sequence number at the end of a record key.
func seqOf(key []byte) uint64 {
	return binary.BigEndian.Uint64(key[len(key)-8:])
}

// metaKey returns 'm' | key.
func metaKey(key string) []byte {
	k := make([]byte, 0, 1+len(key))
	return append(append(k, prefixMeta), key...)
}

// parseStreamKey returns the stream name of a state key (prefix | nameLen | name, prefix
// being prefixRecord, or prefixStreamV1 in format 1).
func parseStreamKey(prefix byte, k []byte) (string, error) {
	if len(k) < 3 || k[0] != prefix {
		return "", errBadKey
	}
	n := int(binary.BigEndian.Uint16(k[1:3]))
	if len(k) != 3+n || n == 0 {
		return "", errBadKey
	}
	return string(k[3:]), nil
}

// streamState is the per-stream value stored under the state key and under checkpoint
// keys. It covers exactly the records at or below its high-water mark that Pebble held when
// it was written; Open adds the records above it (see doc.go).
//
//	offset 0  last  u64 BE  high-water mark: highest seq ever given
//	offset 8  count u64 BE  records held
//	offset 16 bytes u64 BE  total record data bytes held
type streamState struct {
	last, count, bytes uint64
}

// encode returns the 24-byte encoding of st.
func (st streamState) encode() []byte {
	b := make([]byte, 0, stateLen)
	b = binary.BigEndian.AppendUint64(b, st.last)
	b = binary.BigEndian.AppendUint64(b, st.count)
	return binary.BigEndian.AppendUint64(b, st.bytes)
}

// decodeState parses a 24-byte state value.
func decodeState(v []byte) (streamState, bool) {
	if len(v) != stateLen {
		return streamState{}, false
	}
	return streamState{
		last:  binary.BigEndian.Uint64(v[0:]),
		count: binary.BigEndian.Uint64(v[8:]),
		bytes: binary.BigEndian.Uint64(v[16:]),
	}, true
}
