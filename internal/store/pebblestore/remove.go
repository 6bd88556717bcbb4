package pebblestore

import (
	"encoding/binary"
	"errors"
	"slices"

	"github.com/cockroachdb/pebble/v2"

	"github.com/titan-broker/titan/internal/store"
)

// Removal: Delete and Trim take records out of a stream, Drop forgets empty streams. Each
// writes one unsynced batch, made durable by the next synced write or the syncer.

// Delete implements store.Store. It looks each seq up (to keep Count and Bytes exact),
// writes point deletions and the stream's new state in one unsynced batch, and leaves the
// fsync to the next Append or SetMeta, or to the syncer after Options.DeleteSyncInterval.
//
// Errors: store.ErrClosed, store.ErrInvalidName, a read error, or a sticky write error.
func (s *Store) Delete(name string, seqs ...uint64) error {
	if err := store.CheckName(name); err != nil {
		return err
	}
	if err := s.enter(true); err != nil {
		return err
	}
	defer s.exit()
	st := s.stream(name, false)
	if st == nil || len(seqs) == 0 {
		return nil
	}
	if len(seqs) > 1 { // one sequence (an ACK of one message) needs no sorted copy
		seqs = slices.Clone(seqs)
		slices.Sort(seqs)
		seqs = slices.Compact(seqs)
	}

	st.mu.Lock()
	defer st.mu.Unlock()
	next := st.stateLocked()
	s.gmu.Lock()
	n, nb, firstGone, seqs := s.dropPendingLocked(st, seqs, 0)
	next.count -= n
	next.bytes -= nb
	if n > 0 {
		s.noteStateLocked(st, next)
		st.count, st.bytes = next.count, next.bytes
		if firstGone {
			st.first = 0
		}
	}
	s.gmu.Unlock()
	if len(seqs) == 0 {
		return nil
	}
	// The rest may be in the group being applied: wait until Pebble has it.
	s.commitMu.Lock()
	defer s.commitMu.Unlock()
	b := s.db.NewBatch()
	defer b.Close()
	key := recordKey(st.recPrefix, 0) // only here: a record dropped from its group needs no key (no allocation)
	firstGone = false
	for _, seq := range seqs {
		if seq == 0 || seq > st.last {
			continue
		}
		binary.BigEndian.PutUint64(key[len(st.recPrefix):], seq)
		v, closer, err := s.db.Get(key)
		if errors.Is(err, pebble.ErrNotFound) {
			continue
		}
		if err != nil {
			return wrapErr("delete", err)
		}
		n := len(v)
		_ = closer.Close()
		if err := b.DeleteSized(key, uint32(n), nil); err != nil {
			return wrapErr("delete", err)
		}
		next.count--
		next.bytes -= uint64(n)
		firstGone = firstGone || seq == st.first
	}
	if next.count == st.count {
		return nil
	}
	return s.commitRemovalLocked(st, b, next, firstGone, "delete")
}

// commitRemovalLocked adds the stream's new state to b, commits it without sync and
// updates the in-memory state. st.mu and commitMu must be held.
func (s *Store) commitRemovalLocked(st *stream, b *pebble.Batch, next streamState, firstGone bool, op string) error {
	s.gmu.Lock()
	written := s.writtenStateLocked(st, next)
	s.gmu.Unlock()
	if err := b.Set(st.stateKey, written.encode(), nil); err != nil {
		return wrapErr(op, err)
	}
	if err := s.db.Apply(b, pebble.NoSync); err != nil {
		return s.fail(wrapErr(op, err))
	}
	st.persistedLocked()
	s.dirty.Store(true)
	st.count, st.bytes = next.count, next.bytes
	if firstGone {
		st.first = 0
	}
	s.gmu.Lock()
	s.noteStateLocked(st, next)
	s.gmu.Unlock()
	return nil
}

