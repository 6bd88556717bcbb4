package pebblestore

import (
	"encoding/binary"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble/v2"

	"github.com/titan-broker/titan/internal/store"
)

// Write-behind group commit.
//
// AppendAsync does not write to Pebble itself: it gives the records their sequences (under
// the stream's lock, so a stream's sequences are handed out in order), copies them into the
// current group and wakes the committer. The committer goroutine takes the whole group —
// every stream, every producer — builds one Pebble batch (the records, plus a touched
// stream's latest state only where one is due: a new stream, a newest record deleted before
// the commit, a checkpoint; see stateWriteLocked and doc.go), applies it with Sync and waits
// for the one fsync; then it raises
// each stream's durable mark and releases the group's waiters. While one group is being
// synced the next one fills, so the fsync rate stays one per group however many producers
// and destinations there are.
//
// A record deleted (Delete, Trim) while it still waits in the current group is dropped from
// the group: it never reaches the WAL, and neither does its delete. This is what makes a
// queue message that is consumed and acknowledged before its batch is flushed cost neither
// a write nor a delete. Its sequence stays used (when it was the stream's newest in the
// group, the group writes the stream's state, which keeps the high-water mark; otherwise a
// newer record's key does), and its Append's wait still returns only after the group was
// committed, so "wait returned nil" keeps meaning "the record is durable, or was deleted
// before it had to be".
//
// A group whose records were all deleted before it was taken costs no fsync: only its
// streams' states are written, unsynced (durable with the next sync, like a Delete), and its
// waiters are released at once (their records need no durability). A crash before that sync
// may take such a stream's high-water mark back, so sequences of records that were consumed
// before any commit may be given again after the restart: no reader ever saw them as
// durable (the same holds for records consumed between their append and any commit).
//
// Flow: the appender that finds no group in flight applies the group itself (kickCommitter);
// a lazy appender (AppendAsyncLazy) leaves that to the first wait on the group;
// the committer goroutine awaits its fsync and then commits whatever gathered meanwhile —
// after holding it open a little (gather) when the landing released several blocked
// producers, so that they join it instead of the group after.
//
// Locks: a stream's mu (AppendMulti: several, in name order), then gmu (AppendAsync,
// AppendMulti, Delete, Trim); commitMu, then gmu (the
// committer). Delete and Trim take commitMu after the stream's mu, so a delete of a record
// in the group being applied waits until Pebble has it, and the state they write is never
// overwritten by an older snapshot in a group committed after them.

// pendingRecord is one record waiting in a group: its bytes are arena[off:off+n].
type pendingRecord struct {
	st   *stream
	seq  uint64
	off  int
	n    int
	gone bool // deleted before it was committed
}

// pendStream is what a group holds of one stream: the count and bytes of its records here
// (not gone), and where each of them is in recs. A stream's records join a group in
// sequence order, under its lock, so pos is indexed by seq-base; a sequence that is not in
// the group (none is expected: every append joins the current group) reads -1.
type pendStream struct {
	count, bytes uint64
	base         uint64  // the sequence of pos[0]
	pos          []int32 // recs index of sequence base+i, or -1
	below        uint64  // the stream's highest seq before the group's first (its high-water mark in Pebble)
	topGone      bool    // the stream's highest seq in the group is gone (deleted before the commit)
}

// at returns the recs index of st's record seq in this group, or -1.
func (p *pendStream) at(seq uint64) int {
	if seq < p.base || seq-p.base >= uint64(len(p.pos)) {
		return -1
	}
	return int(p.pos[seq-p.base])
}

// group is the set of appends committed together.
type group struct {
	recs   []pendingRecord
	arena  []byte
	states map[*stream]streamState // each touched stream's latest state
	pend   map[*stream]*pendStream // each touched stream's records here
	free   []*pendStream           // pendStreams of earlier groups, for reuse
	done   chan struct{}           // closed once committed (or failed)
	err    error                   // set before done is closed
	wait   func() error            // every member's wait: one closure per group, not per append
	// blocked counts the waits that found the group not yet committed and blocked on it:
	// the appenders (connections) that send their next record only once this group lands.
	blocked atomic.Int32
}

