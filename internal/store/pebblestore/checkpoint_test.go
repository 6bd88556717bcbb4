package pebblestore

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/titan-broker/titan/internal/store"
	"github.com/titan-broker/titan/internal/store/storetest"
)

// lowCheckpoints makes group commits write a checkpoint every records records (and 1 KiB),
// for the rest of the test.
func lowCheckpoints(t *testing.T, records uint64) {
	saved := checkpointEvery
	checkpointEvery.records, checkpointEvery.bytes = records, 1<<10
	t.Cleanup(func() { checkpointEvery = saved })
}

// TestConformanceCheckpoints runs the suite with a checkpoint every few records, so that
// every operation meets streams whose state lives in checkpoint keys and record keys above
// them (Check, after every subtest, completes each state as Open does).
func TestConformanceCheckpoints(t *testing.T) {
	lowCheckpoints(t, 3)
	var (
		mu  sync.Mutex
		fss = map[*testing.T]vfs.FS{}
	)
	storetest.Run(t, func(t *testing.T) store.Store {
		mu.Lock()
		fs, ok := fss[t]
		if !ok {
			fs = vfs.NewMem()
			fss[t] = fs
		}
		mu.Unlock()
		s, err := Open("db", Options{FS: fs})
		if err != nil {
			t.Fatalf("Open: %v", err)
		}
		return s
	})
}

// TestAppendOnlyTablesAreMoved checks the point of leaving the state key out of record
// batches: the memtables of a stream that only grows flush to tables that overlap no other
// table, so Pebble never rewrites them in a compaction (it moves them, if anything). A state
// key in every batch, which sorts after every record, made each flushed table overlap all
// newer ones, and every flush was merged again into the level below. With and without
// checkpoints (which sort among the records).
func TestAppendOnlyTablesAreMoved(t *testing.T) {
	for _, every := range []uint64{checkpointEvery.records, 500} {
		t.Run(fmt.Sprintf("checkpoint-every=%d", every), func(t *testing.T) {
			lowCheckpoints(t, every)
			checkpointEvery.bytes = 1 << 30
			s := openT(t, "db", Options{FS: vfs.NewMem(), MemTableBytes: 256 << 10})
			rec := make([]byte, 100)
			waits := make([]func() error, 0, 64)
			for i := 0; s.db.Metrics().Flush.Count < 16; i++ {
				if i > 1_000_000 {
					t.Fatal("no 16 flushes after 1,000,000 records")
				}
				copy(rec, fmt.Sprintf("record %d", i))
				_, wait, err := s.AppendAsync("events/log", rec)
				if err != nil {
					t.Fatal(err)
				}
				if waits = append(waits, wait); len(waits) == cap(waits) {
					for _, w := range waits {
						if err := w(); err != nil {
							t.Fatal(err)
						}
					}
					waits = waits[:0]
				}
			}
			for _, w := range waits {
				if err := w(); err != nil {
					t.Fatal(err)
				}
			}
			if err := s.db.Flush(); err != nil {
				t.Fatal(err)
			}
			m := s.db.Metrics()
			total := m.Total()
			t.Logf("flushes %d, compactions %d (moves %d), bytes flushed %d, compacted %d, moved %d",
				m.Flush.Count, m.Compact.Count, m.Compact.MoveCount, m.Levels[0].TableBytesFlushed,
				total.TableBytesCompacted, total.TableBytesMoved)
			if total.TableBytesCompacted != 0 {
				t.Errorf("compactions rewrote %d bytes of append-only records (%d flushed)",
					total.TableBytesCompacted, m.Levels[0].TableBytesFlushed)
			}
			closeT(t, s)
		})
	}
}

