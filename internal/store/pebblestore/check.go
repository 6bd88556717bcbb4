package pebblestore

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// Check verifies the store's invariants against a full scan of the database and returns a
// description of every violation, or nil:
//
//   - every key has a known prefix and parses under the layout in doc.go;
//   - every record belongs to a known stream and its seq is at most the high-water mark;
//   - the persisted state of each stream (its state key, or its newest checkpoint when
//     that is above it), completed with the records above its high-water mark as Open
//     does, equals its in-memory state, and the records counted and summed equal its Count
//     and Bytes; every checkpoint key parses and names its own high-water mark;
//   - the cached first seq, when known, is the lowest record's.
//
// It is meant for tests (storetest calls it after every subtest). It is O(records), must
// not run concurrently with writes, and returns store.ErrClosed after Close.
func (s *Store) Check() error {
	if err := s.enter(false); err != nil {
		return err
	}
	defer s.exit()
	s.smu.RLock()
	defer s.smu.RUnlock()
	for _, st := range s.streams {
		st.mu.Lock()
		defer st.mu.Unlock()
	}

	type tally struct {
		count, bytes, first uint64
		state               *streamState
		ckpt                *streamState // the newest checkpoint
		// recs holds each record's seq and size, to complete the state as Open does.
		recs [][2]uint64
	}
	seen := make(map[string]*tally, len(s.streams))
	for name := range s.streams {
		seen[name] = &tally{}
	}
	var errs []error
	bad := func(format string, args ...any) {
		if len(errs) < 20 {
			errs = append(errs, fmt.Errorf("pebblestore: check: "+format, args...))
		}
	}
	it, err := s.db.NewIter(nil)
	if err != nil {
		return wrapErr("check", err)
	}
	for it.First(); it.Valid(); it.Next() {
		k := it.Key()
		v, err := it.ValueAndErr()
		if err != nil {
			errs = append(errs, wrapErr("check", err))
			break
		}
		switch k[0] {
		case prefixMeta, prefixVersion:
		case prefixRecord:
			if len(k) < 3 {
				bad("stream key %q too short", k)
				continue
			}
			n := int(binary.BigEndian.Uint16(k[1:3]))
			switch {
			case len(k) == 3+n: // a state key
				name, err := parseStreamKey(prefixRecord, k)
				if err != nil {
					bad("stream key %q: %v", k, err)
					continue
				}
				state, ok := decodeState(v)
				if !ok {
					bad("stream %q: state of %d bytes", name, len(v))
					continue
				}
				t := seen[name]
				if t == nil {
					bad("stream %q persisted but not loaded", name)
					continue
				}
				if t.count > 0 || t.ckpt != nil {
					bad("stream %q: state key after its records", name)
				}
				t.state = &state
			case len(k) == 3+n+9 && k[len(k)-1] == 0: // a checkpoint
				name, seq := string(k[3:3+n]), binary.BigEndian.Uint64(k[3+n:])
				t := seen[name]
				ck, ok := decodeState(v)
				switch {
				case t == nil:
					bad("checkpoint %d of unknown stream %q", seq, name)
				case !ok || ck.last != seq:
					bad("stream %q: checkpoint %d holds %x", name, seq, v)
				default:
					t.ckpt = &ck // keys ascend: the last one seen is the newest
				}
			case len(k) == 3+n+8: // a record
				name, seq := string(k[3:3+n]), seqOf(k)
				t := seen[name]
				if t == nil {
					bad("record %d of unknown stream %q", seq, name)
					continue
				}
				if seq == 0 || seq > s.streams[name].last {
					bad("stream %q: record %d beyond high-water mark %d", name, seq, s.streams[name].last)
				}
				if t.count == 0 {
					t.first = seq
				}
				t.count++
				t.bytes += uint64(len(v))
				t.recs = append(t.recs, [2]uint64{seq, uint64(len(v))})
			default:
				bad("stream key %q: name length %d does not fit", k, n)
			}
		default:
			bad("key %q has unknown prefix", k)
		}
	}
	if err := it.Close(); err != nil {
		errs = append(errs, wrapErr("check", err))
	}
	for name, t := range seen {
		st := s.streams[name]
		mem := st.stateLocked()
		switch {
		case st.last == 0:
			// Created by an Append that failed; nothing may be persisted.
			if t.state != nil || t.count > 0 {
				bad("stream %q: unused stream has data", name)
			}
			continue
		case t.state == nil:
			bad("stream %q: no persisted state", name)
		default:
			loaded := *t.state
			if t.ckpt != nil && t.ckpt.last > loaded.last {
				loaded = *t.ckpt
			}
			base := loaded.last
			for _, r := range t.recs {
				if r[0] > base {
					loaded.last = r[0]
					loaded.count++
					loaded.bytes += r[1]
				}
			}
			if loaded != mem {
				bad("stream %q: persisted state %+v (newest checkpoint %v) completed with the records above it is %+v, in memory %+v", name, *t.state, t.ckpt, loaded, mem)
			}
		}
		if t.count != mem.count || t.bytes != mem.bytes {
			bad("stream %q: counted %d records / %d bytes, state says %d / %d", name, t.count, t.bytes, mem.count, mem.bytes)
		}
		if st.first != 0 && t.count > 0 && st.first != t.first {
			bad("stream %q: cached first %d, lowest record %d", name, st.first, t.first)
		}
		if d := st.durable.Load(); d > st.last {
			bad("stream %q: durable mark %d above high-water mark %d", name, d, st.last)
		}
	}
	return errors.Join(errs...)
}