// newGroupLocked returns an empty group, reusing the buffers of the last committed one.
// s.gmu must be held.
func (s *Store) newGroupLocked() *group {
	var g *group
	if n := len(s.spares); n > 0 {
		sp := s.spares[n-1]
		s.spares[n-1] = nil
		s.spares = s.spares[:n-1]
		g = &group{recs: sp.recs, arena: sp.arena, states: sp.states, pend: sp.pend, free: sp.free, done: make(chan struct{})}
	} else {
		g = &group{
			states: make(map[*stream]streamState),
			pend:   make(map[*stream]*pendStream),
			done:   make(chan struct{}),
		}
	}
	g.wait = func() error {
		defer s.exit()
		select {
		case <-g.done:
		default:
			// A lazy append (AppendAsyncLazy) left its group to be started by its wait: start
			// it now unless a commit is in flight (the committer then takes it after landing).
			s.kickCommitter()
			g.blocked.Add(1)
			<-g.done
		}
		return g.err
	}
	return g
}

// maxFreePend bounds the pendStreams a recycled group keeps for reuse (one per stream a
// group touched; a group touching more allocates the rest).
const maxFreePend = 64

// maxSpares bounds the recycled groups kept: at most two groups are ever in use, one in
// flight and one filling, so two spares let every group reuse buffers. With one spare, a
// commit that landed while no group was filling (a producer between its bursts) found the
// spare still held from the commit before and dropped one of them, and the next group that
// filled during a flight allocated its buffers anew: one group in four in an events-store
// live tail (130 MB of record arena allocated for 60 MB of records, 300,000 SENDs).
const maxSpares = 2

// recycle keeps g's buffers for the next group. Waiters read only done and err, so the
// buffers are free once g is committed. Very large buffers are let go, and so are buffers
// beyond maxSpares.
func (s *Store) recycle(g *group) {
	if cap(g.arena) > 4<<20 {
		return
	}
	clear(g.states)
	for _, p := range g.pend {
		if cap(p.pos) <= 64<<10 && len(g.free) < maxFreePend {
			*p = pendStream{pos: p.pos[:0]}
			g.free = append(g.free, p)
		}
	}
	clear(g.pend)
	sp := &group{recs: g.recs[:0], arena: g.arena[:0], states: g.states, pend: g.pend, free: g.free}
	g.recs, g.arena, g.states, g.pend, g.free = nil, nil, nil, nil, nil
	s.gmu.Lock()
	if len(s.spares) < maxSpares {
		s.spares = append(s.spares, sp)
	}
	s.gmu.Unlock()
}

// addLocked appends records (first sequence first) of st to the current group and records
// next as st's state. st.mu and s.gmu must be held.
func (s *Store) addLocked(st *stream, first uint64, records [][]byte, next streamState) *group {
	g := s.cur
	if g == nil {
		g = s.newGroupLocked()
		s.cur = g
	}
	p := g.pend[st]
	if p == nil {
		if n := len(g.free); n > 0 {
			p, g.free = g.free[n-1], g.free[:n-1]
		} else {
			p = new(pendStream)
		}
		p.base = first
		p.below = first - 1
		g.pend[st] = p
	}
	p.topGone = false
	for i, r := range records {
		seq := first + uint64(i)
		if seq < p.base { // not expected (sequences grow); keep the index exact anyway
			p.pos = slices.Insert(p.pos, 0, slices.Repeat([]int32{-1}, int(p.base-seq))...)
			p.base = seq
		}
		for uint64(len(p.pos)) < seq-p.base {
			p.pos = append(p.pos, -1)
		}
		if k := seq - p.base; k < uint64(len(p.pos)) {
			p.pos[k] = int32(len(g.recs))
		} else {
			p.pos = append(p.pos, int32(len(g.recs)))
		}
		g.recs = append(g.recs, pendingRecord{st: st, seq: seq, off: len(g.arena), n: len(r)})
		g.arena = append(g.arena, r...)
		p.count++
		p.bytes += uint64(len(r))
	}
	g.states[st] = next
	if s.gatherWant > 0 {
		if s.gatherWant--; s.gatherWant == 0 {
			select {
			case s.gathered <- struct{}{}:
			default:
			}
		}
	}
	return g
}