// TestCrashRecoversStateAboveCheckpoint simulates kill -9 while appenders, deleters and a
// trimmer run on streams whose states are checkpointed only now and then: the reopened
// store must count exactly the records it holds (Count, Bytes, what Scan returns; Check
// agrees), keep every acknowledged record, never give a high-water mark below an
// acknowledged sequence, and continue the sequences above it. Then a clean close and
// reopen must give the same streams.
func TestCrashRecoversStateAboveCheckpoint(t *testing.T) {
	lowCheckpoints(t, 50)
	for round := range 6 {
		fs := vfs.NewCrashableMem()
		s := openT(t, "db", Options{FS: fs})
		var (
			mu    sync.Mutex
			acked = map[string]map[uint64]string{"a": {}, "b": {}}
			wg    sync.WaitGroup
			stop  = make(chan struct{})
		)
		for w := range 4 {
			name := []string{"a", "b"}[w%2]
			wg.Go(func() {
				for i := 0; ; i++ {
					select {
					case <-stop:
						return
					default:
					}
					data := fmt.Sprintf("%d-%d", w, i)
					seq, err := s.Append(name, []byte(data))
					if err != nil {
						t.Error(err)
						return
					}
					if i%5 == 0 {
						_ = s.Delete(name, seq) // a lost delete is allowed: not checked
						continue
					}
					mu.Lock()
					acked[name][seq] = data
					mu.Unlock()
					if w == 1 && i%200 == 199 {
						// Retention on "b": the trimmed records leave the acknowledged set.
						mu.Lock()
						before := seq - 100
						for k := range acked[name] {
							if k < before {
								delete(acked[name], k)
							}
						}
						if err := s.Trim(name, before); err != nil {
							t.Error(err)
						}
						mu.Unlock()
					}
				}
			})
		}
		time.Sleep(time.Duration(30+round*15) * time.Millisecond)
		mu.Lock()
		snapshot := map[string]map[uint64]string{}
		for name, m := range acked {
			snapshot[name] = make(map[uint64]string, len(m))
			for k, v := range m {
				snapshot[name][k] = v
			}
		}
		crashed := fs.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 50, RNG: newRand(round)})
		mu.Unlock()
		close(stop)
		wg.Wait()
		closeT(t, s)

		r := openT(t, "db", Options{FS: crashed})
		infos := checkCounts(t, r)
		for _, in := range infos {
			got := scanAll(t, r, in.Name)
			for seq, want := range snapshot[in.Name] {
				if got[seq] != want {
					t.Fatalf("round %d: %s: acknowledged seq %d = %q after the crash, want %q", round, in.Name, seq, got[seq], want)
				}
				if seq > in.Last {
					t.Fatalf("round %d: %s: high-water mark %d below acknowledged seq %d", round, in.Name, in.Last, seq)
				}
			}
			if seq, err := r.Append(in.Name, []byte("after")); err != nil || seq != in.Last+1 {
				t.Fatalf("round %d: %s: Append after the crash = %d, %v; want %d", round, in.Name, seq, err, in.Last+1)
			}
		}
		before := checkCounts(t, r)
		closeT(t, r)
		r = openT(t, "db", Options{FS: crashed})
		after := checkCounts(t, r)
		if fmt.Sprint(before) != fmt.Sprint(after) {
			t.Fatalf("round %d: streams before a clean close %+v, after reopening %+v", round, before, after)
		}
		closeT(t, r)
		t.Logf("round %d: streams after the crash %+v", round, infos)
	}
}

// scanAll returns every record of stream name.
func scanAll(t *testing.T, s *Store, name string) map[uint64]string {
	t.Helper()
	got := map[uint64]string{}
	if err := s.Scan(name, 0, func(seq uint64, data []byte) bool {
		got[seq] = string(data)
		return true
	}); err != nil {
		t.Fatal(err)
	}
	return got
}

// checkCounts returns s's streams after checking each one's Count, Bytes, First and Last
// against what Scan returns.
func checkCounts(t *testing.T, s *Store) []store.StreamInfo {
	t.Helper()
	infos, err := s.Streams()
	if err != nil {
		t.Fatal(err)
	}
	for _, in := range infos {
		var n, bytes int64
		var first, last uint64
		if err := s.Scan(in.Name, 0, func(seq uint64, data []byte) bool {
			if first == 0 {
				first = seq
			}
			last = seq
			n++
			bytes += int64(len(data))
			return true
		}); err != nil {
			t.Fatal(err)
		}
		if n != in.Count || bytes != in.Bytes || (n > 0 && first != in.First) || last > in.Last {
			t.Fatalf("%s: Streams says %+v; Scan found %d records, %d bytes, seqs %d..%d", in.Name, in, n, bytes, first, last)
		}
	}
	return infos
}

