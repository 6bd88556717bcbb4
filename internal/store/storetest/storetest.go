package storetest

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/titan-broker/titan/internal/store"
)

// OpenFunc opens the adapter under test for t.
//
// The first call for a given t must return an empty, open Store. A later call with the
// same t, made after the previous Store was closed, must return a Store over the same data:
// a restart (a durable adapter reopens the same directory; memstore uses Reopen). The
// adapter registers its own cleanup for any directory it creates; Run closes the stores.
type OpenFunc func(t *testing.T) store.Store

// Run runs the conformance suite against the adapter opened by open, one subtest per
// property. After every subtest it checks CheckInvariants on the (re)opened store.
func Run(t *testing.T, open OpenFunc) {
	tests := []struct {
		name string
		fn   func(t *testing.T, h *harness)
	}{
		{"AppendScanOrder", testAppendScanOrder},
		{"ScanBounds", testScanBounds},
		{"RecordsAreCopied", testRecordsAreCopied},
		{"SequenceAcrossRestart", testSequenceAcrossRestart},
		{"Delete", testDelete},
		{"Trim", testTrim},
		{"Streams", testStreams},
		{"Meta", testMeta},
		{"MetaPrefix", testMetaPrefix},
		{"InvalidArguments", testInvalidArguments},
		{"ScanCallbackReentry", testScanCallbackReentry},
		{"ConcurrentAppenders", testConcurrentAppenders},
		{"ConcurrentTailReaders", testConcurrentTailReaders},
		{"CloseSticky", testCloseSticky},
		{"HealthOK", testHealthOK},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := &harness{t: t, open: open}
			tc.fn(t, h)
		})
	}
}

// harness tracks the store a subtest works on so that it can be restarted and checked.
type harness struct {
	t    *testing.T
	open OpenFunc
	cur  store.Store
}

// store returns the current store, opening it on first use.
func (h *harness) store() store.Store {
	if h.cur == nil {
		h.openFirst()
	}
	return h.cur
}

// openFirst opens the store for the first time and registers the invariant check. It is
// registered after open so that it runs before the cleanups open registered (t.TempDir's
// removal among them): cleanups run last-registered first.
func (h *harness) openFirst() {
	h.cur = h.open(h.t)
	h.t.Cleanup(h.cleanup)
}

// restart closes the current store (if it is open) and opens it again over the same data.
func (h *harness) restart() store.Store {
	h.t.Helper()
	if h.cur == nil {
		h.openFirst()
		return h.cur
	}
	if err := h.cur.Close(); err != nil && !errors.Is(err, store.ErrClosed) {
		h.t.Fatalf("Close before restart: %v", err)
	}
	h.cur = h.open(h.t)
	return h.cur
}

func (h *harness) cleanup() {
	if h.cur == nil {
		return
	}
	s := h.cur
	if _, err := s.Streams(); errors.Is(err, store.ErrClosed) {
		s = h.restart()
	}
	if err := CheckInvariants(s); err != nil {
		h.t.Errorf("invariants after test: %v", err)
	}
	if err := s.Close(); err != nil {
		h.t.Errorf("Close: %v", err)
	}
}

// entry is one scanned record.
type entry struct {
	seq  uint64
	data string
}

func scanAll(t *testing.T, s store.Store, stream string, from uint64) []entry {
	t.Helper()
	var out []entry
	err := s.Scan(stream, from, func(seq uint64, data []byte) bool {
		out = append(out, entry{seq, string(data)})
		return true
	})
	requireNoError(t, err)
	return out
}

func appendStrings(t *testing.T, s store.Store, stream string, recs ...string) uint64 {
	t.Helper()
	bs := make([][]byte, len(recs))
	for i, r := range recs {
		bs[i] = []byte(r)
	}
	first, err := s.Append(stream, bs...)
	requireNoError(t, err)
	return first
}

