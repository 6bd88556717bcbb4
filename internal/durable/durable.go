// Package durable keeps the messages of durable patterns (queues, events-store) in a
// store.Store: stream naming, the persist-before-accept step, deletion of retired messages,
// and recovery at start-up (DESIGN §5).
//
// Stream names: "queue/<group>/<p|b>/<channel>" and "events/<group>/<p|b>/<channel>", where p
// marks a prefixed destination and b a bare one. Group names cannot contain '/', so a name
// splits unambiguously. Records are message.Encode records; the stream sequence is the
// message's Sequence.
//
// Safe for concurrent use.
package durable

import (
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/titan-broker/titan/internal/address"
	"github.com/titan-broker/titan/internal/dedup"
	"github.com/titan-broker/titan/internal/dest"
	"github.com/titan-broker/titan/internal/message"
	"github.com/titan-broker/titan/internal/queue"
	"github.com/titan-broker/titan/internal/store"
)

// Log persists messages through a store.
type Log struct {
	st  store.Store
	log *slog.Logger

	// Appended counts records committed; Deleted counts records deleted; Corrupt counts
	// records skipped at recovery because they did not decode.
	Appended atomic.Uint64
	Deleted  atomic.Uint64
	Corrupt  atomic.Uint64

	// DeferredDeletes counts deletes a down store refused and that were kept to be retried
	// once it is OK again; DroppedDeletes those beyond MaxDeferredDeletes (their messages
	// are delivered again after a restart, never lost).
	DeferredDeletes atomic.Uint64
	DroppedDeletes  atomic.Uint64

	// DuplicateHeader, when set before use (to dedup.Header, by a broker whose duplicate
	// detection is on), makes every persist of a message whose SEND claimed its duplicate id
	// (message.DuplicateClaimed; the id is that header's value) write the id's record
	// (duplicateIDStream) in the same atomic store batch as the message — the COMMIT's batch for a transaction — so a stored message's
	// id is stored exactly when the message is, whatever the crash (dedup.Cache.Load
	// rebuilds the index from these records). Such a message is never stored lazily. The
	// store must be a store.MultiAppender for this; on any other (the memory store, which
	// keeps nothing across a restart) no record is written.
	DuplicateHeader string

	// CommitLatency, when set before use, observes the seconds each durable acceptance
	// (Persist, PersistAsync's wait) took, append to fsync'd group commit.
	CommitLatency interface{ Observe(float64) }

	ma store.MultiAppender // st as a MultiAppender (nil: it is not one), asserted once by New

	settingsMu sync.Mutex // serialises read-modify-write of the queue-settings meta key
	namesMu    sync.RWMutex
	names      map[dest.Identity]*streamName // guarded by namesMu: stream names, so the hot path does not rebuild them (a map, not a sync.Map: no boxing of the key)
	lastName   atomic.Pointer[streamName]    // the name stream() returned last

	deferMu     sync.Mutex
	deferred    map[string][]uint64 // guarded by deferMu: stream → seqs awaiting a retry
	deferredN   int                 // guarded by deferMu: seqs in deferred
	hasDeferred atomic.Bool         // deferred is not empty (checked without the lock)
}

// MaxDeferredDeletes bounds the deletes kept for a retry while the store is down (8 bytes
// each, plus the stream names).
const MaxDeferredDeletes = 1 << 20

// stream returns id's stream name, cached. The name is a pure function of id (StreamName),
// so a cached name is never wrong: the caches only save building it. The name looked up last
// is kept in lastName, so a busy destination's appends and deletes do not hash its identity.
func (l *Log) stream(id dest.Identity) string {
	if e := l.lastName.Load(); e != nil && e.id == id {
		return e.name
	}
	l.namesMu.RLock()
	e, ok := l.names[id]
	l.namesMu.RUnlock()
	if ok {
		l.lastName.Store(e)
		return e.name
	}
	e = &streamName{name: StreamName(id), id: id}
	e.id.Group, e.id.Channel = strings.Clone(id.Group), strings.Clone(id.Channel)
	l.namesMu.Lock()
	if l.names == nil {
		l.names = make(map[dest.Identity]*streamName)
	}
	if len(l.names) >= maxCachedNames {
		clear(l.names) // bounded: a broker with more destinations rebuilds some names
	}
	l.names[e.id] = e
	l.namesMu.Unlock()
	l.lastName.Store(e)
	return e.name
}

