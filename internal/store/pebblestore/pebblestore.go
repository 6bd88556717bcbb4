package pebblestore

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/titan-broker/titan/internal/store"
)

// lockFile is the name, inside the data directory, of the file Open locks so that two
// Stores never share a directory.
const lockFile = "titan.lock"

// Store is a store.Store on a Pebble database in one directory. Open returns it; it is safe
// for concurrent use. See the package documentation for the key layout, durability and
// fault handling.
type Store struct {
	dir     string
	fs      vfs.FS // the file system under the store (Options.FS or vfs.Default)
	dirLock io.Closer
	log     *slog.Logger
	opts    Options // with defaults applied

	// db and wal are replaced only by the recoverer, with reopening set and no call in
	// progress; calls read them between enter and exit. db is nil while a reopen failed.
	db  *pebble.DB
	wal *walFS
	// formatV1 is set while db is a format-1 database opened read-only (a degraded start);
	// a read-write open upgrades it (migrateV1).
	formatV1 bool

	mu        sync.Mutex
	idle      sync.Cond // on mu; broadcast when inflight drops to 0 after closed or reopening is set
	closed    bool      // guarded by mu
	reopening bool      // guarded by mu: the recoverer is replacing db
	opening   bool      // guarded by mu: Open runs; a fault does not start the recoverer yet
	health    health    // guarded by mu

	// inflight counts calls between enter and exit; gate mirrors closed, reopening, a nil db
	// and a down health as gate* bits (written under mu by syncGate), so that enter and exit
	// take no lock while the store is up (see enter).
	inflight atomic.Int64
	gate     atomic.Uint32

	smu        sync.RWMutex
	streams    map[string]*stream     // guarded by smu
	lastStream atomic.Pointer[stream] // the stream stream() returned last (cleared when streams is replaced)

	// dirty is set after a Delete or Trim reaches the WAL unsynced, and cleared by whoever
	// issues the next sync (an Append or SetMeta before committing, or the syncer).
	dirty       atomic.Bool
	stop        chan struct{} // closed by Close: stops the syncer and the recoverer
	syncerDone  chan struct{} // closed by the syncer when it returns; nil when none runs
	recoverDone chan struct{} // guarded by mu: closed by the recoverer when it returns; nil when none ran

	bgFailures atomic.Int32 // consecutive failed flushes and compactions (for the backoff)
	stalled    atomic.Bool  // Pebble stalls writes: too many memtables wait for a flush

	walSyncs atomic.Uint64 // WAL fsyncs since Open

	// Write-behind group commit (groupcommit.go).
	commitMu      sync.Mutex    // held by the committer from taking a group until Pebble applied it
	gmu           sync.Mutex    // guards cur
	cur           *group        // the group appends join; nil when none waits
	spares        []*group      // guarded by gmu: buffers of committed groups, for reuse (at most maxSpares)
	busy          bool          // guarded by gmu: a group is being applied or is in flight
	flights       chan flight   // the applied group whose fsync the committer awaits (capacity 1)
	committerDone chan struct{} // closed by the committer when it returns
	gatherWant    int           // guarded by gmu: appends the committer still waits for before applying (0: none; see gather)
	gathered      chan struct{} // 1-slot: gatherWant reached 0
	gatherTimer   *time.Timer   // the committer's hold timer (committer goroutine only)
	lastCommit    atomic.Int64  // store.Since() at the latest group landing (store.CommitClock)

	// Committed counts records that went through a group commit; Dropped those of them
	// deleted before their group was written, so they never reached the WAL (reported as
	// store.GroupCommitStats.Unwritten); EmptyGroups the groups that held only such
	// records, so they cost no write and no fsync.
	Committed   atomic.Uint64
	Dropped     atomic.Uint64
	EmptyGroups atomic.Uint64

	// The committed mark (mark.go).
	committed atomic.Uint64 // the committed mark: durable high-water marks summed, dropped streams' included
	dropped   uint64        // guarded by smu: the high-water marks of dropped streams, summed (droppedKey)
	markF     vfs.File      // the committed-mark file; written by the committer only (nil: not open)
	markBuf   [markLen]byte // the committer's encoding of the mark (no allocation per group commit)
	recovery  Recovery      // what Open found; set before Open returns, read-only after

	// Free-space watermarks (space.go).
	lowSpace  atomic.Bool   // free space fell below the low-water mark and is not yet above the high
	freeBytes atomic.Int64  // free space at the last sample
	spaceDone chan struct{} // closed by the space loop when it returns; nil when none runs
	spaceLow  atomic.Int64  // the low-water mark in bytes (0: no check)
	spaceHigh atomic.Int64  // the high-water mark in bytes

	groups     atomic.Uint64 // group commits that wrote records and landed (store.GroupCommitStats)
	groupNanos atomic.Int64  // their commit times summed, in nanoseconds
}