// TestUpgradeFormat1 opens a store written in format 1 (each stream's state under 's' |
// nameLen | name): Open moves the states to their state keys, the streams read as before,
// no format-1 key is left and the format key says formatVersion.
func TestUpgradeFormat1(t *testing.T) {
	fs := vfs.NewMem()
	db, err := pebble.Open("db", &pebble.Options{FS: fs, Logger: pebbleLogger{l: discardLogger()}, FormatMajorVersion: pebble.FormatWALSyncChunks})
	if err != nil {
		t.Fatal(err)
	}
	a := streamPrefix(prefixRecord, "a")
	b := db.NewBatch()
	for _, kv := range [][2][]byte{
		{versionKey, {0, 0, 0, 1}},
		{metaKey("sub"), []byte("pos")},
		{recordKey(a, 1), []byte("one")},
		{recordKey(a, 3), []byte("three")}, // 2 was deleted
		{streamPrefix(prefixStreamV1, "a"), streamState{last: 3, count: 2, bytes: 8}.encode()},
		{streamPrefix(prefixStreamV1, "empty"), streamState{last: 5}.encode()},
	} {
		if err := b.Set(kv[0], kv[1], nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.Apply(b, pebble.Sync); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	s := openT(t, "db", Options{FS: fs})
	want := "[{a 1 3 2 8} {empty 6 5 0 0}]"
	if infos := checkCounts(t, s); fmt.Sprint(infos) != want {
		t.Fatalf("Streams after the upgrade = %v, want %s", infos, want)
	}
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: []byte{prefixStreamV1}, UpperBound: []byte{prefixStreamV1 + 1}})
	if err != nil {
		t.Fatal(err)
	}
	if it.First() {
		t.Errorf("format-1 key %q left after the upgrade", it.Key())
	}
	if err := it.Close(); err != nil {
		t.Fatal(err)
	}
	if v, closer, err := s.db.Get(versionKey); err != nil || binary.BigEndian.Uint32(v) != formatVersion {
		t.Fatalf("format key = %x, %v", v, err)
	} else {
		_ = closer.Close()
	}
	if seq, err := s.Append("a", []byte("four")); err != nil || seq != 4 {
		t.Fatalf("Append after the upgrade = %d, %v; want 4", seq, err)
	}
	if seq, err := s.Append("empty", []byte("x")); err != nil || seq != 6 {
		t.Fatalf("Append to the empty stream after the upgrade = %d, %v; want 6", seq, err)
	}
	closeT(t, s)
	s = openT(t, "db", Options{FS: fs})
	want = "[{a 1 4 3 12} {empty 6 6 1 1}]"
	if infos := checkCounts(t, s); fmt.Sprint(infos) != want {
		t.Fatalf("Streams after reopening = %v, want %s", infos, want)
	}
	closeT(t, s)
}

// TestConsumedTopKeepsHighWaterAcrossCleanClose: a group whose newest record of a stream
// was consumed (deleted) before the group was written, while older ones were written, must
// still keep the stream's high-water mark across a clean close, although group commits
// leave the state out of most batches: Open cannot find that sequence in a record key.
func TestConsumedTopKeepsHighWaterAcrossCleanClose(t *testing.T) {
	fs := vfs.NewMem()
	s := openT(t, "db", Options{FS: fs})
	if _, err := s.Append("q", []byte("first")); err != nil { // the stream's state key exists
		t.Fatal(err)
	}
	_, waitKept, err := s.AppendAsyncLazy("q", []byte("kept"))
	if err != nil {
		t.Fatal(err)
	}
	top, wait, err := s.AppendAsyncLazy("q", []byte("consumed"))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Delete("q", top); err != nil {
		t.Fatal(err)
	}
	if err := errors.Join(waitKept(), wait()); err != nil {
		t.Fatal(err)
	}
	closeT(t, s)
	s = openT(t, "db", Options{FS: fs})
	defer closeT(t, s)
	if next, err := s.Append("q", []byte("after")); err != nil || next != top+1 {
		t.Fatalf("next Append = %d, %v; want %d (sequences are not reused after a clean close)", next, err, top+1)
	}
}
