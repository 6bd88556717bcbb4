package pebblestore

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/titan-broker/titan/internal/store"
)

// Open opens the store in dir, creating dir and an empty store if needed, and recovers
// it: Pebble replays its write-ahead log (a torn tail — the end of a write cut short by a
// crash — is dropped, and reported at Error level when it held whole records) and the
// per-stream high-water marks are loaded.
//
// Errors: store.ErrLocked when another Store holds dir; store.ErrCorrupt when the data
// cannot be recovered (the wrapped error says which file and offset; the directory is left
// untouched so that it can be inspected or restored); store.ErrIncompatible when dir holds
// something other than a Titan store of this format. Any other error comes from the file
// system.
//
// A disk fault at start-up (no space left, a quota exceeded, a read-only file system:
// store.IsDiskFault) is not an error: the store comes up down, with the fault as the cause
// of its Health, refuses writes with it (an *store.UnavailableError), serves reads of what
// is stored from a read-only view, and recovers on its own once writes succeed again,
// exactly as after a fault while running.
func Open(dir string, opts Options) (*Store, error) {
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	fs := opts.FS
	s := newStore(dir, opts)
	s.opening = true // no recoverer may touch s.db before Open is done
	if err := fs.MkdirAll(dir, 0o755); err != nil {
		if !store.IsDiskFault(err) {
			return nil, fmt.Errorf("pebblestore: create data directory: %w", err)
		}
		return s.openDegraded(fmt.Errorf("pebblestore: create data directory: %w", err))
	}
	lock, err := fs.Lock(fs.PathJoin(dir, lockFile))
	if err != nil {
		if store.IsDiskFault(err) { // the lock file cannot be created: the recoverer takes the lock
			return s.openDegraded(fmt.Errorf("pebblestore: lock data directory: %w", err))
		}
		return nil, fmt.Errorf("%w: %s (stop the other titan process or choose another --data-dir): %v", store.ErrLocked, dir, err)
	}
	s.dirLock = lock
	// A small synced write first: a file system that refuses writes is met here, before
	// Pebble, whose failed writable open may leave files open behind it.
	if err := s.probe(); err != nil && store.IsDiskFault(err) {
		return s.openDegraded(err)
	}
	if err := s.precheckLoss(); err != nil {
		return nil, errors.Join(err, lock.Close())
	}
	if err := s.openDB(false); err != nil {
		if store.IsDiskFault(err) {
			return s.openDegraded(err)
		}
		return nil, errors.Join(err, lock.Close())
	}
	streams, err := s.loadStreams()
	if err == nil {
		err = s.wal.faultErr()
	}
	if err == nil {
		err = s.checkMark(streams, true)
	}
	if err != nil {
		if adv := missingFileAdvice(s.dir, err); adv != nil {
			err = adv
		}
		err = errors.Join(err, s.db.Close())
		if store.IsDiskFault(err) {
			s.db = nil
			return s.openDegraded(err)
		}
		return nil, errors.Join(err, lock.Close())
	}
	s.logRecovery(len(streams))
	s.openMarkFile()
	s.streams = streams
	s.lastStream.Store(nil)
	s.startLoops()
	s.mu.Lock()
	s.opening = false
	s.syncGate()
	s.mu.Unlock()
	return s, nil
}

// withDefaults returns o with every zero field set to its default (see Options), or an
// error for a negative CacheBytes or MemTableBytes.
func (o Options) withDefaults() (Options, error) {
	if o.CacheBytes < 0 || o.MemTableBytes < 0 {
		return o, fmt.Errorf("pebblestore: negative CacheBytes (%d) or MemTableBytes (%d)", o.CacheBytes, o.MemTableBytes)
	}
	if o.FS == nil {
		o.FS = vfs.Default
	}
	if o.Logger == nil {
		o.Logger = discardLogger()
	}
	if o.CacheBytes == 0 {
		o.CacheBytes = DefaultCacheBytes
	}
	if o.MemTableBytes == 0 {
		o.MemTableBytes = DefaultMemTableBytes
	}
	if o.DeleteSyncInterval == 0 {
		o.DeleteSyncInterval = DefaultDeleteSyncInterval
	}
	if o.RetryInterval <= 0 {
		o.RetryInterval = DefaultRetryInterval
	}
	if o.MaxRetryInterval <= 0 {
		o.MaxRetryInterval = DefaultMaxRetryInterval
	}
	o.MaxRetryInterval = max(o.MaxRetryInterval, o.RetryInterval)
	if o.SpaceCheckInterval <= 0 {
		o.SpaceCheckInterval = DefaultSpaceCheckInterval
	}
	return o, nil
}