func streamInfo(t *testing.T, s store.Store, name string) (store.StreamInfo, bool) {
	t.Helper()
	infos, err := s.Streams()
	requireNoError(t, err)
	for _, in := range infos {
		if in.Name == name {
			return in, true
		}
	}
	return store.StreamInfo{}, false
}

func testAppendScanOrder(t *testing.T, h *harness) {
	s := h.store()
	requireEqual(t, appendStrings(t, s, "a", "a1"), 1)
	requireEqual(t, appendStrings(t, s, "b", "b1", "b2"), 1)
	requireEqual(t, appendStrings(t, s, "a", "a2", "a3", "a4"), 2)
	requireEqual(t, appendStrings(t, s, "a", ""), 5) // empty record allowed
	requireEqual(t, appendStrings(t, s, "b", "b3"), 3)

	requireSliceEqual(t, scanAll(t, s, "a", 0), []entry{{1, "a1"}, {2, "a2"}, {3, "a3"}, {4, "a4"}, {5, ""}})
	requireSliceEqual(t, scanAll(t, s, "b", 1), []entry{{1, "b1"}, {2, "b2"}, {3, "b3"}})
	requireSliceEqual(t, scanAll(t, s, "a", 3), []entry{{3, "a3"}, {4, "a4"}, {5, ""}})

	// Stops as soon as fn returns false.
	var seen []uint64
	requireNoError(t, s.Scan("a", 2, func(seq uint64, _ []byte) bool {
		seen = append(seen, seq)
		return len(seen) < 2
	}))
	requireSliceEqual(t, seen, []uint64{2, 3})
}

func testScanBounds(t *testing.T, h *harness) {
	s := h.store()
	requireEqual(t, len(scanAll(t, s, "nope", 0)), 0)
	appendStrings(t, s, "x", "1", "2", "3")
	requireEqual(t, len(scanAll(t, s, "x", 4)), 0)
	requireEqual(t, len(scanAll(t, s, "x", ^uint64(0))), 0)
	// A stream whose name is a prefix of another's must not see the other's records.
	appendStrings(t, s, "xy", "other")
	appendStrings(t, s, "x\x00", "nul")
	requireSliceEqual(t, scanAll(t, s, "x", 0), []entry{{1, "1"}, {2, "2"}, {3, "3"}})
	requireSliceEqual(t, scanAll(t, s, "x\x00", 0), []entry{{1, "nul"}})
}

func testRecordsAreCopied(t *testing.T, h *harness) {
	s := h.store()
	buf := []byte("original")
	_, err := s.Append("c", buf)
	requireNoError(t, err)
	copy(buf, "CLOBBER!")
	requireSliceEqual(t, scanAll(t, s, "c", 0), []entry{{1, "original"}})

	val := []byte("v1")
	requireNoError(t, s.SetMeta("k", val))
	val[0] = 'X'
	got, ok, err := s.Meta("k")
	requireNoError(t, err)
	requireEqual(t, ok, true)
	requireEqual(t, string(got), "v1")
	got[0] = 'Y'
	got2, _, _ := s.Meta("k")
	requireEqual(t, string(got2), "v1")
}

func testSequenceAcrossRestart(t *testing.T, h *harness) {
	s := h.store()
	appendStrings(t, s, "q", "1", "2", "3")
	appendStrings(t, s, "gone", "1", "2")
	appendStrings(t, s, "trimmed", "1", "2", "3", "4")
	requireNoError(t, s.Delete("gone", 1, 2))
	requireNoError(t, s.Trim("trimmed", 100))

	s = h.restart()
	requireSliceEqual(t, scanAll(t, s, "q", 0), []entry{{1, "1"}, {2, "2"}, {3, "3"}})
	requireEqual(t, len(scanAll(t, s, "gone", 0)), 0)
	requireEqual(t, appendStrings(t, s, "q", "4"), 4)
	// Sequences are never reused, even when every record was deleted or trimmed.
	requireEqual(t, appendStrings(t, s, "gone", "3"), 3)
	requireEqual(t, appendStrings(t, s, "trimmed", "5"), 5)

	s = h.restart()
	in, ok := streamInfo(t, s, "trimmed")
	requireEqual(t, ok, true)
	requireEqual(t, in, store.StreamInfo{Name: "trimmed", First: 5, Last: 5, Count: 1, Bytes: 1})
	requireEqual(t, appendStrings(t, s, "q", "5", "6"), 5)
	requireSliceEqual(t, scanAll(t, s, "q", 4), []entry{{4, "4"}, {5, "5"}, {6, "6"}})
}