// streamName is a cached stream name and the identity it is for.
type streamName struct {
	id   dest.Identity
	name string
}

// maxCachedNames bounds the stream-name cache.
const maxCachedNames = 1 << 16

// New returns a Log over st.
func New(st store.Store, log *slog.Logger) *Log {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	l := &Log{st: st, log: log}
	l.ma, _ = st.(store.MultiAppender)
	return l
}

// Store returns the underlying store.
func (l *Log) Store() store.Store { return l.st }

// StreamName returns the store stream of a durable identity.
func StreamName(id dest.Identity) string {
	kind := "queue"
	switch id.Pattern {
	case dest.PatternEventsStore:
		kind = "events"
	case dest.PatternEvents: // no messages are stored; the name keys operator queue state
		kind = "topic"
	}
	form := "p"
	if id.Bare {
		form = "b"
	}
	return kind + "/" + id.Group + "/" + form + "/" + id.Channel
}

// ParseStream is the inverse of StreamName.
func ParseStream(name string) (dest.Identity, bool) {
	parts := strings.SplitN(name, "/", 4)
	if len(parts) != 4 || parts[3] == "" || !dest.ValidGroup(parts[1]) {
		return dest.Identity{}, false
	}
	id := dest.Identity{Group: parts[1], Channel: parts[3], Bare: parts[2] == "b"}
	switch parts[0] {
	case "queue":
		id.Pattern = dest.PatternQueues
	case "events":
		id.Pattern = dest.PatternEventsStore
	case "topic":
		id.Pattern = dest.PatternEvents
	default:
		return dest.Identity{}, false
	}
	return id, true
}

// Persist commits m to id's stream (fsync'd, group-committed with concurrent callers) and
// sets m.Sequence. It must run before m is shared. Errors: the store's.
func (l *Log) Persist(id dest.Identity, m *message.Message) error {
	if l.CommitLatency != nil {
		defer observeSince(l.CommitLatency, time.Now())
	}
	if dupID, ok := l.duplicateID(m); ok {
		wait, err := l.persistWithID(id, m, dupID)
		if err == nil {
			err = wait()
		}
		return err
	}
	eb := encodeBufs.Get().(*encodeBuf)
	eb.b = message.Encode(eb.b[:0], m)
	eb.one[0] = eb.b
	seq, err := l.st.Append(l.stream(id), eb.one[:]...)
	putEncodeBuf(eb)
	if err != nil {
		return fmt.Errorf("durable: persist %s: %w", id, err)
	}
	m.Sequence = seq
	l.Appended.Add(1)
	return nil
}

// Forget deletes a persisted message that was then refused admission.
func (l *Log) Forget(id dest.Identity, m *message.Message) {
	if m.Sequence == 0 {
		return
	}
	l.retryDeferred()
	if err := l.st.Delete(l.stream(id), m.Sequence); err != nil {
		l.deleteFailed(l.stream(id), []uint64{m.Sequence}, err)
	}
	if m.DuplicateSeq != 0 { // its id goes with it: a retry is no duplicate
		if err := l.st.Delete(duplicateIDStream, m.DuplicateSeq); err != nil {
			l.deleteFailed(duplicateIDStream, []uint64{m.DuplicateSeq}, err)
		}
	}
}

// Retire deletes the stored copies of messages a queue is done with (acknowledged, or removed
// by the ring, expiry or dead-lettering). It implements pointqueue.Retirer.
func (l *Log) Retire(id dest.Identity, acked []*message.Message, removed []queue.Removed) {
	sp := seqBufs.Get().(*[]uint64)
	seqs := (*sp)[:0]
	defer func() { putSeqs(sp, seqs) }()
	for _, m := range acked {
		if m.Sequence != 0 {
			seqs = append(seqs, m.Sequence)
		}
	}
	for _, r := range removed {
		if m, ok := r.Msg.Value.(*message.Message); ok && m.Sequence != 0 {
			seqs = append(seqs, m.Sequence)
		}
	}
	if len(seqs) == 0 {
		return
	}
	l.retryDeferred()
	if err := l.st.Delete(l.stream(id), seqs...); err != nil {
		l.deleteFailed(l.stream(id), seqs, err)
		return
	}
	l.Deleted.Add(uint64(len(seqs)))
}