var (
	_ store.Store              = (*Store)(nil)
	_ store.GroupCommitCounter = (*Store)(nil)
)

// wrapErr prefixes a Pebble error with the operation and marks corruption with
// store.ErrCorrupt. It returns nil for a nil err.
func wrapErr(op string, err error) error {
	if err == nil {
		return nil
	}
	if pebble.IsCorruptionError(err) {
		return fmt.Errorf("%w: pebblestore: %s: %w", store.ErrCorrupt, op, err)
	}
	return fmt.Errorf("pebblestore: %s: %w", op, err)
}

// The bits of Store.gate: set while a call must take enter's slow path.
const (
	gateClosed    = 1 << iota // Close has begun
	gateReopening             // the recoverer replaces db
	gateNoDB                  // db is nil (a reopen failed, or Open has not finished)
	gateDown                  // health is StateDown: writes are refused

	gateDrain = gateClosed | gateReopening // a drainer waits for inflight to reach 0
)

// syncGate sets gate from the fields it mirrors. Called with mu held after every change
// that refuses calls (so the fast path never admits a call the fields refuse) and after
// those that admit them again (or the calls would keep taking the slow path).
func (s *Store) syncGate() {
	var g uint32
	if s.closed {
		g |= gateClosed
	}
	if s.reopening {
		g |= gateReopening
	}
	if s.db == nil {
		g |= gateNoDB
	}
	if s.health.state == store.StateDown {
		g |= gateDown
	}
	s.gate.Store(g)
}

// enter registers a call in progress. It refuses every call once Close has begun
// (store.ErrClosed) and while the recoverer replaces the database or after a reopen failed
// (store.ErrUnavailable), and refuses writes while the store is down. Every successful
// enter must be paired with exit.
//
// While the store is up it takes no lock: it counts the call in inflight, then reads gate.
// A drainer (Close, the recoverer) sets its gate bit under mu, then reads inflight under
// mu; both are sequentially consistent atomics, so either the call sees the bit (and backs
// out to the slow path) or the drainer sees the call (and waits for its exit).
func (s *Store) enter(write bool) error {
	s.inflight.Add(1)
	if g := s.gate.Load(); g == 0 || (g == gateDown && !write) {
		return nil
	}
	s.exit()
	return s.enterLocked(write)
}

// enterLocked is enter's slow path: the fields themselves, read under mu.
func (s *Store) enterLocked(write bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return store.ErrClosed
	}
	if s.reopening || s.db == nil || (write && s.health.state == store.StateDown) {
		return s.health.refusal()
	}
	s.inflight.Add(1)
	return nil
}

// exit ends a call that enter admitted; the last call out wakes a drainer.
func (s *Store) exit() {
	if s.inflight.Add(-1) == 0 && s.gate.Load()&gateDrain != 0 {
		s.mu.Lock()
		s.idle.Broadcast()
		s.mu.Unlock()
	}
}

// stream returns the named stream, creating it when create is set, or nil. The stream last
// looked up is kept in lastStream, so that the appends and deletes of a busy destination do
// not hash its name and take smu each time.
func (s *Store) stream(name string, create bool) *stream {
	if st := s.lastStream.Load(); st != nil && st.name == name && !st.dropped.Load() {
		return st
	}
	s.smu.RLock()
	st := s.streams[name]
	s.smu.RUnlock()
	if st != nil {
		s.lastStream.Store(st)
	}
	if st != nil || !create {
		return st
	}
	s.smu.Lock()
	defer s.smu.Unlock()
	if st = s.streams[name]; st == nil {
		st = newStream(name)
		s.streams[name] = st
	}
	return st
}