func testDelete(t *testing.T, h *harness) {
	s := h.store()
	appendStrings(t, s, "d", "1", "22", "333", "4444", "55555")
	requireNoError(t, s.Delete("d", 2, 4))
	requireNoError(t, s.Delete("d", 2, 2, 99, 0)) // missing, duplicate, never assigned, zero
	requireNoError(t, s.Delete("unknown", 1))
	requireNoError(t, s.Delete("d")) // no seqs
	requireSliceEqual(t, scanAll(t, s, "d", 0), []entry{{1, "1"}, {3, "333"}, {5, "55555"}})
	in, _ := streamInfo(t, s, "d")
	requireEqual(t, in, store.StreamInfo{Name: "d", First: 1, Last: 5, Count: 3, Bytes: 9})

	requireNoError(t, s.Delete("d", 1))
	in, _ = streamInfo(t, s, "d")
	requireEqual(t, in.First, 3)

	s = h.restart() // deletes are durable after a clean Close
	requireSliceEqual(t, scanAll(t, s, "d", 0), []entry{{3, "333"}, {5, "55555"}})
	requireNoError(t, s.Delete("d", 3, 5))
	in, _ = streamInfo(t, s, "d")
	requireEqual(t, in, store.StreamInfo{Name: "d", First: 6, Last: 5, Count: 0, Bytes: 0})
	_, ok := streamInfo(t, s, "unknown")
	requireEqual(t, ok, false) // Delete does not create streams
}

func testTrim(t *testing.T, h *harness) {
	s := h.store()
	appendStrings(t, s, "t", "1", "2", "3", "4", "5", "6")
	requireNoError(t, s.Delete("t", 4))
	requireNoError(t, s.Trim("t", 0))
	requireNoError(t, s.Trim("t", 1))
	requireEqual(t, len(scanAll(t, s, "t", 0)), 5)
	requireNoError(t, s.Trim("t", 3))
	requireSliceEqual(t, scanAll(t, s, "t", 0), []entry{{3, "3"}, {5, "5"}, {6, "6"}})
	requireNoError(t, s.Trim("t", 4)) // only 3 goes; 4 is already deleted
	in, _ := streamInfo(t, s, "t")
	requireEqual(t, in, store.StreamInfo{Name: "t", First: 5, Last: 6, Count: 2, Bytes: 2})
	requireNoError(t, s.Trim("unknown", 10))
	_, ok := streamInfo(t, s, "unknown")
	requireEqual(t, ok, false)

	s = h.restart()
	requireSliceEqual(t, scanAll(t, s, "t", 0), []entry{{5, "5"}, {6, "6"}})
	requireNoError(t, s.Trim("t", 1000))
	in, _ = streamInfo(t, s, "t")
	requireEqual(t, in, store.StreamInfo{Name: "t", First: 7, Last: 6})
	requireEqual(t, appendStrings(t, s, "t", "7"), 7)
}

func testStreams(t *testing.T, h *harness) {
	s := h.store()
	infos, err := s.Streams()
	requireNoError(t, err)
	requireEqual(t, len(infos), 0)
	appendStrings(t, s, "zeta", "z")
	appendStrings(t, s, "alpha", "a", "bb")
	appendStrings(t, s, "mid", "m")
	requireNoError(t, s.Delete("mid", 1))
	infos, err = s.Streams()
	requireNoError(t, err)
	requireSliceEqual(t, infos, []store.StreamInfo{
		{Name: "alpha", First: 1, Last: 2, Count: 2, Bytes: 3},
		{Name: "mid", First: 2, Last: 1},
		{Name: "zeta", First: 1, Last: 1, Count: 1, Bytes: 1},
	})
	infos[0].Name = "mutated" // the slice belongs to the caller
	s = h.restart()
	again, err := s.Streams()
	requireNoError(t, err)
	requireEqual(t, again[0].Name, "alpha")
	requireEqual(t, len(again), 3)
}

