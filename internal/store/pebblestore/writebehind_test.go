package pebblestore

import (
	"slices"
	"testing"
	"time"

	"github.com/titan-broker/titan/internal/store"
)

// A record deleted while its group waits is never written, its Append's wait still
// succeeds, its sequence stays used, and a reopened store neither holds nor reuses it.
func TestWriteBehindDropsRecordDeletedBeforeCommit(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Append("q", []byte("kept")); err != nil {
		t.Fatal(err)
	}
	seq := appendDeletedBeforeCommit(t, s, "q")
	if got := s.Dropped.Load(); got != 1 {
		t.Fatalf("Dropped = %d, want 1", got)
	}
	s = reopenHoldingOnlyKept(t, s, dir)
	defer s.Close()
	infos, err := s.Streams()
	if err != nil {
		t.Fatal(err)
	}
	if len(infos) != 1 || infos[0].Last != seq || infos[0].Count != 1 {
		t.Fatalf("Streams = %+v, want Last %d and Count 1", infos, seq)
	}
	next, err := s.Append("q", []byte("after"))
	if err != nil || next != seq+1 {
		t.Fatalf("next Append = %d, %v; want %d (sequences are never reused)", next, err, seq+1)
	}
}

// Appends to several streams waiting together are committed as one group.
func TestGroupCommitSpansStreams(t *testing.T) {
	s, err := Open(t.TempDir(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	before := s.walSyncs.Load()
	appendHeldTogether(t, s, "a", "b", "c")
	if got := s.walSyncs.Load() - before; got != 1 {
		t.Fatalf("%d WAL syncs for one group of three streams, want 1", got)
	}
	for _, name := range []string{"a", "b", "c"} {
		n := 0
		_ = s.Scan(name, 0, func(uint64, []byte) bool { n++; return true })
		if n != 1 {
			t.Fatalf("stream %s holds %d records, want 1", name, n)
		}
	}
}

// hold makes the store behave as if a group were in flight, so appends gather in the next
// group; release lets it be committed. It first waits for the committer to go idle: a wait
// returns as soon as its group landed, before the committer has looked for a next group, and
// a hold set in that window would be undone when the committer finds none (or the committer
// would take the appends meant to gather).
func hold(s *Store) {
	for {
		s.gmu.Lock()
		if !s.busy {
			s.busy = true
			s.gmu.Unlock()
			return
		}
		s.gmu.Unlock()
		time.Sleep(50 * time.Microsecond)
	}
}

func release(s *Store) {
	s.gmu.Lock()
	s.busy = false
	s.gmu.Unlock()
	s.kickCommitter()
}

// A lazy append starts no commit by itself: its records wait until its wait is called, and a
// group whose records were all deleted before then costs no fsync, while a clean close still
// keeps the stream's high-water mark (sequences are not reused).
func TestLazyAppendCommitsAtWaitAndSkipsConsumedGroup(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	syncs := s.walSyncs.Load()
	seq, wait, err := s.AppendAsyncLazy("q", []byte("consumed"))
	if err != nil {
		t.Fatal(err)
	}
	s.gmu.Lock()
	pending := s.cur != nil && !s.busy
	s.gmu.Unlock()
	if !pending {
		t.Fatal("AppendAsyncLazy started a commit; want the group left for its wait")
	}
	if err := s.Delete("q", seq); err != nil {
		t.Fatal(err)
	}
	if err := wait(); err != nil {
		t.Fatalf("wait: %v", err)
	}
	if got := s.walSyncs.Load() - syncs; got != 0 {
		t.Fatalf("a group whose only record was deleted cost %d fsyncs, want 0", got)
	}
	if got := s.EmptyGroups.Load(); got != 1 {
		t.Fatalf("EmptyGroups = %d, want 1", got)
	}

	seq2, wait2, err := s.AppendAsyncLazy("q", []byte("kept"))
	if err != nil {
		t.Fatal(err)
	}
	if err := wait2(); err != nil { // the wait starts the commit
		t.Fatalf("wait: %v", err)
	}
	if got := s.walSyncs.Load() - syncs; got != 1 {
		t.Fatalf("a lazy append's wait cost %d fsyncs, want 1", got)
	}
	if seq2 != seq+1 {
		t.Fatalf("second sequence %d, want %d", seq2, seq+1)
	}
	s = reopenHoldingOnlyKept(t, s, dir)
	defer s.Close()
}

// After a group of consumed records only (no fsync), a clean close keeps the high-water
// mark: the next append after reopening takes the next sequence.
func TestConsumedGroupKeepsHighWaterAcrossCleanClose(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	seq, wait, err := s.AppendAsyncLazy("q", []byte("consumed"))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Delete("q", seq); err != nil {
		t.Fatal(err)
	}
	if err := wait(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s, err = Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	next, err := s.Append("q", []byte("after"))
	if err != nil || next != seq+1 {
		t.Fatalf("next Append = %d, %v; want %d (sequences are not reused after a clean close)", next, err, seq+1)
	}
}

// reopenHoldingOnlyKept closes s, opens dir again and checks that stream "q" holds only the
// record "kept"; it returns the reopened store.
func reopenHoldingOnlyKept(t *testing.T, s *Store, dir string) *Store {
	t.Helper()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	var seen []string
	if err := s.Scan("q", 0, func(_ uint64, d []byte) bool { seen = append(seen, string(d)); return true }); err != nil {
		s.Close()
		t.Fatal(err)
	}
	if len(seen) != 1 || seen[0] != "kept" {
		s.Close()
		t.Fatalf("after reopen the stream holds %q, want only \"kept\"", seen)
	}
	return s
}

// Records of several streams interleaved in one group, some appended several at a time,
// are each found by their own stream's Delete while they wait: exactly the deleted ones are
// dropped (never written), the rest are committed, and each stream's count is exact.
func TestWriteBehindDropsInterleavedStreamsExactly(t *testing.T) {
	s, err := Open(t.TempDir(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	hold(s)
	seqs := map[string][]uint64{}
	var waits []func() error
	for i := range 12 {
		for _, name := range []string{"a", "b", "c"} {
			recs := [][]byte{[]byte(name)}
			if i%4 == 3 {
				recs = append(recs, []byte(name), []byte(name)) // a multi-record append
			}
			first, w, err := s.AppendAsyncLazy(name, recs...)
			if err != nil {
				release(s)
				t.Fatal(err)
			}
			waits = append(waits, w)
			for k := range recs {
				seqs[name] = append(seqs[name], first+uint64(k))
			}
		}
	}
	// a: every other record, one Delete each; b: a multi-sequence Delete; c: none.
	deleted := map[string]map[uint64]bool{"a": {}, "b": {}, "c": {}}
	for i, seq := range seqs["a"] {
		if i%2 == 0 {
			if err := s.Delete("a", seq); err != nil {
				release(s)
				t.Fatal(err)
			}
			deleted["a"][seq] = true
		}
	}
	bs := []uint64{seqs["b"][len(seqs["b"])-1], seqs["b"][0], seqs["b"][5], seqs["b"][5]}
	if err := s.Delete("b", bs...); err != nil {
		release(s)
		t.Fatal(err)
	}
	for _, seq := range bs {
		deleted["b"][seq] = true
	}
	release(s)
	for _, w := range waits {
		if err := w(); err != nil {
			t.Fatal(err)
		}
	}
	want := uint64(len(deleted["a"]) + len(deleted["b"]))
	if got := s.Dropped.Load(); got != want {
		t.Fatalf("Dropped = %d, want %d", got, want)
	}
	infos, err := s.Streams()
	if err != nil {
		t.Fatal(err)
	}
	for _, info := range infos {
		var kept []uint64
		for _, seq := range seqs[info.Name] {
			if !deleted[info.Name][seq] {
				kept = append(kept, seq)
			}
		}
		var got []uint64
		_ = s.Scan(info.Name, 0, func(seq uint64, _ []byte) bool { got = append(got, seq); return true })
		if !slices.Equal(got, kept) || info.Count != int64(len(kept)) {
			t.Fatalf("stream %s holds %v (Count %d), want %v", info.Name, got, info.Count, kept)
		}
	}
}

// LastCommit (store.CommitClock) is noted as each group lands, before its waits return:
// after a wait it lies between the append and the wait's return, for a synced group and for
// one whose records were all deleted first.
func TestLastCommitNotedBeforeWaitsReturn(t *testing.T) {
	s, err := Open(t.TempDir(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for _, deleteFirst := range []bool{false, true} {
		before := store.Since()
		seq, wait, err := s.AppendAsyncLazy("q", []byte("x"))
		if err != nil {
			t.Fatal(err)
		}
		if deleteFirst {
			if err := s.Delete("q", seq); err != nil {
				t.Fatal(err)
			}
		}
		if err := wait(); err != nil {
			t.Fatal(err)
		}
		after := store.Since()
		if got := s.LastCommit(); got < before || got > after {
			t.Fatalf("deleteFirst=%v: LastCommit %v not within [%v, %v]", deleteFirst, got, before, after)
		}
	}
}

// GroupCommitStats counts what the group commits did: appends held behind a commit in
// flight land together in one group (one fsync), a record deleted while its group waits is
// counted as unwritten, and a group left with nothing to write is no group commit.
func TestGroupCommitStatsCountGroupsRecordsAndUnwritten(t *testing.T) {
	s, err := Open(t.TempDir(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	before := s.GroupCommitStats()
	appendHeldTogether(t, s, "a", "b", "a")
	got := s.GroupCommitStats()
	if d := got.Groups - before.Groups; d != 1 {
		t.Errorf("Groups grew by %d, want 1 (three appends, one group)", d)
	}
	if d := got.Records - before.Records; d != 3 {
		t.Errorf("Records grew by %d, want 3", d)
	}
	if got.Syncs-before.Syncs < 1 || got.GroupTime <= before.GroupTime {
		t.Errorf("Syncs %d -> %d, GroupTime %v -> %v: want an fsync and a commit time", before.Syncs, got.Syncs, before.GroupTime, got.GroupTime)
	}

	before = got
	appendDeletedBeforeCommit(t, s, "a")
	got = s.GroupCommitStats()
	if got.Records-before.Records != 1 || got.Unwritten-before.Unwritten != 1 || got.Groups != before.Groups {
		t.Errorf("after a record deleted before its commit: %+v -> %+v; want one more record, one more unwritten, no group commit", before, got)
	}
}

// appendDeletedBeforeCommit appends one record to stream while a commit is held in flight
// (hold), deletes it before its group is taken, lets the commit go and returns the record's
// sequence once its wait returned nil.
func appendDeletedBeforeCommit(t *testing.T, s *Store, stream string) uint64 {
	t.Helper()
	hold(s) // as if a group were in flight: the next one waits
	seq, wait, err := s.AppendAsync(stream, []byte("acked early"))
	if err != nil {
		release(s)
		t.Fatal(err)
	}
	if err := s.Delete(stream, seq); err != nil {
		release(s)
		t.Fatal(err)
	}
	release(s)
	if err := wait(); err != nil {
		t.Fatalf("wait: %v", err)
	}
	return seq
}

// appendHeldTogether appends one record to each of streams (its name as the record) while a
// commit is held in flight (hold), so that they gather in one group, lets the commit go and
// returns once every wait returned nil.
func appendHeldTogether(t *testing.T, s *Store, streams ...string) {
	t.Helper()
	hold(s) // as if a group were in flight: the next ones gather
	var waits []func() error
	for _, name := range streams {
		_, w, err := s.AppendAsync(name, []byte(name))
		if err != nil {
			release(s)
			t.Fatal(err)
		}
		waits = append(waits, w)
	}
	release(s)
	for _, w := range waits {
		if err := w(); err != nil {
			t.Fatal(err)
		}
	}
}