// dropPendingLocked removes from the current group st's records that keep(seq) rejects,
// and returns how many records and bytes were removed and whether st.first was among them.
// st.mu and s.gmu must be held.
func (s *Store) dropPendingLocked(st *stream, seqs []uint64, below uint64) (n, bytes uint64, firstGone bool, rest []uint64) {
	g := s.cur
	if g == nil {
		return 0, 0, false, seqs
	}
	p := g.pend[st]
	if p == nil {
		return 0, 0, false, seqs
	}
	drop := func(i int) {
		r := &g.recs[i]
		if r.gone {
			return
		}
		r.gone = true
		n++
		bytes += uint64(r.n)
		p.count--
		p.bytes -= uint64(r.n)
		p.topGone = p.topGone || r.seq == g.states[st].last
		firstGone = firstGone || r.seq == st.first
	}
	if below > 0 {
		for i := range g.recs {
			if g.recs[i].st == st && g.recs[i].seq < below {
				drop(i)
			}
		}
		return n, bytes, firstGone, seqs
	}
	rest = seqs[:0]
	for _, seq := range seqs {
		if i := p.at(seq); i >= 0 {
			drop(i)
			continue
		}
		rest = append(rest, seq)
	}
	return n, bytes, firstGone, rest
}

// noteStateLocked makes st's state in the current group next, when the group touches st.
// s.gmu must be held.
func (s *Store) noteStateLocked(st *stream, next streamState) {
	if g := s.cur; g != nil {
		if _, ok := g.states[st]; ok {
			g.states[st] = next
		}
	}
}

// flight is a group applied to Pebble whose fsync is still to be awaited.
type flight struct {
	g       *group
	b       *pebble.Batch
	err     error
	applied time.Time // when the batch was handed to Pebble (its fsync started)
}

// writtenStateLocked is the state to write with a removal of st's records: the in-memory
// state without the records still waiting in the current group, which are not in Pebble
// (a crash after the removal but before their group must not count them), and with the
// high-water mark below the group's first seq of st, so that the state covers exactly the
// records Pebble holds (see doc.go: Open counts the records above it). commitMu and gmu
// must be held (so the current group cannot be taken meanwhile).
func (s *Store) writtenStateLocked(st *stream, next streamState) streamState {
	if g := s.cur; g != nil {
		if p := g.pend[st]; p != nil {
			next.count -= p.count
			next.bytes -= p.bytes
			next.last = p.below
		}
	}
	return next
}

// kickCommitter starts a commit when none is in flight: the caller itself takes the current
// group and applies it to Pebble (which starts the fsync at once), and hands the flight to
// the committer goroutine, which awaits the fsync while the next group fills. When a group
// is in flight it does nothing: the committer takes the next group as soon as the flight
// has landed. So at most one group is in flight, an idle store commits without a goroutine
// hop, and a busy one commits whatever gathered during the previous fsync.
func (s *Store) kickCommitter() {
	s.gmu.Lock()
	if s.busy {
		s.gmu.Unlock()
		return
	}
	s.busy = true
	s.gmu.Unlock()
	f, ok := s.takeAndApply()
	if !ok {
		return
	}
	s.flights <- f // capacity 1, and only one flight at a time: never blocks
}

// takeAndApply takes the current group and applies it; ok is false (and busy cleared) when
// there is none.
func (s *Store) takeAndApply() (flight, bool) {
	s.commitMu.Lock()
	s.gmu.Lock()
	g := s.cur
	s.cur = nil
	if g == nil {
		s.busy = false
		s.gmu.Unlock()
		s.commitMu.Unlock()
		return flight{}, false
	}
	s.gmu.Unlock()
	applied := time.Now()
	b, err := s.applyLocked(g)
	s.commitMu.Unlock()
	return flight{g: g, b: b, err: err, applied: applied}, true
}

// commitLoop is the committer goroutine: it lands each flight (awaits its fsync and
// releases its waiters) and commits the groups that gathered meanwhile, until Close stops
// it (after every wait returned, so no group is left).
func (s *Store) commitLoop() {
	defer close(s.committerDone)
	for {
		var f flight
		select {
		case <-s.stop:
			return
		case f = <-s.flights:
		}
		for {
			blocked, synced := s.land(f)
			s.gather(blocked, synced)
			var ok bool
			if f, ok = s.takeAndApply(); !ok {
				break
			}
		}
	}
}