// seqBufs holds Retire's sequence lists: the store reads them during Delete only (a
// deferred delete copies them).
var seqBufs = sync.Pool{New: func() any { s := make([]uint64, 0, 16); return &s }}

// putSeqs returns seqs (grown from *sp) to seqBufs.
func putSeqs(sp *[]uint64, seqs []uint64) {
	if cap(seqs) <= 4096 {
		*sp = seqs[:0]
		seqBufs.Put(sp)
	}
}

// RecoverQueues calls fn, stream by stream in sequence order, for every stored queue message.
// Records that do not decode are reported, counted and skipped; nothing before or after them
// is lost.
//
// A store.StreamScanner is read in one ordered pass over every queue stream (one iterator for
// the store, not one per stream), so that a start with many small queues costs what they
// hold.
func (l *Log) RecoverQueues(fn func(id dest.Identity, m *message.Message)) (recovered int, err error) {
	if sc, ok := l.st.(store.StreamScanner); ok {
		return l.recoverScanned(sc, fn)
	}
	streams, err := l.st.Streams()
	if err != nil {
		return 0, err
	}
	dropper, _ := l.st.(store.Dropper)
	var empty []string
	defer func() {
		// An empty queue's stream holds nothing to recover: drop them all, in one write, so
		// that the next start does not load them (start-up stays proportional to stored
		// messages).
		if dropper != nil && len(empty) > 0 {
			if err := dropper.Drop(empty...); err != nil && !errors.Is(err, store.ErrNotEmpty) {
				l.log.Warn("dropping empty queue streams", "streams", len(empty), "err", err)
			}
		}
	}()
	for _, s := range streams {
		id, ok := ParseStream(s.Name)
		if !ok || id.Pattern != dest.PatternQueues {
			continue
		}
		if s.Count == 0 {
			empty = append(empty, s.Name)
			continue
		}
		err := l.st.Scan(s.Name, 0, func(seq uint64, data []byte) bool {
			m, derr := message.Decode(data)
			if derr != nil {
				l.Corrupt.Add(1)
				l.log.Error("skipping unreadable stored message", "stream", s.Name, "seq", seq, "err", derr)
				return true
			}
			m.Sequence = seq
			fn(id, m)
			recovered++
			return true
		})
		if err != nil {
			return recovered, fmt.Errorf("durable: recover %s: %w", s.Name, err)
		}
	}
	return recovered, nil
}

// recoverScanned is RecoverQueues over a store.StreamScanner.
func (l *Log) recoverScanned(sc store.StreamScanner, fn func(id dest.Identity, m *message.Message)) (recovered int, err error) {
	var empty []string
	var id dest.Identity
	var name string
	err = sc.ScanStreams(queueStreamPrefix, func(s string, count int64) bool {
		pid, ok := ParseStream(s)
		if !ok || pid.Pattern != dest.PatternQueues {
			return false
		}
		if count == 0 {
			empty = append(empty, s)
			return false
		}
		id, name = pid, s
		return true
	}, func(seq uint64, data []byte) bool {
		m, derr := message.Decode(data)
		if derr != nil {
			l.Corrupt.Add(1)
			l.log.Error("skipping unreadable stored message", "stream", name, "seq", seq, "err", derr)
			return true
		}
		m.Sequence = seq
		fn(id, m)
		recovered++
		return true
	})
	l.dropEmpty(empty)
	if err != nil {
		return recovered, fmt.Errorf("durable: recover queues: %w", err)
	}
	return recovered, nil
}

// dropEmpty drops the empty queue streams found at recovery, in one write, so that the next
// start does not load them (start-up stays proportional to stored messages).
func (l *Log) dropEmpty(empty []string) {
	dropper, _ := l.st.(store.Dropper)
	if dropper == nil || len(empty) == 0 {
		return
	}
	if err := dropper.Drop(empty...); err != nil && !errors.Is(err, store.ErrNotEmpty) {
		l.log.Warn("dropping empty queue streams", "streams", len(empty), "err", err)
	}
}