// claimSync clears the dirty flag before a synced commit: unsynced deletes that set it
// reached the WAL before this commit, so its fsync covers them.
func (s *Store) claimSync() {
	if s.dirty.Load() {
		s.dirty.Store(false)
	}
}

// Append implements store.Store. The records and the stream's new state are one Pebble
// batch, committed with Sync through ApplyNoSyncWait under the stream's lock and then
// awaited (Batch.SyncWait) without it; Pebble's WAL writer syncs every batch queued while a
// sync is under way with the next single fsync.
//
// Errors: store.ErrClosed, store.ErrInvalidName, store.ErrNoRecords, and a sticky write error
// (store.ErrCorrupt when Pebble reports corruption).
func (s *Store) Append(name string, records ...[]byte) (uint64, error) {
	first, wait, err := s.AppendAsync(name, records...)
	if err != nil {
		return 0, err
	}
	return first, wait()
}

// AppendAsync implements store.AsyncAppender: it gives the records their sequences and adds
// them to the current write-behind group (groupcommit.go), which the committer writes as one
// synced batch with every other append waiting; wait blocks until that group is committed
// and must be called exactly once. A record deleted before its group is written is dropped
// from it (never written). Records become visible to Scan only after their group committed.
// Errors as Append, from AppendAsync or from wait.
func (s *Store) AppendAsync(name string, records ...[]byte) (uint64, func() error, error) {
	first, wait, err := s.appendAsync(name, records)
	if err == nil {
		s.kickCommitter()
	}
	return first, wait, err
}

// AppendAsyncLazy implements store.LazyAppender: AppendAsync without starting a commit. The
// records join the current group, which is committed when its first wait is called, or
// right after the commit in flight lands, or with another append that starts one. Meant for
// a message that is published before its commit: a consumer that takes and acknowledges it
// meanwhile deletes it from the group, and a group left with no record is not written at
// all (no write, no fsync). Errors as AppendAsync.
func (s *Store) AppendAsyncLazy(name string, records ...[]byte) (uint64, func() error, error) {
	return s.appendAsync(name, records)
}

// appendAsync orders records into name's stream and adds them to the current group, without
// starting its commit.
func (s *Store) appendAsync(name string, records [][]byte) (uint64, func() error, error) {
	if err := store.CheckName(name); err != nil {
		return 0, nil, err
	}
	if len(records) == 0 {
		return 0, nil, store.ErrNoRecords
	}
	if err := s.enter(true); err != nil {
		return 0, nil, err
	}
	if s.lowSpace.Load() {
		s.exit()
		return 0, nil, lowSpaceRefusal()
	}
	st := s.stream(name, true)
	st.mu.Lock()
	for st.dropped.Load() { // dropped between the lookup and the lock: use the stream that replaced it
		st.mu.Unlock()
		st = s.stream(name, true)
		st.mu.Lock()
	}
	first := st.last + 1
	next := st.stateLocked()
	for _, r := range records {
		next.bytes += uint64(len(r))
	}
	next.last += uint64(len(records))
	next.count += uint64(len(records))
	if st.count == 0 {
		st.first = first
	}
	st.last, st.count, st.bytes = next.last, next.count, next.bytes
	s.gmu.Lock()
	g := s.addLocked(st, first, records, next)
	s.gmu.Unlock()
	st.mu.Unlock()
	return first, g.wait, nil
}