// Trim implements store.Store. It counts the records below before (for Count and Bytes),
// then removes them with one range deletion in an unsynced batch, like Delete.
//
// Errors: store.ErrClosed, store.ErrInvalidName, a read error, or a sticky write error.
func (s *Store) Trim(name string, before uint64) error {
	if err := store.CheckName(name); err != nil {
		return err
	}
	if err := s.enter(true); err != nil {
		return err
	}
	defer s.exit()
	st := s.stream(name, false)
	if st == nil {
		return nil
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	end := min(before, st.last+1)
	if end <= 1 || st.count == 0 {
		return nil
	}
	s.gmu.Lock()
	if n, nb, _, _ := s.dropPendingLocked(st, nil, end); n > 0 {
		st.count -= n
		st.bytes -= nb
		st.first = 0
		s.noteStateLocked(st, st.stateLocked())
	}
	s.gmu.Unlock()
	s.commitMu.Lock()
	defer s.commitMu.Unlock()
	hi := recordKey(st.recPrefix, end)
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: recordKey(st.recPrefix, 1), UpperBound: hi})
	if err != nil {
		return wrapErr("trim", err)
	}
	next := st.stateLocked()
	for it.First(); it.Valid(); it.Next() {
		if !isRecordKey(st.recPrefix, it.Key()) {
			continue // a checkpoint, removed with the records
		}
		lv := it.LazyValue()
		next.count--
		next.bytes -= uint64(lv.Len())
	}
	if err := it.Close(); err != nil {
		return wrapErr("trim", err)
	}
	if next.count == st.count {
		return nil
	}
	b := s.db.NewBatch()
	defer b.Close()
	if err := b.DeleteRange(recordKey(st.recPrefix, 0), hi, nil); err != nil {
		return wrapErr("trim", err)
	}
	return s.commitRemovalLocked(st, b, next, true, "trim")
}

// Drop implements store.Dropper: it deletes the state of every empty stream among names in
// one batch (unsynced, like Delete) and forgets them, so Open no longer loads them; a dropped
// stream's next Append starts at sequence 1. Streams holding records are left alone and make
// the result ErrNotEmpty once the empty ones are dropped; unknown streams are skipped.
//
// Errors: store.ErrNotEmpty, store.ErrClosed, store.ErrInvalidName, or a sticky write error
// (then nothing is dropped).
func (s *Store) Drop(names ...string) error {
	for _, name := range names {
		if err := store.CheckName(name); err != nil {
			return err
		}
	}
	if err := s.enter(true); err != nil {
		return err
	}
	defer s.exit()
	s.smu.Lock()
	defer s.smu.Unlock()
	// Every stream to drop stays locked until the batch is applied, so no Append slips a
	// record in between the count check and the delete (lock order: smu, then stream).
	drop := make([]*stream, 0, len(names))
	defer func() {
		for _, st := range drop {
			st.mu.Unlock()
		}
	}()
	var notEmpty bool
	b := s.db.NewBatch()
	defer b.Close()
	for _, name := range names {
		st := s.streams[name]
		if st == nil || slices.Contains(drop, st) {
			continue
		}
		st.mu.Lock()
		if st.count > 0 {
			st.mu.Unlock()
			notEmpty = true
			continue
		}
		drop = append(drop, st)
		if err := b.Delete(st.stateKey, nil); err != nil {
			return wrapErr("drop", err)
		}
		// The stream holds no record, but may hold checkpoints of its state, which Open
		// would take for the next stream of that name.
		if err := b.DeleteRange(recordKey(st.recPrefix, 0), streamEnd(st.recPrefix), nil); err != nil {
			return wrapErr("drop", err)
		}
	}
	if len(drop) > 0 {
		// The committed mark counts a dropped stream's sequences on (mark.go).
		dropped := s.dropped
		for _, st := range drop {
			dropped += st.last
		}
		if err := b.Set(droppedKey, binary.BigEndian.AppendUint64(nil, dropped), nil); err != nil {
			return wrapErr("drop", err)
		}
		if err := s.db.Apply(b, pebble.NoSync); err != nil {
			return s.fail(wrapErr("drop", err))
		}
		s.dirty.Store(true)
		s.dropped = dropped
		for _, st := range drop {
			st.dropped.Store(true)
			delete(s.streams, st.name)
		}
	}
	if notEmpty {
		return store.ErrNotEmpty
	}
	return nil
}
