package pebblestore

import (
	"sync"
	"sync/atomic"
)

// The in-memory state of one stream and what a group commit writes of it.

// stream is the in-memory state of one stream. Every change to its records happens with mu
// held, from building the batch until Pebble has applied it (ApplyNoSyncWait), so that
// Pebble's commit order for a stream is its sequence order and each state value a batch
// writes is the latest. The fsync wait happens after mu is released, which is what lets concurrent
// Appends to one stream share an fsync.
type stream struct {
	name      string
	recPrefix []byte // 'r' | nameLen | name: the prefix of every key of the stream
	stateKey  []byte // 'r' | nameLen | name: recPrefix itself, which sorts before the records

	mu    sync.Mutex
	last  uint64 // guarded by mu: high-water mark
	count uint64 // guarded by mu: records held
	bytes uint64 // guarded by mu: record bytes held
	first uint64 // guarded by mu: lowest seq held; 0 = unknown (recomputed on demand)

	// durable is the highest seq whose Append has synced. Scan reads up to it: since Pebble
	// syncs its WAL in commit order and a stream commits in seq order, every seq at or below
	// it is durable and visible.
	durable atomic.Uint64

	dropped atomic.Bool // set under mu by Drop; an Append that finds it set looks the name up again

	// persisted is set once the stream's state key is in Pebble; unchecked counts the
	// records (and their bytes) applied to Pebble above the persisted state's high-water
	// mark: those Open counts from the record keys. Both are guarded by Store.commitMu.
	persisted      bool
	unchecked      uint64
	uncheckedBytes uint64
}

// checkpointEvery holds the checkpoint thresholds: a group commit writes a checkpoint of a
// stream's state with its records once this many records, or bytes of record data, were
// applied above the last persisted state. They bound what Open reads to complete a stream's
// state (about 1 s of records at 250k records/s, or 64 MiB). A variable so that tests can
// lower it.
var checkpointEvery = struct{ records, bytes uint64 }{1 << 18, 64 << 20}

// stateWrite is what a group commit writes of a stream's state with its records.
type stateWrite int

const (
	writeNoState    stateWrite = iota // record keys only
	writeState                        // the state key
	writeCheckpoint                   // a checkpoint key, right after the records
)

// stateWriteLocked returns what a group commit that applies p (the stream's records in the
// group) writes of the stream's state, and updates the stream's bookkeeping accordingly:
//
//   - the state key when the stream has none in Pebble yet (Open finds streams by their
//     state keys), or when the group's newest record of the stream is gone (deleted before
//     it was written: the state then keeps the high-water mark, which Open could not find
//     in a record key);
//   - a checkpoint key once the records above the last persisted state reach a threshold
//     (checkpointEvery);
//   - otherwise nothing: the batch holds only record keys.
//
// Record and checkpoint keys sort above every earlier record of the stream, so the
// memtables of a stream that only grows flush to tables that overlap no other table, and
// Pebble moves them down the levels instead of rewriting them; the state key, which sorts
// before every record, would make such a table overlap all older ones (and format 1's,
// which sorted after them, made it overlap all newer ones). Store.commitMu must be held.
func (st *stream) stateWriteLocked(p *pendStream) stateWrite {
	if p == nil || !st.persisted || p.topGone {
		st.persistedLocked()
		return writeState
	}
	st.unchecked += p.count
	st.uncheckedBytes += p.bytes
	if st.unchecked < checkpointEvery.records && st.uncheckedBytes < checkpointEvery.bytes {
		return writeNoState
	}
	st.persistedLocked()
	return writeCheckpoint
}

// persistedLocked records that the stream's full state is being written to Pebble.
// Store.commitMu must be held.
func (st *stream) persistedLocked() {
	st.persisted = true
	st.unchecked, st.uncheckedBytes = 0, 0
}

func newStream(name string) *stream {
	p := streamPrefix(prefixRecord, name)
	return &stream{name: name, recPrefix: p, stateKey: p}
}

// raiseDurable ratchets st.durable up to seq.
func (st *stream) raiseDurable(seq uint64) (raisedBy uint64) {
	for {
		cur := st.durable.Load()
		if cur >= seq {
			return 0
		}
		if st.durable.CompareAndSwap(cur, seq) {
			return seq - cur
		}
	}
}

func (st *stream) stateLocked() streamState {
	return streamState{last: st.last, count: st.count, bytes: st.bytes}
}
