package pebblestore

import (
	"errors"
	"fmt"
	"time"

	"github.com/cockroachdb/pebble/v2"

	"github.com/titan-broker/titan/internal/store"
)

// probeFile is the file, inside the data directory, that the recoverer writes, syncs and
// removes to learn whether the file system accepts writes again before it reopens Pebble.
const probeFile = "titan.probe"

// probeBytes is the size of the probe write: one page.
const probeBytes = 4096

// drainTimeout bounds how long a recovery attempt waits for the calls in progress before it
// reopens the database; meanwhile new calls are refused.
var drainTimeout = 2 * time.Second // a variable for tests

// health is the store's condition (store.Health) plus what the transitions need.
type health struct {
	state      store.State
	cause      error
	since      time.Time
	changes    uint64
	recoveries uint64
	changed    chan struct{} // closed at the next change, then replaced
	recovering bool          // a recoverer goroutine runs
	lowSpace   bool          // free space is below the low-water mark (space.go): reported as down
}

func newHealth(now time.Time) health {
	return health{state: store.StateOK, since: now, changed: make(chan struct{})}
}

// set moves to state with cause and reports whether that was a change.
func (h *health) set(state store.State, cause error, now time.Time) bool {
	if h.state == state {
		if state != store.StateOK && h.cause == nil {
			h.cause = cause
		}
		return false
	}
	if h.state == store.StateDown && state == store.StateOK {
		h.recoveries++
	}
	h.state, h.cause = state, cause
	h.changedAt(now)
	return true
}

// changedAt records a change of the reported health at now: counted, timed, and announced
// by closing changed (then replaced).
func (h *health) changedAt(now time.Time) {
	h.since = now
	h.changes++
	close(h.changed)
	h.changed = make(chan struct{})
}

// refusal is the error a refused call returns: the corruption itself when the store is
// down for corruption, and an *store.UnavailableError otherwise.
func (h *health) refusal() error {
	if errors.Is(h.cause, store.ErrCorrupt) {
		return h.cause
	}
	cause := h.cause
	if cause == nil {
		cause = errors.New("pebblestore: reopening")
	}
	return &store.UnavailableError{Cause: cause}
}

// Health implements store.Store. Changed in the result is closed at the next state change.
func (s *Store) Health() store.Health {
	s.mu.Lock()
	defer s.mu.Unlock()
	state, cause := s.health.state, s.health.cause
	if s.health.lowSpace && state == store.StateOK {
		// Appends are refused for low space: down for producers, though deletes go on.
		state, cause = store.StateDown, store.ErrLowDiskSpace
	}
	return store.Health{
		State:      state,
		Cause:      cause,
		Since:      s.health.since,
		Changes:    s.health.changes,
		Recoveries: s.health.recoveries,
		Changed:    s.health.changed,
	}
}

// fail takes the store down because a write could not be committed (err says why) and
// returns the error the failed call must return: err itself for corruption, otherwise an
// *store.UnavailableError wrapping it. Unless the cause is corruption, it starts the
// recoverer, which reopens the store once the file system accepts writes again. It logs
// once per state change, at Error level.
func (s *Store) fail(err error) error {
	corrupt := errors.Is(err, store.ErrCorrupt)
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		if corrupt {
			return err
		}
		return &store.UnavailableError{Cause: err}
	}
	changed := s.health.set(store.StateDown, err, time.Now())
	s.syncGate()
	if corrupt && !errors.Is(s.health.cause, store.ErrCorrupt) {
		s.health.cause = err // corruption outranks an I/O error: no recovery
	}
	startRecoverer := !corrupt && !s.health.recovering && !s.opening
	if startRecoverer {
		s.health.recovering = true
		s.recoverDone = make(chan struct{})
		go s.recoverLoop(s.recoverDone)
	}
	s.mu.Unlock()
	if changed {
		s.log.Error("store down: durable writes are refused", "state", store.StateDown.String(),
			"cause", store.Reason(err), "err", err, "retry", !corrupt)
	}
	if corrupt {
		return err
	}
	return &store.UnavailableError{Cause: err}
}