// Scan implements store.Store. It iterates a Pebble iterator bounded to the stream's
// records from from up to the stream's durable high-water mark; the iterator reads a
// consistent view taken when Scan starts. No lock is held while fn runs.
//
// Errors: store.ErrClosed, store.ErrInvalidName, or a read error (store.ErrCorrupt for
// corruption).
func (s *Store) Scan(name string, from uint64, fn func(seq uint64, data []byte) bool) error {
	if err := store.CheckName(name); err != nil {
		return err
	}
	if err := s.enter(false); err != nil {
		return err
	}
	defer s.exit()
	st := s.stream(name, false)
	if st == nil {
		return nil
	}
	from = max(from, 1)
	hi := st.durable.Load()
	if from > hi {
		return nil
	}
	it, err := s.db.NewIter(&pebble.IterOptions{
		LowerBound: recordKey(st.recPrefix, from),
		UpperBound: recordKey(st.recPrefix, hi+1),
	})
	if err != nil {
		return wrapErr("scan", err)
	}
	for it.First(); it.Valid(); it.Next() {
		if !isRecordKey(st.recPrefix, it.Key()) {
			continue // a checkpoint of the stream's state
		}
		v, err := it.ValueAndErr()
		if err != nil {
			return errors.Join(wrapErr("scan", err), it.Close())
		}
		if !fn(seqOf(it.Key()), v) {
			break
		}
	}
	return wrapErr("scan", it.Close())
}

// Streams implements store.Store. Count, Bytes and Last come from memory; First is cached
// and, after the first record was deleted or trimmed, found again with one seek.
//
// Errors: store.ErrClosed, or a read error.
func (s *Store) Streams() ([]store.StreamInfo, error) {
	if err := s.enter(false); err != nil {
		return nil, err
	}
	defer s.exit()
	s.smu.RLock()
	sts := make([]*stream, 0, len(s.streams))
	for _, st := range s.streams {
		sts = append(sts, st)
	}
	s.smu.RUnlock()
	slices.SortFunc(sts, func(a, b *stream) int { return strings.Compare(a.name, b.name) })

	out := make([]store.StreamInfo, 0, len(sts))
	for _, st := range sts {
		st.mu.Lock()
		if st.last == 0 { // created by an Append that failed
			st.mu.Unlock()
			continue
		}
		if st.count > 0 && st.first == 0 {
			if err := s.findFirstLocked(st); err != nil {
				st.mu.Unlock()
				return nil, err
			}
		}
		in := store.StreamInfo{Name: st.name, First: st.last + 1, Last: st.last, Count: int64(st.count), Bytes: int64(st.bytes)}
		if st.count > 0 {
			in.First = st.first
		}
		st.mu.Unlock()
		out = append(out, in)
	}
	return out, nil
}

// Sync implements store.Syncer: an empty synced WAL record, which Pebble's commit pipeline
// group-commits with concurrent Appends, makes every earlier unsynced Delete and Trim
// durable.
//
// Errors: store.ErrClosed, or a sticky write error (the store goes down).
func (s *Store) Sync() error {
	if err := s.enter(true); err != nil {
		return err
	}
	defer s.exit()
	s.claimSync()
	err := s.db.LogData(nil, pebble.Sync)
	if err == nil {
		err = s.wal.faultErr()
	}
	if err != nil {
		return s.fail(wrapErr("sync", err))
	}
	return nil
}

// findFirstLocked sets st.first to the lowest seq the stream holds. st.mu must be held.
func (s *Store) findFirstLocked(st *stream) error {
	s.commitMu.Lock() // the group being applied is in Pebble once this is held
	defer s.commitMu.Unlock()
	it, err := s.db.NewIter(&pebble.IterOptions{
		LowerBound: recordKey(st.recPrefix, 1),
		UpperBound: recordKey(st.recPrefix, st.last+1),
	})
	if err != nil {
		return wrapErr("streams", err)
	}
	for valid := it.First(); valid; valid = it.Next() {
		if isRecordKey(st.recPrefix, it.Key()) { // not a checkpoint
			st.first = seqOf(it.Key())
			break
		}
	}
	if err := it.Close(); err != nil || st.first != 0 {
		return wrapErr("streams", err)
	}
	// Every record left waits in the current group (pending records are newer than any
	// written one).
	s.gmu.Lock()
	if g := s.cur; g != nil {
		for _, r := range g.recs {
			if r.st == st && !r.gone && (st.first == 0 || r.seq < st.first) {
				st.first = r.seq
			}
		}
	}
	s.gmu.Unlock()
	return nil
}

