package memstore

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/titan-broker/titan/internal/store"
)

// scanChunk is how many records Scan copies out of a stream under its lock before calling
// the callback for them with no lock held.
const scanChunk = 128

// Store is an in-memory store.Store. The zero value is not usable; call New.
type Store struct {
	d      *data
	closed atomic.Bool
}

var _ store.Store = (*Store)(nil)

// data is what survives a Reopen: the streams and the metadata.
type data struct {
	mu      sync.RWMutex
	streams map[string]*stream // guarded by mu
	meta    map[string][]byte  // guarded by mu
	opened  time.Time          // when New ran
}

type record struct {
	seq  uint64
	data []byte // owned by the store, never modified; nil slot means deleted
	live bool
}

// stream holds one stream's records in ascending seq order. Deleted records leave a dead
// slot that is compacted away once dead slots outnumber live ones.
type stream struct {
	mu    sync.Mutex
	last  uint64   // guarded by mu: high-water mark
	recs  []record // guarded by mu: ascending seq, live and dead slots
	live  int64    // guarded by mu: live records in recs
	bytes int64    // guarded by mu: data bytes of live records
}

// New returns an empty, open Store.
func New() *Store {
	return &Store{d: &data{streams: make(map[string]*stream), meta: make(map[string][]byte), opened: time.Now()}}
}

// Health implements store.Store: an in-memory store is always StateOK.
func (s *Store) Health() store.Health {
	return store.Health{State: store.StateOK, Since: s.d.opened}
}

// Reopen returns a new open Store over the same streams and metadata, as if the process had
// restarted. It returns an error unless s has been closed, as a real restart requires.
func (s *Store) Reopen() (*Store, error) {
	if !s.closed.Load() {
		return nil, fmt.Errorf("memstore: Reopen of a store that is still open")
	}
	return &Store{d: s.d}, nil
}

func (s *Store) check(name string) error {
	if s.closed.Load() {
		return store.ErrClosed
	}
	return store.CheckName(name)
}

func (s *Store) stream(name string) *stream {
	s.d.mu.RLock()
	st := s.d.streams[name]
	s.d.mu.RUnlock()
	return st
}