// newStore returns a Store for dir with opts (defaults applied), nothing opened: what Open
// and Inspect build on.
func newStore(dir string, opts Options) *Store {
	s := &Store{
		dir: dir, fs: opts.FS, log: opts.Logger, opts: opts,
		streams: make(map[string]*stream),
		stop:    make(chan struct{}),
	}
	s.idle.L = &s.mu
	s.health = newHealth(time.Now())
	s.gate.Store(gateNoDB) // the slow path until Open has a database (syncGate)
	return s
}

// startLoops starts the committer and the delete syncer.
func (s *Store) startLoops() {
	s.flights = make(chan flight, 1)
	s.committerDone = make(chan struct{})
	s.gathered = make(chan struct{}, 1)
	go s.commitLoop()
	if s.opts.DeleteSyncInterval > 0 {
		s.syncerDone = make(chan struct{})
		go s.syncLoop(s.opts.DeleteSyncInterval)
	}
	if low, high := spaceMarks(s.opts); low > 0 {
		s.spaceLow.Store(low)
		s.spaceHigh.Store(high)
		s.checkSpace() // before the first write: a full disk refuses at once
		s.spaceDone = make(chan struct{})
		go s.spaceLoop(s.opts.SpaceCheckInterval)
	}
}

// openDegraded finishes an Open that met a disk fault (cause: no space, a quota, a
// read-only file system): the store comes up down, with cause as its health's cause and
// writes refused, and the recoverer retries with backoff, taking the directory lock and
// reopening read-write once the file system accepts writes. Meanwhile what is stored is
// readable: the database is opened read-only (without Pebble's own lock, which a read-only
// file system cannot create), or, when the directory holds no database yet, an empty one
// in memory stands in. A directory whose database cannot be read even so is an error.
func (s *Store) openDegraded(cause error) (*Store, error) {
	closeLock := func() error {
		if s.dirLock != nil {
			return s.dirLock.Close()
		}
		return nil
	}
	err := s.openDB(true)
	if errors.Is(err, pebble.ErrDBDoesNotExist) || (err != nil && !dirExists(s.fs, s.dir)) {
		err = s.openEmpty()
	}
	if err != nil {
		return nil, errors.Join(cause, fmt.Errorf("pebblestore: reading the store read-only: %w", err), closeLock())
	}
	streams, err := s.loadStreams()
	if err == nil {
		err = s.checkMark(streams, false)
	}
	if err != nil {
		return nil, errors.Join(cause, err, s.closeDB(), closeLock())
	}
	s.logRecovery(len(streams))
	s.streams = streams
	s.lastStream.Store(nil)
	s.startLoops()
	s.mu.Lock()
	s.opening = false
	s.syncGate()
	s.mu.Unlock()
	s.fail(wrapErr("open", cause))
	s.mu.Lock()
	s.health.cause = wrapErr("open", cause) // the fault itself, over what Pebble logged on the way
	s.mu.Unlock()
	return s, nil
}

// dirExists reports whether dir exists.
func dirExists(fs vfs.FS, dir string) bool {
	_, err := fs.Stat(dir)
	return err == nil
}

// openEmpty sets s.db to an empty database in memory: the stand-in of a store whose
// directory holds no database yet while the file system refuses writes.
func (s *Store) openEmpty() error {
	mem := vfs.NewMem()
	db, err := pebble.Open("empty", &pebble.Options{FS: mem, Logger: pebbleLogger{l: discardLogger(), fault: func(string) {}}})
	if err != nil {
		return err
	}
	s.db = db
	s.wal = &walFS{FS: mem, walSyncs: &s.walSyncs, onFault: func(error) {}}
	return nil
}

// noLockFS is a file system whose Lock does nothing: a read-only Pebble still locks its
// directory, which a read-only file system refuses (the file cannot be created).
type noLockFS struct{ vfs.FS }

func (noLockFS) Lock(string) (io.Closer, error) { return nopCloser{}, nil }

type nopCloser struct{}

func (nopCloser) Close() error { return nil }