// SetMeta implements store.Store. It commits with Sync, which also makes pending deletes
// durable.
//
// Errors: store.ErrClosed, store.ErrInvalidName, or a sticky write error.
func (s *Store) SetMeta(key string, value []byte) error {
	if err := store.CheckName(key); err != nil {
		return err
	}
	if err := s.enter(true); err != nil {
		return err
	}
	defer s.exit()
	s.claimSync()
	if err := s.db.Set(metaKey(key), value, pebble.Sync); err != nil {
		return s.fail(wrapErr("set meta", err))
	}
	if err := s.wal.faultErr(); err != nil {
		return s.fail(wrapErr("set meta", err))
	}
	return nil
}

// SetMetaLazy implements store.LazyMetaSetter: the value is written to Pebble without a
// sync and becomes durable with the next synced write, Sync, or the periodic sync of pending
// deletes (Options.DeleteSyncInterval).
//
// Errors: store.ErrClosed, store.ErrInvalidName, or a sticky write error.
func (s *Store) SetMetaLazy(key string, value []byte) error {
	if err := store.CheckName(key); err != nil {
		return err
	}
	if err := s.enter(true); err != nil {
		return err
	}
	defer s.exit()
	if err := s.db.Set(metaKey(key), value, pebble.NoSync); err != nil {
		return s.fail(wrapErr("set meta", err))
	}
	s.dirty.Store(true)
	return nil
}

// Meta implements store.Store.
//
// Errors: store.ErrClosed, store.ErrInvalidName, or a read error.
func (s *Store) Meta(key string) ([]byte, bool, error) {
	if err := store.CheckName(key); err != nil {
		return nil, false, err
	}
	if err := s.enter(false); err != nil {
		return nil, false, err
	}
	defer s.exit()
	v, closer, err := s.db.Get(metaKey(key))
	if errors.Is(err, pebble.ErrNotFound) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, wrapErr("meta", err)
	}
	out := slices.Clone(v)
	if out == nil {
		out = []byte{}
	}
	return out, true, closer.Close()
}

// syncLoop syncs the WAL every interval while Deletes or Trims are pending, so that an
// idle broker does not redeliver acknowledged messages after a crash.
func (s *Store) syncLoop(interval time.Duration) { s.every(interval, s.syncerDone, s.syncDirty) }

// syncDirty syncs the WAL if Deletes or Trims are pending (syncLoop).
func (s *Store) syncDirty() {
	if !s.dirty.Load() || s.enter(true) != nil {
		return
	}
	defer s.exit()
	s.dirty.Store(false)
	err := s.db.LogData(nil, pebble.Sync)
	if err == nil {
		err = s.wal.faultErr()
	}
	if err != nil {
		s.fail(wrapErr("sync", err))
	}
}

// every calls fn every interval until Close stops the store, then closes done: the body of
// the store's periodic goroutines.
func (s *Store) every(interval time.Duration, done chan struct{}, fn func()) {
	defer close(done)
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
			fn()
		}
	}
}

// Close implements store.Store: it refuses new calls, waits for calls in progress (Scan
// callbacks included), stops the syncer and the recoverer, closes Pebble (which syncs the
// WAL, so pending deletes become durable) and releases the directory lock.
//
// Errors: store.ErrClosed on a second call; otherwise Pebble's close error, if any.
func (s *Store) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return store.ErrClosed
	}
	s.closed = true
	s.syncGate()
	for s.inflight.Load() > 0 {
		s.idle.Wait()
	}
	recoverDone := s.recoverDone
	s.mu.Unlock()
	close(s.stop)
	<-s.committerDone
	if s.syncerDone != nil {
		<-s.syncerDone
	}
	if s.spaceDone != nil {
		<-s.spaceDone
	}
	if recoverDone != nil {
		<-recoverDone
	}
	var err error
	if s.db != nil {
		err = s.closeDB()
	}
	s.closeMarkFile()
	if s.dirLock != nil { // nil after a degraded start that never recovered
		err = errors.Join(err, s.dirLock.Close())
	}
	return err
}