// backgroundError is Pebble's EventListener.BackgroundError: corruption takes the store
// down; any other failure of a flush or compaction (a full disk) makes it degraded, logged
// once. Pebble retries a failed flush at once and calls this with DB.mu held, so it
// sleeps a growing delay (up to 1 s) to keep the retries from spinning.
func (s *Store) backgroundError(err error) {
	if pebble.IsCorruptionError(err) {
		s.fail(wrapErr("background", err))
		return
	}
	n := s.bgFailures.Add(1)
	s.mu.Lock()
	changed := !s.closed && s.health.state == store.StateOK && s.health.set(store.StateDegraded, err, time.Now())
	s.mu.Unlock()
	if changed {
		s.log.Warn("store degraded: background flush or compaction failed; writes still commit",
			"state", store.StateDegraded.String(), "cause", store.Reason(err), "err", err)
	} else {
		s.log.Debug("pebble background error", "err", err)
	}
	if s.stalled.Load() {
		s.stallFailed(err)
	}
	select {
	case <-s.stop:
	case <-time.After(min(time.Duration(1<<min(n, 10))*time.Millisecond, time.Second)):
	}
}

// writeStall is Pebble's WriteStallBegin/End: writes wait for a memtable flush. When the
// flushes are failing, the wait has no end until the disk recovers, so a stall while they
// fail takes the store down: later writes are refused instead of blocking (the few already
// inside Pebble wait for the flush, and complete truthfully once it succeeds).
func (s *Store) writeStall(begin bool) {
	s.stalled.Store(begin)
	if !begin || s.bgFailures.Load() == 0 {
		return
	}
	s.mu.Lock()
	cause := s.health.cause
	s.mu.Unlock()
	if cause == nil {
		cause = errors.New("memtable flushes fail")
	}
	s.stallFailed(cause)
}

// stallFailed takes the store down because writes stall behind flushes that fail with err.
func (s *Store) stallFailed(err error) {
	if errors.Is(err, store.ErrUnavailable) || errors.Is(err, store.ErrCorrupt) {
		s.fail(err)
		return
	}
	s.fail(fmt.Errorf("pebblestore: writes stalled behind failing flushes: %w", err))
}

// backgroundOK follows a flush or compaction that succeeded: a degraded store is OK again.
func (s *Store) backgroundOK() {
	s.bgFailures.Store(0)
	s.mu.Lock()
	changed := s.health.state == store.StateDegraded && s.health.set(store.StateOK, nil, time.Now())
	s.mu.Unlock()
	if changed {
		s.log.Info("store recovered: background work succeeds again", "state", store.StateOK.String())
	}
}

// manifestFault is called by pebbleLogger.Fatalf for a failed MANIFEST write, which Pebble
// declares fatal: the store goes down and reopens from disk once it can.
func (s *Store) manifestFault(msg string) {
	s.fail(errors.New("pebblestore: " + msg))
}

// recoverLoop retries recover with exponential backoff, from Options.RetryInterval up to
// Options.MaxRetryInterval, until it succeeds or Close stops it.
func (s *Store) recoverLoop(done chan struct{}) {
	defer close(done)
	delay := s.opts.RetryInterval
	t := time.NewTimer(delay)
	defer t.Stop()
	for attempt := 1; ; attempt++ {
		select {
		case <-s.stop:
			return
		case <-t.C:
		}
		err := s.recover()
		if err == nil || errors.Is(err, store.ErrClosed) {
			return
		}
		s.log.Debug("store still down", "attempt", attempt, "err", err, "retry_in", delay)
		delay = min(delay*2, s.opts.MaxRetryInterval)
		t.Reset(delay)
	}
}

// recover makes one recovery attempt: it probes the file system with a small synced write,
// and when that works, waits for the calls in progress, closes Pebble, opens it again from
// the files on disk (replaying the WAL up to where it failed), reloads the streams and
// commits a synced batch. On success the store is OK again.
func (s *Store) recover() error {
	if err := s.prepareDir(); err != nil {
		return err
	}
	if err := s.probe(); err != nil {
		return err
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return store.ErrClosed
	}
	s.reopening = true
	s.syncGate()
	// Bounded: a call that does not return (a Scan callback that blocks) must not keep
	// reads refused for long; give up this attempt and retry later.
	deadline := time.Now().Add(drainTimeout)
	wake := time.AfterFunc(drainTimeout, func() {
		s.mu.Lock()
		s.idle.Broadcast()
		s.mu.Unlock()
	})
	for s.inflight.Load() > 0 && time.Now().Before(deadline) {
		s.idle.Wait()
	}
	wake.Stop()
	if n := s.inflight.Load(); n > 0 {
		s.reopening = false
		s.syncGate()
		s.mu.Unlock()
		return fmt.Errorf("pebblestore: %d calls still in progress after %v; reopen postponed", n, drainTimeout)
	}
	s.mu.Unlock()

	err := s.reopen()

	if err == nil {
		err = s.wal.faultErr() // a fault of the new database since the synced batch
	}
	s.mu.Lock()
	s.reopening = false
	if err != nil {
		s.health.cause = err
		s.syncGate()
		s.mu.Unlock()
		return err
	}
	down := s.health.since
	s.health.recovering = false
	s.health.set(store.StateOK, nil, time.Now())
	s.syncGate()
	s.mu.Unlock()
	s.log.Warn("store recovered: durable writes are accepted again", "state", store.StateOK.String(),
		"down_for", time.Since(down).Round(time.Millisecond))
	return nil
}