func testMeta(t *testing.T, h *harness) {
	s := h.store()
	_, ok, err := s.Meta("missing")
	requireNoError(t, err)
	requireEqual(t, ok, false)
	requireNoError(t, s.SetMeta("sub/1", []byte("pos=10")))
	requireNoError(t, s.SetMeta("sub/1", []byte("pos=11")))
	requireNoError(t, s.SetMeta("empty", nil))
	// Meta keys and stream names are separate namespaces.
	appendStrings(t, s, "sub/1", "rec")

	s = h.restart()
	v, ok, err := s.Meta("sub/1")
	requireNoError(t, err)
	requireEqual(t, ok, true)
	requireEqual(t, string(v), "pos=11")
	v, ok, err = s.Meta("empty")
	requireNoError(t, err)
	requireEqual(t, ok, true)
	requireEqual(t, len(v), 0)
	requireSliceEqual(t, scanAll(t, s, "sub/1", 0), []entry{{1, "rec"}})
}

// metaPrefixer is the metadata listing and deletion every adapter offers (durable.MetaStore
// declares it where it is consumed).
type metaPrefixer interface {
	ScanMeta(prefix string, fn func(key string, value []byte) bool) error
	DeleteMeta(keys ...string) error
}

// testMetaPrefix: ScanMeta lists exactly the keys under a prefix, in order, stops when fn
// returns false, and DeleteMeta's deletions are durable.
func testMetaPrefix(t *testing.T, h *harness) {
	s := h.store()
	mp, ok := s.(metaPrefixer)
	if !ok {
		t.Fatalf("%T has no ScanMeta/DeleteMeta", s)
	}
	list := func(mp metaPrefixer, prefix string) []string {
		var keys []string
		requireNoError(t, mp.ScanMeta(prefix, func(k string, v []byte) bool {
			keys = append(keys, k+"="+string(v))
			return true
		}))
		return keys
	}
	for _, k := range []string{"durable/a/x", "durable/b/y", "durable/a/z", "durable0", "durablf", "other", "durable/\xff"} {
		requireNoError(t, s.SetMeta(k, []byte("v"+k[len(k)-1:])))
	}
	requireSliceEqual(t, list(mp, "durable/a/"), []string{"durable/a/x=vx", "durable/a/z=vz"})
	requireEqual(t, len(list(mp, "durable/")), 4)
	requireEqual(t, len(list(mp, "")), 7)
	requireEqual(t, len(list(mp, "nothing")), 0)
	n := 0
	requireNoError(t, mp.ScanMeta("durable", func(string, []byte) bool { n++; return n < 2 }))
	requireEqual(t, n, 2)
	requireNoError(t, mp.DeleteMeta("durable/a/x", "missing"))
	requireErrorIs(t, mp.DeleteMeta(""), store.ErrInvalidName)

	s = h.restart()
	mp = s.(metaPrefixer)
	requireSliceEqual(t, list(mp, "durable/a/"), []string{"durable/a/z=vz"})
	_, ok, err := s.Meta("durable/a/x")
	requireNoError(t, err)
	requireEqual(t, ok, false)
}