// openDB checks the newest WAL, opens Pebble in s.dir over a new walFS and checks (or
// writes) the format version; on success it sets s.db and s.wal. The caller guarantees that
// no call uses s.db meanwhile. A panic inside Pebble is turned into an error.
//
// With readOnly the database is opened read-only, without Pebble's directory lock, and a
// missing format key is not written (pebble.ErrDBDoesNotExist when there is no database).
func (s *Store) openDB(readOnly bool) (err error) {
	wal := &walFS{FS: s.fs, walSyncs: &s.walSyncs, onFault: func(err error) { s.fail(wrapErr("write-ahead log", err)) }}
	cache := pebble.NewCache(s.opts.CacheBytes)
	defer cache.Unref()
	logger := s.log
	popts := &pebble.Options{
		FS:           wal,
		Cache:        cache,
		MemTableSize: uint64(s.opts.MemTableBytes),
		Logger:       pebbleLogger{l: logger, fault: s.manifestFault},
		// The oldest format whose WAL chunks carry sync offsets, which let recovery tell a
		// torn tail (tolerated) from damage before the tail (reported as corruption).
		FormatMajorVersion: pebble.FormatWALSyncChunks,
		EventListener: &pebble.EventListener{
			BackgroundError: s.backgroundError,
			DataCorruption: func(info pebble.DataCorruptionInfo) {
				logger.Error("pebble data corruption", "component", "pebble", "info", info.String())
				s.fail(fmt.Errorf("%w: pebblestore: %s", store.ErrCorrupt, info))
			},
			FlushEnd: func(info pebble.FlushInfo) {
				if info.Err == nil {
					s.backgroundOK()
				}
			},
			CompactionEnd: func(info pebble.CompactionInfo) {
				if info.Err == nil {
					s.backgroundOK()
				}
			},
			WriteStallBegin: func(pebble.WriteStallBeginInfo) { s.writeStall(true) },
			WriteStallEnd:   func() { s.writeStall(false) },
		},
	}
	if readOnly {
		popts.ReadOnly = true
		popts.FS = noLockFS{wal}
	}
	ws, err := checkWALTail(s.fs, s.dir, logger)
	s.recovery.WAL, s.recovery.WALBytes, s.recovery.Records = ws.path, ws.bytes, ws.records
	s.recovery.ReplayedBytes, s.recovery.DiscardedBytes, s.recovery.CleanClose = ws.validEnd, ws.torn, ws.clean
	if err != nil {
		return err
	}
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("pebblestore: open %s: pebble panicked: %v", s.dir, p)
		}
	}()
	db, err := pebble.Open(s.dir, popts)
	if err != nil {
		if pebble.IsCorruptionError(err) {
			return fmt.Errorf("%w: pebblestore: cannot recover %s: %w "+
				"(the directory was left untouched: restore it from a backup, or move it aside to start empty)",
				store.ErrCorrupt, s.dir, err)
		}
		if adv := missingFileAdvice(s.dir, err); adv != nil {
			return adv
		}
		return fmt.Errorf("pebblestore: open %s: %w", s.dir, err)
	}
	s.formatV1 = false
	if err := checkVersion(db, readOnly); errors.Is(err, errFormatV1) {
		s.formatV1 = true
	} else if err != nil {
		return errors.Join(err, db.Close())
	}
	s.db, s.wal = db, wal
	return nil
}

// checkVersion reads the format key, writing it into an empty database.
// With readOnly an empty database is accepted as it is.
func checkVersion(db *pebble.DB, readOnly bool) error {
	v, closer, err := db.Get(versionKey)
	if errors.Is(err, pebble.ErrNotFound) {
		it, err := db.NewIter(nil)
		if err != nil {
			return wrapErr("open", err)
		}
		nonEmpty := it.First()
		if err := it.Close(); err != nil {
			return wrapErr("open", err)
		}
		if nonEmpty {
			return fmt.Errorf("%w: pebblestore: the directory holds a Pebble database that is not a Titan store", store.ErrIncompatible)
		}
		if readOnly {
			return nil
		}
		if err := db.Set(versionKey, binary.BigEndian.AppendUint32(nil, formatVersion), pebble.Sync); err != nil {
			return wrapErr("open", err)
		}
		// Pebble creates a new database's first WAL before it ratchets the format version,
		// so that WAL lacks sync offsets (FormatWALSyncChunks) and recovery could not tell
		// damage in it from a torn tail. A flush rotates to a WAL in the configured format.
		return wrapErr("open", db.Flush())
	}
	if err != nil {
		return wrapErr("open", err)
	}
	format := uint32(0)
	if len(v) == 4 {
		format = binary.BigEndian.Uint32(v)
	}
	_ = closer.Close()
	switch {
	case format == formatVersion:
		return nil
	case format == 1 && readOnly:
		return errFormatV1 // read as it is (loadStreams); migrated once writes work
	case format == 1:
		return migrateV1(db)
	}
	return fmt.Errorf("%w: pebblestore: store format %x, this build reads %d (and upgrades 1)", store.ErrIncompatible, v, formatVersion)
}