// applyLocked builds g's batch and applies it to Pebble with Sync, without waiting for the
// fsync. It returns a nil batch, writing nothing, when every record of g was deleted before
// it was taken. commitMu must be held.
func (s *Store) applyLocked(g *group) (*pebble.Batch, error) {
	size, live := 0, 0
	for _, r := range g.recs {
		if !r.gone {
			size += len(r.st.recPrefix) + 8 + r.n + 16
			live++
		}
	}
	if live == 0 {
		return nil, s.applyStatesLocked(g)
	}
	for st := range g.states {
		size += stateLen + len(st.recPrefix) + 9 + 16 // the longer of a state and a checkpoint key
	}
	s.Committed.Add(uint64(len(g.recs)))
	b := s.db.NewBatchWithSize(size)
	for _, r := range g.recs {
		if r.gone {
			s.Dropped.Add(1)
			continue
		}
		op := b.SetDeferred(len(r.st.recPrefix)+8, r.n)
		copy(op.Key, r.st.recPrefix)
		binary.BigEndian.PutUint64(op.Key[len(r.st.recPrefix):], r.seq)
		copy(op.Value, g.arena[r.off:r.off+r.n])
		if err := op.Finish(); err != nil {
			return b, wrapErr("append", err)
		}
	}
	for st, state := range g.states {
		// A stream's state rides along only when Open needs it (stateWriteLocked).
		var err error
		switch st.stateWriteLocked(g.pend[st]) {
		case writeState:
			err = b.Set(st.stateKey, state.encode(), nil)
		case writeCheckpoint:
			err = b.Set(checkpointKey(st.recPrefix, state.last), state.encode(), nil)
		}
		if err != nil {
			return b, wrapErr("append", err)
		}
	}
	s.claimSync()
	if err := s.db.ApplyNoSyncWait(b, pebble.Sync); err != nil {
		return b, s.fail(wrapErr("append", err))
	}
	return b, nil
}

// applyStatesLocked commits, without a sync, the stream states of a group whose records were
// all deleted before it was taken, so that a clean close keeps the streams' high-water marks
// (sequences are not reused); the syncer or the next synced commit makes them durable, like
// a Delete. commitMu must be held.
func (s *Store) applyStatesLocked(g *group) error {
	s.Committed.Add(uint64(len(g.recs)))
	s.Dropped.Add(uint64(len(g.recs)))
	s.EmptyGroups.Add(1)
	b := s.db.NewBatch()
	defer b.Close()
	for st, state := range g.states {
		if err := b.Set(st.stateKey, state.encode(), nil); err != nil {
			return wrapErr("append", err)
		}
		st.persistedLocked()
	}
	if err := s.db.Apply(b, pebble.NoSync); err != nil {
		return s.fail(wrapErr("append", err))
	}
	s.dirty.Store(true)
	return nil
}

// maxGather bounds how long the committer holds the next group open for the appenders the
// last one released (see gather).
const maxGather = time.Millisecond

// gather holds the current group open after a landing that released blocked appenders
// (blocked ≥ 2: several connections each awaiting its own commit, like producers that await
// a RECEIPT per SEND), until as many appends joined it as there were blocked waiters, or for
// at most gatherHold(synced), synced being the landed group's commit time.
//
// Why: those appenders send their next record a round trip after the landing. Without the
// hold the group that gathered during the fsync is applied at once, they miss it and join
// the one after, so N synchronous producers split into two alternating groups of N/2 and
// each waits two fsyncs per record. Held for about a round trip, every group carries all N:
// one fsync per N records (PostgreSQL's commit_delay with commit_siblings, made adaptive).
// A single producer (blocked < 2) is never held, and a group that fills the count early is
// applied at once.
func (s *Store) gather(blocked int32, synced time.Duration) {
	if blocked < 2 || synced <= 0 {
		return
	}
	s.gmu.Lock()
	s.gatherWant = int(blocked)
	s.gmu.Unlock()
	if s.gatherTimer == nil {
		s.gatherTimer = time.NewTimer(gatherHold(synced))
	} else {
		s.gatherTimer.Reset(gatherHold(synced))
	}
	select {
	case <-s.gathered:
	case <-s.gatherTimer.C:
	case <-s.stop:
	}
	s.gatherTimer.Stop()
	s.gmu.Lock()
	s.gatherWant = 0
	select {
	case <-s.gathered: // a signal sent after the timer fired
	default:
	}
	s.gmu.Unlock()
}

// gatherHold is the longest gather holds a group open after a landing whose commit took
// synced: two commit times, capped at maxGather.
//
// Why two: an appender that misses the held group waits for the whole next cycle, that
// group's gather plus its commit, so a hold of up to two commit times still costs the early
// joiners less than it saves the late ones. Measured with 16 producers each awaiting a
// RECEIPT per SEND (issue 13's d16) on a 2-core machine: the released producers' round trips
// (RECEIPT write, next SEND read, parse, route, append) took longer than one commit, so a
// one-commit hold carried 11 records per fsync on average and a two-commit hold 15.6, for
// 4-13% more SENDs per second at the same RECEIPT latency. A single producer is never held
// (see gather), so its latency does not change.
func gatherHold(synced time.Duration) time.Duration { return min(2*synced, maxGather) }

