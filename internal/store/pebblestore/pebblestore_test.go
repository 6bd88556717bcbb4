package pebblestore

import (
	"bytes"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/titan-broker/titan/internal/store"
	"github.com/titan-broker/titan/internal/store/storetest"
)

func TestConformance(t *testing.T) {
	var (
		mu   sync.Mutex
		dirs = map[*testing.T]string{}
	)
	storetest.Run(t, func(t *testing.T) store.Store {
		mu.Lock()
		dir, ok := dirs[t]
		if !ok {
			dir = t.TempDir()
			dirs[t] = dir
		}
		mu.Unlock()
		s, err := Open(dir, Options{})
		if err != nil {
			t.Fatalf("Open: %v", err)
		}
		return s
	})
}

// TestConformanceMemFS runs the suite on Pebble's in-memory file system, which checks the
// adapter's logic independently of the OS (and quickly).
func TestConformanceMemFS(t *testing.T) {
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

func openT(t *testing.T, dir string, opts Options) *Store {
	t.Helper()
	s, err := Open(dir, opts)
	if err != nil {
		t.Fatalf("Open(%s): %v", dir, err)
	}
	return s
}

func closeT(t *testing.T, s *Store) {
	t.Helper()
	if err := s.Check(); err != nil {
		t.Errorf("Check: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
}

// TestKeyLayoutGolden pins the on-disk key and value encodings documented in doc.go.
func TestKeyLayoutGolden(t *testing.T) {
	for _, tc := range []struct {
		got, want []byte
	}{
		{recordKey(streamPrefix(prefixRecord, "q/a"), 258),
			[]byte{'r', 0x00, 0x03, 'q', '/', 'a', 0, 0, 0, 0, 0, 0, 0x01, 0x02}},
		{newStream("q/a").stateKey, []byte{'r', 0x00, 0x03, 'q', '/', 'a'}},
		{checkpointKey(streamPrefix(prefixRecord, "q/a"), 258),
			[]byte{'r', 0x00, 0x03, 'q', '/', 'a', 0, 0, 0, 0, 0, 0, 0x01, 0x02, 0x00}},
		{metaKey("sub:1"), []byte{'m', 's', 'u', 'b', ':', '1'}},
		{versionKey, []byte{'v'}},
		{streamState{last: 7, count: 2, bytes: 0x0102}.encode(), []byte{
			0, 0, 0, 0, 0, 0, 0, 7,
			0, 0, 0, 0, 0, 0, 0, 2,
			0, 0, 0, 0, 0, 0, 0x01, 0x02}},
	} {
		if !bytes.Equal(tc.got, tc.want) {
			t.Errorf("encoding = %x, want %x", tc.got, tc.want)
		}
	}
	name, err := parseStreamKey(prefixRecord, []byte{'r', 0, 3, 'q', '/', 'a'})
	if err != nil || name != "q/a" {
		t.Errorf("parseStreamKey = %q, %v", name, err)
	}
	if _, err := parseStreamKey(prefixRecord, []byte{'r', 0, 4, 'q'}); err == nil {
		t.Error("parseStreamKey accepted a short key")
	}
}

// TestOnDiskBytes opens the raw Pebble database behind a store and checks the exact keys and
// values an Append and a SetMeta leave there.
func TestOnDiskBytes(t *testing.T) {
	fs := vfs.NewMem()
	s := openT(t, "db", Options{FS: fs})
	if _, err := s.Append("ab", []byte("x"), []byte("yz")); err != nil {
		t.Fatal(err)
	}
	if err := s.SetMeta("k", []byte("v")); err != nil {
		t.Fatal(err)
	}
	closeT(t, s)

	db, err := pebble.Open("db", &pebble.Options{FS: fs, Logger: pebbleLogger{l: discardLogger()}})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	it, _ := db.NewIter(nil)
	var got []string
	for it.First(); it.Valid(); it.Next() {
		got = append(got, string(it.Key())+"="+string(it.Value()))
	}
	if err := it.Close(); err != nil {
		t.Fatal(err)
	}
	want := []string{
		"mk=v",
		"r\x00\x02ab=" + string(streamState{last: 2, count: 2, bytes: 3}.encode()),
		"r\x00\x02ab\x00\x00\x00\x00\x00\x00\x00\x01=x",
		"r\x00\x02ab\x00\x00\x00\x00\x00\x00\x00\x02=yz",
		"v=\x00\x00\x00\x02",
	}
	if len(got) != len(want) {
		t.Fatalf("keys = %q, want %q", got, want)
	}
	for i := range got {
		if got[i] != want[i] {
			t.Errorf("key %d = %q, want %q", i, got[i], want[i])
		}
	}
}

func TestOpenLocked(t *testing.T) {
	dir := t.TempDir()
	s := openT(t, dir, Options{})
	_, err := Open(dir, Options{})
	if !errors.Is(err, store.ErrLocked) {
		t.Fatalf("second Open = %v, want ErrLocked", err)
	}
	closeT(t, s)
	closeT(t, openT(t, dir, Options{})) // the lock is released by Close
}

func TestOpenForeignDatabase(t *testing.T) {
	fs := vfs.NewMem()
	db, err := pebble.Open("db", &pebble.Options{FS: fs, Logger: pebbleLogger{l: discardLogger()}})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Set([]byte("other"), []byte("app"), pebble.Sync); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := Open("db", Options{FS: fs}); !errors.Is(err, store.ErrIncompatible) {
		t.Fatalf("Open of a foreign database = %v, want ErrIncompatible", err)
	}
}

func TestOpenNewerFormat(t *testing.T) {
	fs := vfs.NewMem()
	closeT(t, openT(t, "db", Options{FS: fs}))
	db, err := pebble.Open("db", &pebble.Options{FS: fs, Logger: pebbleLogger{l: discardLogger()}})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Set(versionKey, []byte{0, 0, 0, 3}, pebble.Sync); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := Open("db", Options{FS: fs}); !errors.Is(err, store.ErrIncompatible) {
		t.Fatalf("Open of format 3 = %v, want ErrIncompatible", err)
	}
}

func TestOpenRejectsInconsistentState(t *testing.T) {
	fs := vfs.NewMem()
	s := openT(t, "db", Options{FS: fs})
	if _, err := s.Append("q", []byte("a"), []byte("b")); err != nil {
		t.Fatal(err)
	}
	closeT(t, s)
	// Remove the records but keep the state that counts them, as a buggy writer would.
	db, err := pebble.Open("db", &pebble.Options{FS: fs, Logger: pebbleLogger{l: discardLogger()}})
	if err != nil {
		t.Fatal(err)
	}
	prefix := streamPrefix(prefixRecord, "q")
	if err := db.DeleteRange(recordKey(prefix, 0), recordKey(prefix, 3), pebble.Sync); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := Open("db", Options{FS: fs}); !errors.Is(err, store.ErrCorrupt) {
		t.Fatalf("Open = %v, want ErrCorrupt", err)
	}
}

func TestOptionsValidation(t *testing.T) {
	if _, err := Open(t.TempDir(), Options{CacheBytes: -1}); err == nil {
		t.Fatal("negative CacheBytes accepted")
	}
}

// TestDeleteSyncedInBackground checks that a Delete followed by no other write is synced
// by the background syncer within DeleteSyncInterval.
func TestDeleteSyncedInBackground(t *testing.T) {
	cfs := newCountingFS(vfs.Default)
	s := openT(t, t.TempDir(), Options{FS: cfs, DeleteSyncInterval: 5 * time.Millisecond})
	defer closeT(t, s)
	if _, err := s.Append("q", []byte("a")); err != nil {
		t.Fatal(err)
	}
	before := cfs.walSyncs.Load()
	if err := s.Delete("q", 1); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for cfs.walSyncs.Load() == before {
		if time.Now().After(deadline) {
			t.Fatal("no WAL sync after a Delete within 5s")
		}
		time.Sleep(time.Millisecond)
	}
	if s.dirty.Load() {
		t.Fatal("dirty still set after the background sync")
	}
}

// TestCrashKeepsAcknowledged simulates kill -9 while appenders run: the file system is
// cloned as a crash would leave it (synced data plus a random part of unsynced data) and
// the clone must hold every record whose Append had returned before the crash.
func TestCrashKeepsAcknowledged(t *testing.T) {
	for round := range 5 {
		fs := vfs.NewCrashableMem()
		s := openT(t, "db", Options{FS: fs})
		var (
			mu    sync.Mutex
			acked = map[uint64]string{}
			wg    sync.WaitGroup
			stop  = make(chan struct{})
		)
		for w := range 4 {
			wg.Go(func() {
				for i := 0; ; i++ {
					select {
					case <-stop:
						return
					default:
					}
					data := string(rune('a'+w)) + string(rune('0'+i%10))
					seq, err := s.Append("q", []byte(data))
					if err != nil {
						t.Error(err)
						return
					}
					if i%3 == 0 {
						_ = s.Delete("q", seq) // a lost delete is allowed: not checked
					} else {
						mu.Lock()
						acked[seq] = data
						mu.Unlock()
					}
				}
			})
		}
		time.Sleep(time.Duration(20+round*10) * time.Millisecond)
		mu.Lock()
		snapshot := make(map[uint64]string, len(acked))
		for k, v := range acked {
			snapshot[k] = v
		}
		mu.Unlock()
		crashed := fs.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 50, RNG: newRand(round)})
		close(stop)
		wg.Wait()
		closeT(t, s)

		r := openT(t, "db", Options{FS: crashed})
		got := map[uint64]string{}
		if err := r.Scan("q", 0, func(seq uint64, data []byte) bool {
			got[seq] = string(data)
			return true
		}); err != nil {
			t.Fatal(err)
		}
		for seq, want := range snapshot {
			if got[seq] != want {
				t.Fatalf("round %d: acknowledged seq %d = %q after crash, want %q", round, seq, got[seq], want)
			}
		}
		infos, _ := r.Streams()
		if len(snapshot) > 0 && (len(infos) != 1 || infos[0].Last < uint64(len(snapshot))) {
			t.Fatalf("round %d: Streams after crash = %+v", round, infos)
		}
		closeT(t, r)
		t.Logf("round %d: %d acknowledged records before the crash, %d recovered", round, len(snapshot), len(got))
	}
}