// errFormatV1 is checkVersion's answer for a read-only format-1 database: not an error for
// openDB, which records the format so that loadStreams reads its layout.
var errFormatV1 = errors.New("pebblestore: format 1, read-only")

// migrateV1 upgrades a format-1 store in one synced batch: each stream's state moves from
// 's' | nameLen | name (which sorted after every record key, so that every batch that
// rewrote it made its memtable's table overlap all newer ones) to its state key, 'r' |
// nameLen | name; records are unchanged, and the format key becomes formatVersion. A crash
// before the batch is durable leaves format 1, migrated again at the next Open.
func migrateV1(db *pebble.DB) error {
	it, err := db.NewIter(&pebble.IterOptions{LowerBound: []byte{prefixStreamV1}, UpperBound: []byte{prefixStreamV1 + 1}})
	if err != nil {
		return wrapErr("upgrade format 1", err)
	}
	b := db.NewBatch()
	defer b.Close()
	for it.First(); it.Valid(); it.Next() {
		name, err := parseStreamKey(prefixStreamV1, it.Key())
		if err != nil {
			return errors.Join(fmt.Errorf("%w: pebblestore: stream key %q: %w", store.ErrCorrupt, it.Key(), err), it.Close())
		}
		v, err := it.ValueAndErr()
		if err != nil {
			return errors.Join(wrapErr("upgrade format 1", err), it.Close())
		}
		if err := errors.Join(b.Set(streamPrefix(prefixRecord, name), v, nil), b.Delete(it.Key(), nil)); err != nil {
			return errors.Join(wrapErr("upgrade format 1", err), it.Close())
		}
	}
	if err := it.Close(); err != nil {
		return wrapErr("upgrade format 1", err)
	}
	if err := b.Set(versionKey, binary.BigEndian.AppendUint32(nil, formatVersion), nil); err != nil {
		return wrapErr("upgrade format 1", err)
	}
	return wrapErr("upgrade format 1", db.Apply(b, pebble.Sync))
}

// loadStreams loads every stream's state from s.db and completes it from the records above
// it (loadRecordsAbove). Streams are found by their state keys: one seek per stream, to the
// key after its last (streamEnd), lands on the next stream's state key, which sorts before
// that stream's records, so the seek never walks a stream's records or tombstones.
func (s *Store) loadStreams() (map[string]*stream, error) {
	streams := make(map[string]*stream)
	prefix := byte(prefixRecord)
	if s.formatV1 {
		prefix = prefixStreamV1
	}
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: []byte{prefix}, UpperBound: []byte{prefix + 1}})
	if err != nil {
		return nil, wrapErr("open", err)
	}
	// One record iterator serves every stream: a new iterator per stream cost ~40 µs each,
	// which made Open proportional to every name ever used.
	rit, err := s.db.NewIter(&pebble.IterOptions{LowerBound: []byte{prefixRecord}, UpperBound: []byte{prefixRecord + 1}})
	if err != nil {
		return nil, errors.Join(wrapErr("open", err), it.Close())
	}
	defer func() { _ = rit.Close() }()
	for valid := it.First(); valid; {
		name, err := parseStreamKey(prefix, it.Key())
		if err != nil {
			return nil, errors.Join(fmt.Errorf("%w: pebblestore: expected a stream's state key, found %q: %w", store.ErrCorrupt, it.Key(), err), it.Close())
		}
		v, err := it.ValueAndErr()
		if err != nil {
			return nil, errors.Join(wrapErr("open", err), it.Close())
		}
		state, ok := decodeState(v)
		if !ok {
			return nil, errors.Join(fmt.Errorf("%w: pebblestore: stream %q: state value of %d bytes", store.ErrCorrupt, name, len(v)), it.Close())
		}
		st := newStream(name)
		if err := loadRecordsAbove(rit, st, state); err != nil {
			return nil, errors.Join(err, it.Close())
		}
		st.durable.Store(st.last)
		st.persisted = !s.formatV1 // format 1 is read-only: nothing is written
		streams[name] = st
		if s.formatV1 {
			valid = it.Next()
		} else {
			valid = it.SeekGE(streamEnd(st.recPrefix))
		}
	}
	return streams, wrapErr("open", it.Close())
}