func testInvalidArguments(t *testing.T, h *harness) {
	s := h.store()
	long := strings.Repeat("n", store.MaxNameBytes+1)
	maxName := strings.Repeat("n", store.MaxNameBytes)
	_, err := s.Append("", []byte("x"))
	requireErrorIs(t, err, store.ErrInvalidName)
	_, err = s.Append(long, []byte("x"))
	requireErrorIs(t, err, store.ErrInvalidName)
	_, err = s.Append("s")
	requireErrorIs(t, err, store.ErrNoRecords)
	requireErrorIs(t, s.Delete("", 1), store.ErrInvalidName)
	requireErrorIs(t, s.Trim("", 1), store.ErrInvalidName)
	requireErrorIs(t, s.Scan("", 0, func(uint64, []byte) bool { return true }), store.ErrInvalidName)
	requireErrorIs(t, s.SetMeta("", nil), store.ErrInvalidName)
	_, _, err = s.Meta(long)
	requireErrorIs(t, err, store.ErrInvalidName)
	// The longest valid name works; failed calls created nothing.
	requireEqual(t, appendStrings(t, s, maxName, "ok"), 1)
	infos, err := s.Streams()
	requireNoError(t, err)
	requireEqual(t, len(infos), 1)
}

func testScanCallbackReentry(t *testing.T, h *harness) {
	s := h.store()
	appendStrings(t, s, "r", "1", "2", "3", "4")
	// fn may call back into the store: ack what it reads, append elsewhere, read meta.
	requireNoError(t, s.Scan("r", 0, func(seq uint64, data []byte) bool {
		requireNoError(t, s.Delete("r", seq))
		_, err := s.Append("r-copy", data)
		requireNoError(t, err)
		_, _, err = s.Meta("x")
		requireNoError(t, err)
		return true
	}))
	requireEqual(t, len(scanAll(t, s, "r", 0)), 0)
	requireEqual(t, len(scanAll(t, s, "r-copy", 0)), 4)
}