// Append implements store.Store. The records are copied; it never fails except for
// ErrClosed, ErrInvalidName and ErrNoRecords.
func (s *Store) Append(name string, records ...[]byte) (uint64, error) {
	if err := s.check(name); err != nil {
		return 0, err
	}
	if len(records) == 0 {
		return 0, store.ErrNoRecords
	}
	st := s.stream(name)
	if st == nil {
		s.d.mu.Lock()
		st = s.d.streams[name]
		if st == nil {
			st = &stream{}
			s.d.streams[name] = st
		}
		s.d.mu.Unlock()
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	first := st.last + 1
	for i, r := range records {
		st.recs = append(st.recs, record{seq: first + uint64(i), data: slices.Clone(r), live: true})
		st.bytes += int64(len(r))
	}
	st.live += int64(len(records))
	st.last += uint64(len(records))
	return first, nil
}

// indexLocked returns the index of the first slot with seq >= seq. st.mu must be held.
func (st *stream) indexLocked(seq uint64) int {
	return sort.Search(len(st.recs), func(i int) bool { return st.recs[i].seq >= seq })
}

// compactLocked drops dead slots when they outnumber live ones. st.mu must be held.
func (st *stream) compactLocked() {
	if int64(len(st.recs)) <= 2*st.live+32 {
		return
	}
	kept := make([]record, 0, st.live)
	for _, r := range st.recs {
		if r.live {
			kept = append(kept, r)
		}
	}
	st.recs = kept
}

// Delete implements store.Store.
func (s *Store) Delete(name string, seqs ...uint64) error {
	if err := s.check(name); err != nil {
		return err
	}
	st := s.stream(name)
	if st == nil {
		return nil
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	for _, seq := range seqs {
		i := st.indexLocked(seq)
		if i < len(st.recs) && st.recs[i].seq == seq && st.recs[i].live {
			st.bytes -= int64(len(st.recs[i].data))
			st.live--
			st.recs[i] = record{seq: seq}
		}
	}
	st.compactLocked()
	return nil
}

// Trim implements store.Store.
func (s *Store) Trim(name string, before uint64) error {
	if err := s.check(name); err != nil {
		return err
	}
	st := s.stream(name)
	if st == nil {
		return nil
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	n := st.indexLocked(before)
	for _, r := range st.recs[:n] {
		if r.live {
			st.live--
			st.bytes -= int64(len(r.data))
		}
	}
	st.recs = slices.Clone(st.recs[n:])
	return nil
}

// Scan implements store.Store. It copies up to scanChunk record references under the
// stream's lock, then calls fn for them with no lock held.
func (s *Store) Scan(name string, from uint64, fn func(seq uint64, data []byte) bool) error {
	if err := s.check(name); err != nil {
		return err
	}
	st := s.stream(name)
	if st == nil {
		return nil
	}
	buf := make([]record, 0, scanChunk)
	for {
		if s.closed.Load() {
			return store.ErrClosed
		}
		buf = buf[:0]
		st.mu.Lock()
		for i := st.indexLocked(from); i < len(st.recs) && len(buf) < scanChunk; i++ {
			if st.recs[i].live {
				buf = append(buf, st.recs[i])
			}
		}
		st.mu.Unlock()
		if len(buf) == 0 {
			return nil
		}
		for _, r := range buf {
			if !fn(r.seq, r.data) {
				return nil
			}
		}
		from = buf[len(buf)-1].seq + 1
	}
}

// Streams implements store.Store.
func (s *Store) Streams() ([]store.StreamInfo, error) {
	if s.closed.Load() {
		return nil, store.ErrClosed
	}
	s.d.mu.RLock()
	names := make([]string, 0, len(s.d.streams))
	sts := make(map[string]*stream, len(s.d.streams))
	for n, st := range s.d.streams {
		names = append(names, n)
		sts[n] = st
	}
	s.d.mu.RUnlock()
	slices.SortFunc(names, strings.Compare)
	out := make([]store.StreamInfo, 0, len(names))
	for _, n := range names {
		st := sts[n]
		st.mu.Lock()
		info := store.StreamInfo{Name: n, Last: st.last, First: st.last + 1, Count: st.live, Bytes: st.bytes}
		for _, r := range st.recs {
			if r.live {
				info.First = r.seq
				break
			}
		}
		st.mu.Unlock()
		out = append(out, info)
	}
	return out, nil
}

// SetMeta implements store.Store.
func (s *Store) SetMeta(key string, value []byte) error {
	if err := s.check(key); err != nil {
		return err
	}
	v := make([]byte, len(value))
	copy(v, value)
	s.d.mu.Lock()
	s.d.meta[key] = v
	s.d.mu.Unlock()
	return nil
}

// Meta implements store.Store.
func (s *Store) Meta(key string) ([]byte, bool, error) {
	if err := s.check(key); err != nil {
		return nil, false, err
	}
	s.d.mu.RLock()
	v, ok := s.d.meta[key]
	s.d.mu.RUnlock()
	if !ok {
		return nil, false, nil
	}
	return slices.Clone(v), true, nil
}

// Close implements store.Store. The data stays reachable through Reopen.
func (s *Store) Close() error {
	if s.closed.Swap(true) {
		return store.ErrClosed
	}
	return nil
}

// Check verifies the store's internal invariants (ascending unique seqs, counters matching
// the records, nothing above the high-water mark) and returns a description of the first
// violation, or nil. It is meant for tests, takes every lock in turn and is O(records).
func (s *Store) Check() error {
	s.d.mu.RLock()
	defer s.d.mu.RUnlock()
	for name, st := range s.d.streams {
		st.mu.Lock()
		var live, bytes int64
		var prev uint64
		for _, r := range st.recs {
			if r.seq <= prev || r.seq > st.last {
				st.mu.Unlock()
				return fmt.Errorf("memstore: stream %q: seq %d out of order or above last %d", name, r.seq, st.last)
			}
			prev = r.seq
			if r.live {
				live++
				bytes += int64(len(r.data))
			}
		}
		ok := live == st.live && bytes == st.bytes
		st.mu.Unlock()
		if !ok {
			return fmt.Errorf("memstore: stream %q: counted %d records / %d bytes, recorded %d / %d", name, live, bytes, st.live, st.bytes)
		}
	}
	return nil
}

// AppendAsync implements store.AsyncAppender; the records are durable (in memory) at once.
func (s *Store) AppendAsync(name string, records ...[]byte) (uint64, func() error, error) {
	first, err := s.Append(name, records...)
	if err != nil {
		return 0, nil, err
	}
	return first, func() error { return nil }, nil
}