// land awaits f's fsync, raises the durable marks of its streams and releases its waiters.
// It returns how many waiters were blocked on the group and how long its commit took from
// apply to landing.
func (s *Store) land(f flight) (blocked int32, synced time.Duration) {
	g, b, err := f.g, f.b, f.err
	if b == nil { // every record was deleted first: nothing to sync
		g.err = err
		blocked = g.blocked.Load()
		s.lastCommit.Store(int64(store.Since()))
		close(g.done)
		s.recycle(g)
		return blocked, 0
	}
	if err == nil {
		if err = b.SyncWait(); err != nil {
			err = s.fail(wrapErr("append", err))
		} else if err = s.wal.faultErr(); err != nil {
			// The WAL failed at some point before this batch's sync returned: it may not
			// have reached the disk.
			err = s.fail(wrapErr("append", err))
		}
	}
	_ = b.Close()
	if err == nil {
		var raised uint64
		for st, state := range g.states {
			raised += st.raiseDurable(state.last)
		}
		s.noteLanded(raised)
	}
	g.err = err
	states := g.states
	g.states = nil
	blocked = g.blocked.Load()
	now := time.Now()
	synced = now.Sub(f.applied)
	if err == nil {
		s.groups.Add(1)
		s.groupNanos.Add(int64(synced))
	}
	s.lastCommit.Store(int64(now.Sub(store.Epoch)) + 1) // store.Since(), from the same clock read
	close(g.done)
	if err == nil {
		// A group commit costs an fsync, so one statfs with it is cheap, and a disk that
		// fills is met within one commit rather than one interval (space.go); after the
		// waiters are released, so that it is neither in their latency nor in synced.
		s.checkSpace()
	}
	s.recycle(&group{recs: g.recs, arena: g.arena, states: states, pend: g.pend, free: g.free})
	return blocked, synced
}

// LastCommit implements store.CommitClock: it is noted by the committer as each group lands,
// before its waits are released.
func (s *Store) LastCommit() time.Duration { return time.Duration(s.lastCommit.Load()) }

// AppendMulti implements store.MultiAppender: the records of every entry join the current
// group while the locks of all their streams are held (taken in name order), so the
// committer cannot split them: they are committed in one Pebble batch, all or none.
func (s *Store) AppendMulti(entries []store.StreamRecords) ([]uint64, func() error, error) {
	if len(entries) == 0 {
		return nil, nil, store.ErrNoRecords
	}
	for _, e := range entries {
		if err := store.CheckName(e.Stream); err != nil {
			return nil, nil, err
		}
		if len(e.Records) == 0 {
			return nil, nil, store.ErrNoRecords
		}
	}
	if err := s.enter(true); err != nil {
		return nil, nil, err
	}
	if s.lowSpace.Load() {
		s.exit()
		return nil, nil, lowSpaceRefusal()
	}
	sts := make([]*stream, len(entries))
	locks := make([]*stream, 0, len(entries))
	for i, e := range entries {
		sts[i] = s.stream(e.Stream, true)
		if !slices.Contains(locks, sts[i]) {
			locks = append(locks, sts[i])
		}
	}
	slices.SortFunc(locks, func(a, b *stream) int { return strings.Compare(a.name, b.name) })
	for _, st := range locks {
		st.mu.Lock()
	}
	firsts := make([]uint64, len(entries))
	s.gmu.Lock()
	var g *group
	for i, e := range entries {
		st := sts[i]
		first := st.last + 1
		next := st.stateLocked()
		for _, r := range e.Records {
			next.bytes += uint64(len(r))
		}
		next.last += uint64(len(e.Records))
		next.count += uint64(len(e.Records))
		if st.count == 0 {
			st.first = first
		}
		st.last, st.count, st.bytes = next.last, next.count, next.bytes
		g = s.addLocked(st, first, e.Records, next)
		firsts[i] = first
	}
	s.gmu.Unlock()
	for _, st := range locks {
		st.mu.Unlock()
	}
	s.kickCommitter()
	return firsts, g.wait, nil
}
