package pebblestore

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/cockroachdb/pebble/v2"

	"github.com/titan-broker/titan/internal/store"
)

// ScanStreams implements store.StreamScanner with one Pebble iterator over every stream's
// keys, in key order (streams ordered by name length, then name): a state key or the first
// record key of a stream not seen before starts it; a stream outside prefix, or one stream
// declines, is skipped with one seek past its keys. Each stream's records are read up to its
// durable high-water mark taken when the stream is reached; checkpoint keys are skipped. The
// iterator reads a consistent view taken when ScanStreams starts. No lock is held while the
// callbacks run. Empty streams are visited when their state key is stored. When at most a
// quarter of the streams are under prefix, they are sought one by one from the names in
// memory instead of walking past every other stream.
//
// Errors: store.ErrClosed, or a read error (store.ErrCorrupt for corruption or a key that
// does not parse).
func (s *Store) ScanStreams(prefix string, stream func(name string, count int64) bool, record func(seq uint64, data []byte) bool) error {
	if err := s.enter(false); err != nil {
		return err
	}
	if s.formatV1 { // format 1 (read-only) is read stream by stream
		s.exit()
		return s.scanStreamsEach(prefix, stream, record)
	}
	defer s.exit()
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: []byte{prefixRecord}, UpperBound: []byte{prefixRecord + 1}})
	if err != nil {
		return wrapErr("scan", err)
	}
	// When few streams are under prefix (the events-store logs among many queues), each is
	// sought from the names in memory: one seek per wanted stream, not one per other stream.
	var wanted [][]byte
	seek := prefix != ""
	s.smu.RLock()
	total := len(s.streams)
	for name := range s.streams {
		if !seek {
			break
		}
		if strings.HasPrefix(name, prefix) {
			wanted = append(wanted, streamPrefix(prefixRecord, name))
			seek = len(wanted) <= total/4
		}
	}
	s.smu.RUnlock()
	var cur []byte // the current stream's key prefix ('r' | nameLen | name)
	var hi uint64  // its durable high-water mark
	next := 0      // in wanted
	first := func() bool { return it.First() }
	if seek {
		slices.SortFunc(wanted, bytes.Compare)
		first = func() bool {
			for next < len(wanted) && cur != nil && bytes.Compare(wanted[next], cur) <= 0 {
				next++ // visited already: reached by the walk from a stream before it
			}
			if next == len(wanted) {
				return false
			}
			next++
			return it.SeekGE(wanted[next-1])
		}
	}
	for valid := first(); valid; {
		if seek && cur != nil && !bytes.HasPrefix(it.Key(), cur) {
			valid = first() // the next wanted stream
			if !valid {
				break
			}
		}
		k := it.Key()
		if cur == nil || !bytes.HasPrefix(k, cur) {
			if len(k) < 3 {
				return errors.Join(fmt.Errorf("%w: pebblestore: malformed stream key %q", store.ErrCorrupt, k), it.Close())
			}
			n := int(binary.BigEndian.Uint16(k[1:3]))
			if n == 0 || len(k) < 3+n {
				return errors.Join(fmt.Errorf("%w: pebblestore: malformed stream key %q", store.ErrCorrupt, k), it.Close())
			}
			cur = append(cur[:0], k[:3+n]...)
			name := string(k[3 : 3+n])
			st := s.stream(name, false)
			take := st != nil && len(name) >= len(prefix) && name[:len(prefix)] == prefix
			if take {
				st.mu.Lock()
				count := int64(st.count)
				st.mu.Unlock()
				hi = st.durable.Load()
				take = stream(name, count)
			}
			if !take {
				valid = it.SeekGE(streamEnd(cur))
				continue
			}
			if len(k) == len(cur) { // the state key
				valid = it.Next()
				continue
			}
		}
		if len(k) == len(cur)+8 { // a record (len+9 is a checkpoint)
			seq := seqOf(k)
			if seq > hi {
				valid = it.SeekGE(streamEnd(cur))
				continue
			}
			v, err := it.ValueAndErr()
			if err != nil {
				return errors.Join(wrapErr("scan", err), it.Close())
			}
			if !record(seq, v) {
				break
			}
		}
		valid = it.Next()
	}
	return wrapErr("scan", it.Close())
}

// scanStreamsEach is ScanStreams by Streams and one Scan per stream.
func (s *Store) scanStreamsEach(prefix string, stream func(name string, count int64) bool, record func(seq uint64, data []byte) bool) error {
	infos, err := s.Streams()
	if err != nil {
		return err
	}
	stop := false
	for _, in := range infos {
		if len(in.Name) < len(prefix) || in.Name[:len(prefix)] != prefix || !stream(in.Name, in.Count) {
			continue
		}
		err := s.Scan(in.Name, 1, func(seq uint64, data []byte) bool {
			stop = !record(seq, data)
			return !stop
		})
		if err != nil || stop {
			return err
		}
	}
	return nil
}