// loadRecordsAbove sets st's state from its persisted state and what lies above the
// state's high-water mark: group commits write record keys without a state, and now and
// then a checkpoint key (doc.go). One backward walk from the stream's end counts the records
// above the newest checkpoint, or above the state when no checkpoint is newer; the highest
// of them is the high-water mark when above the base's. When the state counts records, the
// same walk goes on below the state's high-water mark until it meets a record (after a
// checkpoint, one bounded backward seek does), checking that one exists. A state that
// counts none bounds the walk below by its high-water mark, so it never meets a deleted
// record's tombstone (a removal always writes a state covering what it removed). it is one
// iterator reused for every stream; one walk, not two seeks, per stream keeps Open cheap
// with many streams.
func loadRecordsAbove(it *pebble.Iterator, st *stream, state streamState) error {
	if state.last == ^uint64(0) {
		return fmt.Errorf("%w: pebblestore: stream %q: high-water mark %d", store.ErrCorrupt, st.name, state.last)
	}
	p := st.recPrefix
	lower := recordKey(p, state.last+1)
	if state.count > 0 {
		// Only streams that hold records are walked below the state: a backward walk through
		// an emptied stream meets its tombstones, which made Open proportional to every name
		// ever used, not to what is stored.
		lower = recordKey(p, 0)
	}
	it.SetBounds(lower, streamEnd(p))
	base := state
	var top, n, nb uint64
	found := false
	for valid := it.Last(); valid; valid = it.Prev() {
		k := it.Key()
		if len(k) < len(p)+8 {
			return fmt.Errorf("%w: pebblestore: stream %q: bad key %q", store.ErrCorrupt, st.name, k)
		}
		seq := binary.BigEndian.Uint64(k[len(p):])
		if seq <= state.last { // below the state: only the existence check walks here
			if found = isRecordKey(p, k); found {
				break
			}
			continue
		}
		if isRecordKey(p, k) {
			top = max(top, seq)
			n++
			lv := it.LazyValue()
			nb += uint64(lv.Len())
			continue
		}
		v, err := it.ValueAndErr()
		if err != nil {
			return wrapErr("open", err)
		}
		ck, ok := decodeState(v)
		if len(k) != len(p)+9 || !ok || ck.last != seq {
			return fmt.Errorf("%w: pebblestore: stream %q: bad checkpoint %q = %x", store.ErrCorrupt, st.name, k, v)
		}
		base = ck
		if state.count > 0 { // what lies between the state and the checkpoint is counted in it
			for valid := it.SeekLT(recordKey(p, state.last+1)); valid && !found; valid = it.Prev() {
				found = isRecordKey(p, it.Key())
			}
		}
		break
	}
	if err := it.Error(); err != nil {
		return wrapErr("open", err)
	}
	if state.count > 0 && !found {
		return fmt.Errorf("%w: pebblestore: stream %q: no record at or below high-water mark %d, but count %d",
			store.ErrCorrupt, st.name, state.last, state.count)
	}
	st.last, st.count, st.bytes = max(base.last, top), base.count+n, base.bytes+nb
	st.unchecked, st.uncheckedBytes = n, nb
	return nil
}

// missingFileAdvice turns an error about a file of the database that does not exist (an
// sstable deleted or lost from the directory) into an ErrCorrupt that says what to do, or
// returns nil for any other error.
func missingFileAdvice(dir string, err error) error {
	if !errors.Is(err, os.ErrNotExist) && !strings.Contains(err.Error(), "no such file") {
		return nil
	}
	return fmt.Errorf("%w: pebblestore: a file of the store in %s is missing (%v): the data it held cannot be read, "+
		"and the store will not start without it. Restore the directory from a backup (or put the file back); "+
		"or move the directory aside to start empty. The directory was left as it is",
		store.ErrCorrupt, dir, err)
}

// precheckLoss runs the committed-mark check on a read-only open before the writable one,
// when the newest WAL ends in a torn or cut tail and a committed mark is recorded: a
// writable Pebble replays and rotates the WAL, so a refusal found only afterwards would
// leave the tail gone from the directory that `titan store check` and an operator inspect.
// A WAL without such a tail (a clean close, or a process crash that leaves whole chunks)
// costs no second replay. It returns store.ErrDataLoss (see checkMark), or nil; any other
// failure is left to the writable open, which meets it again.
func (s *Store) precheckLoss() error {
	if s.opts.AcceptDataLoss {
		return nil
	}
	if c, err := readMarkFile(s.fs, s.dir); err != nil || c == 0 {
		return nil
	}
	ws, err := checkWALTail(s.fs, s.dir, discardLogger())
	if err != nil || ws.torn == 0 {
		return nil
	}
	if err := s.openDB(true); err != nil {
		return nil
	}
	defer func() { _ = s.closeDB() }()
	streams, err := s.loadStreams()
	if err != nil {
		return nil
	}
	if err := s.checkMark(streams, false); errors.Is(err, store.ErrDataLoss) {
		return err
	}
	return nil
}