func testConcurrentAppenders(t *testing.T, h *harness) {
	s := h.store()
	const (
		writers = 8
		each    = 40
	)
	var wg sync.WaitGroup
	got := make([][]uint64, writers) // got[w][i] = seq of writer w's record i on "shared"
	errs := make(chan error, writers)
	for w := range writers {
		wg.Go(func() {
			own := fmt.Sprintf("own-%d", w)
			for i := range each {
				payload := fmt.Sprintf("w%d-%d", w, i)
				var seq uint64
				var err error
				if i%4 == 3 { // some multi-record appends
					seq, err = s.Append("shared", []byte(payload), []byte(payload+"b"))
				} else {
					seq, err = s.Append("shared", []byte(payload))
				}
				if err != nil {
					errs <- err
					return
				}
				got[w] = append(got[w], seq)
				if oseq, err := s.Append(own, []byte(payload)); err != nil || oseq != uint64(i+1) {
					errs <- fmt.Errorf("own stream %s: seq %d, err %v; want %d", own, oseq, err, i+1)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	// Every seq of "shared" is assigned exactly once, contiguously, with the right data.
	byseq := map[uint64]string{}
	for _, e := range scanAll(t, s, "shared", 0) {
		byseq[e.seq] = e.data
	}
	total := 0
	for w := range writers {
		for i, seq := range got[w] {
			want := fmt.Sprintf("w%d-%d", w, i)
			requireEqual(t, byseq[seq], want)
			total++
			if i%4 == 3 {
				requireEqual(t, byseq[seq+1], want+"b")
				total++
			}
		}
	}
	requireEqual(t, len(byseq), total)
	in, _ := streamInfo(t, s, "shared")
	requireEqual(t, in.Last, uint64(total))
	requireEqual(t, in.First, 1)
}

// testConcurrentTailReaders checks the property pollers rely on: a reader that scans from
// the last seq it saw + 1 never misses a record appended concurrently.
func testConcurrentTailReaders(t *testing.T, h *harness) {
	s := h.store()
	const (
		writers = 4
		each    = 30
		total   = writers * each
	)
	var wg sync.WaitGroup
	var writersDone atomic.Bool
	for range writers {
		wg.Go(func() {
			for range each {
				if _, err := s.Append("tail", []byte("m")); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	readerErr := make(chan error, 1)
	go func() {
		var next uint64 = 1
		seen := 0
		for seen < total {
			if writersDone.Load() && seen < total {
				// One last pass after the writers finished: everything must be there now.
				before := seen
				_ = s.Scan("tail", next, func(seq uint64, _ []byte) bool {
					if seq == next {
						next++
						seen++
					}
					return seq == next-1
				})
				if seen < total {
					readerErr <- fmt.Errorf("tail reader: saw %d of %d records (stopped at seq %d, last pass added %d)", seen, total, next, seen-before)
					return
				}
				break
			}
			err := s.Scan("tail", next, func(seq uint64, _ []byte) bool {
				if seq != next {
					readerErr <- fmt.Errorf("tail reader: got seq %d, want %d (a record was skipped)", seq, next)
					return false
				}
				next++
				seen++
				return true
			})
			if err != nil {
				readerErr <- err
				return
			}
			if len(readerErr) > 0 {
				return
			}
		}
		readerErr <- nil
	}()
	wg.Wait()
	writersDone.Store(true)
	requireNoError(t, <-readerErr)
}

func testCloseSticky(t *testing.T, h *harness) {
	s := h.store()
	appendStrings(t, s, "c", "1")
	requireNoError(t, s.Close())
	requireErrorIs(t, s.Close(), store.ErrClosed)
	_, err := s.Append("c", []byte("x"))
	requireErrorIs(t, err, store.ErrClosed)
	requireErrorIs(t, s.Delete("c", 1), store.ErrClosed)
	requireErrorIs(t, s.Trim("c", 1), store.ErrClosed)
	requireErrorIs(t, s.Scan("c", 0, func(uint64, []byte) bool { return true }), store.ErrClosed)
	_, err = s.Streams()
	requireErrorIs(t, err, store.ErrClosed)
	requireErrorIs(t, s.SetMeta("k", nil), store.ErrClosed)
	_, _, err = s.Meta("k")
	requireErrorIs(t, err, store.ErrClosed)

	// Closing while other goroutines hammer the store: every call either works or says
	// ErrClosed, and Close returns once they are out.
	s = h.restart()
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for range 4 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				if _, err := s.Append("c", []byte("y")); err != nil {
					if !errors.Is(err, store.ErrClosed) {
						t.Errorf("Append during Close: %v", err)
					}
					return
				}
			}
		})
	}
	requireNoError(t, s.Close())
	close(stop)
	wg.Wait()
	s = h.restart()
	requireEqual(t, scanAll(t, s, "c", 0)[0], entry{1, "1"})
}

func requireNoError(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("unexpected error: %v", err)
	}
}

func requireErrorIs(t *testing.T, err, target error) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Fatalf("error = %v, want %v", err, target)
	}
}

func requireEqual[T comparable](t *testing.T, got, want T) {
	t.Helper()
	if got != want {
		t.Fatalf("got %+v, want %+v", got, want)
	}
}

func requireSliceEqual[T comparable](t *testing.T, got, want []T) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("got %d elements %+v, want %d %+v", len(got), got, len(want), want)
	}
	for i := range got {
		if got[i] != want[i] {
			t.Fatalf("element %d: got %+v, want %+v", i, got[i], want[i])
		}
	}
}

// testHealthOK: a store that works reports StateOK with no cause, before and after use, and
// Health still answers after Close.
func testHealthOK(t *testing.T, h *harness) {
	s := h.store()
	check := func(when string) {
		t.Helper()
		if hl := s.Health(); hl.State != store.StateOK || hl.Cause != nil || hl.Since.IsZero() {
			t.Fatalf("Health %s = %+v, want StateOK, no cause, Since set", when, hl)
		}
	}
	check("after open")
	if _, err := s.Append("h", []byte("x")); err != nil {
		t.Fatal(err)
	}
	if err := s.SetMeta("h", []byte("y")); err != nil {
		t.Fatal(err)
	}
	check("after writes")
	s = h.restart()
	check("after a restart")
	if hl := s.Health(); hl.Changes != 0 {
		t.Fatalf("Health after a restart counts %d changes, want 0", hl.Changes)
	}
}