// queueStreamPrefix and eventsStreamPrefix begin every queue's and every events-store log's
// stream name (StreamName).
const (
	queueStreamPrefix  = "queue/"
	eventsStreamPrefix = "events/"
)

// Sync makes every delete done so far durable (acknowledged messages stay acknowledged
// after a crash): the router calls it before the RECEIPT of an ACK or NACK that asked for
// one. A store without unsynced deletes (no store.Syncer) needs nothing. Errors: the
// store's (store.ErrUnavailable when it is down).
func (l *Log) Sync() error {
	sy, ok := l.st.(store.Syncer)
	if !ok {
		return nil
	}
	if err := sy.Sync(); err != nil {
		return fmt.Errorf("durable: sync: %w", err)
	}
	return nil
}

// ForgetDestination drops what the store holds for a reclaimed queue: its stream, when
// empty and the store can drop streams (store.Dropper), and the cached stream name. It
// implements dispatch.Forgetter. Events-store logs are never dropped here.
func (l *Log) ForgetDestination(id dest.Identity) {
	l.namesMu.Lock()
	delete(l.names, id)
	l.namesMu.Unlock()
	if id.Pattern != dest.PatternQueues {
		return
	}
	d, ok := l.st.(store.Dropper)
	if !ok {
		return
	}
	if err := d.Drop(StreamName(id)); err != nil && !errors.Is(err, store.ErrNotEmpty) {
		l.log.Warn("dropping reclaimed queue stream", "stream", StreamName(id), "err", err)
	}
}

// Logs returns the identities of the events-store logs in the store. A store.StreamScanner
// lists them without reading a record or seeking a stream's first (Streams does).
func (l *Log) Logs() ([]dest.Identity, error) {
	if sc, ok := l.st.(store.StreamScanner); ok {
		var out []dest.Identity
		err := sc.ScanStreams(eventsStreamPrefix, func(s string, _ int64) bool {
			if id, ok := ParseStream(s); ok && id.Pattern == dest.PatternEventsStore {
				out = append(out, id)
			}
			return false
		}, func(uint64, []byte) bool { return true })
		return out, err
	}
	streams, err := l.st.Streams()
	if err != nil {
		return nil, err
	}
	var out []dest.Identity
	for _, s := range streams {
		if id, ok := ParseStream(s.Name); ok && id.Pattern == dest.PatternEventsStore {
			out = append(out, id)
		}
	}
	return out, nil
}

// Scan implements eventlog.LogStore over id's stream.
func (l *Log) Scan(id dest.Identity, from uint64, fn func(seq uint64, data []byte) bool) error {
	return l.st.Scan(l.stream(id), from, fn)
}

// Bounds implements eventlog.LogStore.
func (l *Log) Bounds(id dest.Identity) (first, last uint64, err error) {
	name := l.stream(id)
	streams, err := l.st.Streams()
	if err != nil {
		return 0, 0, err
	}
	for _, s := range streams {
		if s.Name == name {
			return s.First, s.Last, nil
		}
	}
	return 0, 0, nil
}

// SeekTime implements eventlog.LogStore: the first sequence accepted at or after t.
func (l *Log) SeekTime(id dest.Identity, t time.Time) (uint64, error) {
	ms := t.UnixMilli()
	var found uint64
	err := l.st.Scan(l.stream(id), 0, func(seq uint64, data []byte) bool {
		m, err := message.Decode(data)
		if err == nil && m.TimestampMs >= ms {
			found = seq
			return false
		}
		return true
	})
	if err != nil || found != 0 {
		return found, err
	}
	_, last, err := l.Bounds(id)
	return last + 1, err
}

// SavePosition implements eventlog.LogStore (fsync'd). The value is the position, the time
// of the save and the sequences above the position acknowledged individually (see
// positionValue).
func (l *Log) SavePosition(key string, seq uint64, acked []uint64) error {
	return l.st.SetMeta(key, positionValue(seq, time.Now(), acked))
}

// SavePositionLazy implements eventlog.LogStore: SavePosition without an fsync of its own
// when the store is a store.LazyMetaSetter (durable at the next sync: Sync, which an ACK with
// a receipt waits for, the next Append, or the store's periodic sync); fsync'd otherwise.
func (l *Log) SavePositionLazy(key string, seq uint64, acked []uint64) error {
	if lz, ok := l.st.(store.LazyMetaSetter); ok {
		return lz.SetMetaLazy(key, positionValue(seq, time.Now(), acked))
	}
	return l.SavePosition(key, seq, acked)
}