// prepareDir creates the data directory and takes its lock when a start-up on a faulty
// file system could not (Open's degraded start); otherwise it does nothing. Only the
// recoverer calls it.
func (s *Store) prepareDir() error {
	if s.dirLock != nil {
		return nil
	}
	if err := s.fs.MkdirAll(s.dir, 0o755); err != nil {
		return fmt.Errorf("pebblestore: create data directory: %w", err)
	}
	lock, err := s.fs.Lock(s.fs.PathJoin(s.dir, lockFile))
	if err != nil {
		if store.IsDiskFault(err) {
			return fmt.Errorf("pebblestore: lock data directory: %w", err)
		}
		return fmt.Errorf("%w: %s (stop the other titan process): %v", store.ErrLocked, s.dir, err)
	}
	s.mu.Lock()
	closed := s.closed
	if !closed {
		s.dirLock = lock
	}
	s.mu.Unlock()
	if closed {
		_ = lock.Close()
		return store.ErrClosed
	}
	return nil
}

// probe writes, syncs and removes a small file in the data directory.
func (s *Store) probe() error {
	name := s.fs.PathJoin(s.dir, probeFile)
	f, err := s.fs.Create(name, "titan-probe")
	if err != nil {
		return fmt.Errorf("pebblestore: probe: %w", err)
	}
	_, err = f.Write(make([]byte, probeBytes))
	if err == nil {
		err = f.Sync()
	}
	err = errors.Join(err, f.Close(), s.fs.Remove(name))
	if err != nil {
		return fmt.Errorf("pebblestore: probe: %w", err)
	}
	return nil
}

// reopen replaces s.db; no call is in progress. On failure s.db is nil.
func (s *Store) reopen() error {
	if s.db != nil {
		if err := s.closeDB(); err != nil {
			s.log.Debug("closing the failed database", "err", err)
		}
	}
	// The old database's stall and failure streak end with it.
	s.stalled.Store(false)
	s.bgFailures.Store(0)
	if err := s.openDB(false); err != nil {
		return err
	}
	streams, err := s.loadStreams()
	if err == nil {
		err = s.mergeStreams(streams)
	}
	if err != nil {
		_ = s.closeDB()
		return err
	}
	return nil
}

// mergeStreams installs the streams loaded after a reopen. Sequences handed out by Appends
// that failed are not reused: a stream keeps the higher of its in-memory and on-disk
// high-water marks, and the raised marks are committed with a synced batch, which is also
// the proof that writes work again.
func (s *Store) mergeStreams(loaded map[string]*stream) error {
	b := s.db.NewBatch()
	defer b.Close()
	s.smu.Lock()
	defer s.smu.Unlock()
	for name, old := range s.streams {
		st := loaded[name]
		if st == nil {
			if old.last == 0 {
				continue
			}
			st = newStream(name)
			loaded[name] = st
		}
		if old.last > st.last {
			st.last = old.last
			st.first = 0
			st.durable.Store(st.last)
			if err := b.Set(st.stateKey, st.stateLocked().encode(), nil); err != nil {
				return wrapErr("reopen", err)
			}
			st.persistedLocked() // no call is in progress: nothing else holds the stream
		}
	}
	if b.Empty() {
		if err := b.LogData(nil, nil); err != nil {
			return wrapErr("reopen", err)
		}
	}
	if err := s.db.Apply(b, pebble.Sync); err != nil {
		return wrapErr("reopen", err)
	}
	if err := s.wal.faultErr(); err != nil {
		return wrapErr("reopen", err)
	}
	s.streams = loaded
	s.lastStream.Store(nil)
	return nil
}

// closeDB closes s.db and sets it to nil; a panic inside Pebble becomes an error.
func (s *Store) closeDB() (err error) {
	db := s.db
	s.db = nil
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("pebblestore: close: pebble panicked: %v", p)
		}
	}()
	return wrapErr("close", db.Close())
}