// Position implements eventlog.LogStore: the saved position and the sequences above it
// acknowledged individually (ascending; nil when none).
func (l *Log) Position(key string) (seq uint64, acked []uint64, ok bool, err error) {
	v, ok, err := l.st.Meta(key)
	if err != nil || !ok {
		return 0, nil, false, err
	}
	seq, _, ok = parsePosition(v)
	if !ok {
		return 0, nil, false, fmt.Errorf("durable: position %s: malformed value", key)
	}
	return seq, parseAcked(v), true, nil
}

// EnforceRetention trims every events-store log to the retention bounds settings gives for
// its identity (max messages, max bytes, max age relative to now). It returns the number of
// records trimmed. Safe to run concurrently with appends. The newest record of a log is only
// trimmed by the message-count bound, so a log never loses its last sequence to bytes or age.
func (l *Log) EnforceRetention(settings func(dest.Identity) address.Settings, now time.Time) (int, error) {
	streams, err := l.st.Streams()
	if err != nil {
		return 0, err
	}
	trimmed := 0
	for _, s := range streams {
		id, ok := ParseStream(s.Name)
		if !ok || id.Pattern != dest.PatternEventsStore || s.Count == 0 {
			continue
		}
		qs := settings(id)
		before := s.First
		if qs.RetentionMaxMessages > 0 && s.Count > qs.RetentionMaxMessages {
			// Sequences may have gaps only from trims, which are prefixes: count from Last.
			before = max(before, s.Last-uint64(qs.RetentionMaxMessages)+1)
		}
		if qs.RetentionMaxAge > 0 || (qs.RetentionMaxBytes > 0 && s.Bytes > qs.RetentionMaxBytes) {
			cutoff := now.Add(-qs.RetentionMaxAge).UnixMilli()
			excess := s.Bytes - qs.RetentionMaxBytes
			err := l.st.Scan(s.Name, s.First, func(seq uint64, data []byte) bool {
				if seq >= s.Last {
					return false
				}
				drop := false
				if qs.RetentionMaxBytes > 0 && excess > 0 {
					excess -= int64(len(data))
					drop = true
				}
				if qs.RetentionMaxAge > 0 {
					if m, err := message.Decode(data); err == nil && m.TimestampMs < cutoff {
						drop = true
					}
				}
				if !drop {
					return false
				}
				before = max(before, seq+1)
				return true
			})
			if err != nil {
				return trimmed, err
			}
		}
		if before > s.First {
			if err := l.st.Trim(s.Name, before); err != nil {
				return trimmed, err
			}
			trimmed += int(min(before-s.First, uint64(s.Count)))
		}
	}
	return trimmed, nil
}

// PersistAsync is Persist split in two (see store.AsyncAppender): it orders m into id's
// stream and sets m.Sequence; wait, called exactly once, returns once m is fsync'd. On a
// store without asynchronous appends it is Persist, with a wait that returns nil.
func (l *Log) PersistAsync(id dest.Identity, m *message.Message) (wait func() error, err error) {
	return l.persistAsync(id, m, false)
}

// PersistLazy is PersistAsync for a message published before its commit: with a
// store.LazyAppender the commit starts only when wait is called (or with another commit), so
// a consumer that acknowledges m meanwhile spares its write and its delete; PersistAsync with
// any other store.
func (l *Log) PersistLazy(id dest.Identity, m *message.Message) (wait func() error, err error) {
	return l.persistAsync(id, m, true)
}

func (l *Log) persistAsync(id dest.Identity, m *message.Message, lazy bool) (wait func() error, err error) {
	aa, ok := l.st.(store.AsyncAppender)
	if !ok {
		if err := l.Persist(id, m); err != nil {
			return nil, err
		}
		return func() error { return nil }, nil
	}
	var start time.Duration // monotonic (sinceEpoch), 0 when CommitLatency is not observed
	if l.CommitLatency != nil {
		start = sinceEpoch()
	}
	var w func() error
	if dupID, ok := l.duplicateID(m); ok {
		if w, err = l.persistWithID(id, m, dupID); err != nil {
			return nil, err
		}
	} else {
		eb := encodeBufs.Get().(*encodeBuf)
		eb.b = message.Encode(eb.b[:0], m)
		eb.one[0] = eb.b // the variadic argument, in the pooled buffer rather than on the heap
		var seq uint64
		if la, ok := l.st.(store.LazyAppender); ok && lazy {
			seq, w, err = la.AppendAsyncLazy(l.stream(id), eb.one[:]...) // the store copies the record
		} else {
			seq, w, err = aa.AppendAsync(l.stream(id), eb.one[:]...)
		}
		putEncodeBuf(eb)
		if err != nil {
			return nil, fmt.Errorf("durable: persist %s: %w", id, err)
		}
		m.Sequence = seq
		l.Appended.Add(1)
	}
	if start != 0 {
		tw := timedWaits.Get().(*timedWait)
		tw.l, tw.start, tw.w = l, start, w
		tw.cc, _ = l.st.(store.CommitClock)
		return tw.fn, nil
	}
	return w, nil // the store's error (its Refusal text is what a client sees)
}

// encodeBuf is a record encoding buffer and the one-record argument list that carries it:
// stores copy what they are given, so both are free again once Append returns.
type encodeBuf struct {
	b   []byte
	one [1][]byte
}

var encodeBufs = sync.Pool{New: func() any { return &encodeBuf{b: make([]byte, 0, 512)} }}

func putEncodeBuf(eb *encodeBuf) {
	eb.one[0] = nil
	if cap(eb.b) <= 64<<10 {
		encodeBufs.Put(eb)
	}
}

// PersistAll commits ms (ms[i] to ids[i]) as one atomic store batch with one commit, and
// sets their Sequences: after a crash either all of them are stored or none is. It is a
// transaction's COMMIT. On a store without store.MultiAppender it persists them one by one
// (not atomic: the memory store, which keeps nothing across a crash anyway). Errors: the
// store's; then none of ms is stored.
func (l *Log) PersistAll(ids []dest.Identity, ms []*message.Message) error {
	if len(ms) == 0 {
		return nil
	}
	if l.ma == nil {
		for i, m := range ms {
			if err := l.Persist(ids[i], m); err != nil {
				for j := range i {
					l.Forget(ids[j], ms[j])
				}
				return err
			}
		}
		return nil
	}
	entries := make([]store.StreamRecords, len(ms), len(ms)+1)
	var dupRecs [][]byte
	var dupOf []int // dupRecs[k] is ms[dupOf[k]]'s
	for i, m := range ms {
		entries[i] = store.StreamRecords{Stream: l.stream(ids[i]), Records: [][]byte{message.Encode(nil, m)}}
		if dupID, ok := l.duplicateID(m); ok {
			dupRecs, dupOf = append(dupRecs, appendDuplicateRecord(nil, ids[i], m, dupID)), append(dupOf, i)
		}
	}
	if len(dupRecs) > 0 { // the ids commit in the COMMIT's batch, all or none with it
		entries = append(entries, store.StreamRecords{Stream: duplicateIDStream, Records: dupRecs})
	}
	firsts, wait, err := l.ma.AppendMulti(entries)
	if err == nil {
		err = wait()
	}
	if err != nil {
		return fmt.Errorf("durable: persist transaction: %w", err)
	}
	for i, m := range ms {
		m.Sequence = firsts[i]
	}
	for k, i := range dupOf {
		ms[i].DuplicateSeq = firsts[len(ms)] + uint64(k)
	}
	l.Appended.Add(uint64(len(ms)))
	return nil
}

// duplicateIDStream holds the duplicate ids of stored messages (dedup.Journal): records of
// an 8-byte big-endian Unix-millisecond acceptance time followed by the cache key
// (dedup.Key), each written in the same atomic batch as its message. It is not a queue or
// log stream (ParseStream refuses it), so recovery and retention skip it.
const duplicateIDStream = "dedup/ids"

// duplicateID returns m's duplicate id when its record is to be stored with it: m's SEND
// claimed it (DuplicateClaimed; not a copy such as a durable subscription's or a dead
// letter, whose SEND claimed an id on another destination, if any), it is DuplicateHeader's
// non-empty value, and the store appends atomically (l.ma). A message without one costs a
// field test, not a header lookup (the router's duplicate stage looked already).
func (l *Log) duplicateID(m *message.Message) (string, bool) {
	if !m.DuplicateClaimed || l.DuplicateHeader == "" || l.ma == nil {
		return "", false
	}
	v, ok := m.Header(l.DuplicateHeader)
	return v, ok && v != ""
}

// appendDuplicateRecord appends to dst the duplicate-id record of m on id (dupID its
// DuplicateHeader): m's acceptance time (TimestampMs, or now when unset) as 8 bytes
// big-endian Unix milliseconds, then dedup.AppendKey.
func appendDuplicateRecord(dst []byte, id dest.Identity, m *message.Message, dupID string) []byte {
	at := m.TimestampMs
	if at == 0 {
		at = time.Now().UnixMilli()
	}
	dst = binary.BigEndian.AppendUint64(dst, uint64(at))
	return dedup.AppendKey(dst, id, dupID)
}

// persistWithID commits m to id's stream and its duplicate-id record to duplicateIDStream
// in one atomic batch (l.ma), sets m.Sequence and m.DuplicateSeq, and returns the store's
// wait for the batch's fsync (its error unwrapped, as PersistAsync's). Both records are
// built in a pooled buffer: the store copies them.
func (l *Log) persistWithID(id dest.Identity, m *message.Message, dupID string) (wait func() error, err error) {
	mb := multiBufs.Get().(*multiBuf)
	mb.b = message.Encode(mb.b[:0], m)
	n := len(mb.b)
	mb.b = appendDuplicateRecord(mb.b, id, m, dupID)
	mb.recs[0][0], mb.recs[1][0] = mb.b[:n:n], mb.b[n:]
	mb.entries[0] = store.StreamRecords{Stream: l.stream(id), Records: mb.recs[0][:]}
	mb.entries[1] = store.StreamRecords{Stream: duplicateIDStream, Records: mb.recs[1][:]}
	firsts, w, err := l.ma.AppendMulti(mb.entries[:])
	mb.put()
	if err != nil {
		return nil, fmt.Errorf("durable: persist %s: %w", id, err)
	}
	m.Sequence, m.DuplicateSeq = firsts[0], firsts[1]
	l.Appended.Add(1)
	return w, nil
}

// multiBuf is persistWithID's pooled argument: the message's record and its duplicate-id
// record in one buffer, and the two one-record stream entries that carry them.
type multiBuf struct {
	b       []byte
	recs    [2][1][]byte
	entries [2]store.StreamRecords
}

var multiBufs = sync.Pool{New: func() any { return &multiBuf{b: make([]byte, 0, 512)} }}

// put clears mb's references and returns it to multiBufs (unless its buffer grew large).
func (mb *multiBuf) put() {
	mb.recs = [2][1][]byte{}
	mb.entries = [2]store.StreamRecords{}
	if cap(mb.b) <= 64<<10 {
		multiBufs.Put(mb)
	}
}

// LoadDuplicateIDs calls fn for every stored duplicate id, oldest first. It implements
// dedup.Journal.
func (l *Log) LoadDuplicateIDs(fn func(key string, at time.Time)) error {
	return l.st.Scan(duplicateIDStream, 0, func(_ uint64, data []byte) bool {
		if len(data) >= 8 {
			fn(string(data[8:]), time.UnixMilli(int64(binary.BigEndian.Uint64(data))))
		}
		return true
	})
}

// TrimDuplicateIDs deletes the stored duplicate ids accepted before before, walking from
// the oldest and stopping at the first one that is not (ids are stored about in acceptance
// order, so a late one only keeps a few for longer). It implements dedup.Journal; like
// Trim it is durable at the next sync.
func (l *Log) TrimDuplicateIDs(before time.Time) error {
	cut := before.UnixMilli()
	var end uint64
	err := l.st.Scan(duplicateIDStream, 0, func(seq uint64, data []byte) bool {
		if len(data) >= 8 && int64(binary.BigEndian.Uint64(data)) >= cut {
			return false
		}
		end = seq + 1
		return true
	})
	if err != nil || end == 0 {
		return err
	}
	return l.st.Trim(duplicateIDStream, end)
}
