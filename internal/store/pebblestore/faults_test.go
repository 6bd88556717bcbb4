package pebblestore

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/titan-broker/titan/internal/store"
)

// faultStore opens a store in a temporary directory on a faultFS over the real file system,
// with fast recovery retries and a recorded log.
func faultStore(t *testing.T, opts Options) (*Store, *faultFS, *logRecorder, string) {
	t.Helper()
	dir := t.TempDir()
	ffs := newFaultFS(vfs.Default)
	rec := &logRecorder{}
	opts.FS = ffs
	opts.Logger = slog.New(rec)
	opts.RetryInterval = 5 * time.Millisecond
	opts.MaxRetryInterval = 50 * time.Millisecond
	return openT(t, dir, opts), ffs, rec, dir
}

// contents returns every record of stream q by seq.
func contents(t *testing.T, s *Store, stream string) map[uint64][]byte {
	t.Helper()
	got := map[uint64][]byte{}
	if err := s.Scan(stream, 0, func(seq uint64, data []byte) bool {
		got[seq] = bytes.Clone(data)
		return true
	}); err != nil {
		t.Fatalf("Scan: %v", err)
	}
	return got
}

// TestDiskFaultRefusesAndRecovers is the rule for every kind of disk fault: a write the
// store cannot commit is refused with an error that says why, the store reports itself
// down (one log line), every later write is refused the same way without touching the
// disk, no write is ever reported committed that is not, and once the fault is lifted the
// store recovers on its own, without a reopen by the caller, and without reusing sequences.
func TestDiskFaultRefusesAndRecovers(t *testing.T) {
	for _, tc := range []struct {
		name   string
		fault  fault
		reason string
		// fill makes the fault bite: appends until one fails (for faults that only
		// creating a file reveals).
		fill bool
	}{
		{"disk full", faultFull, "no space left on device", false},
		{"read-only", faultReadOnly, "read-only file system", false},
		{"read-only for new files", faultReadOnlyNew, "read-only file system", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// A small memtable makes the read-only-for-new-files case reach a WAL rotation
			// (the path that used to die with "sync: unlock of unlocked mutex") quickly.
			s, ffs, logs, dir := faultStore(t, Options{MemTableBytes: 1 << 20})
			acked := map[uint64][]byte{}
			for i := range 5 {
				rec := []byte(fmt.Sprintf("before-%d", i))
				seq, err := s.Append("q", rec)
				if err != nil {
					t.Fatal(err)
				}
				acked[seq] = rec
			}
			if h := s.Health(); h.State != store.StateOK || h.Cause != nil || h.Changes != 0 {
				t.Fatalf("Health before the fault = %+v", h)
			}
			changed := s.Health().Changed

			ffs.set(tc.fault)
			var err error
			big := bytes.Repeat([]byte("x"), 64<<10)
			for i := 0; i < 2000; i++ {
				rec := big
				if !tc.fill {
					rec = []byte("during")
				}
				var seq uint64
				seq, err = s.Append("q", rec)
				if err != nil {
					break
				}
				acked[seq] = rec
				if !tc.fill {
					t.Fatalf("Append committed on a failing disk (seq %d)", seq)
				}
			}
			if err == nil {
				t.Fatal("no Append failed under the fault")
			}
			want := "store unavailable: " + tc.reason
			if !errors.Is(err, store.ErrUnavailable) || err.Error() != want || store.Describe(err) != want {
				t.Fatalf("Append error = %q (Describe %q), want %q wrapping ErrUnavailable", err, store.Describe(err), want)
			}
			select {
			case <-changed:
			default:
				t.Fatal("Health().Changed was not closed by the state change")
			}
			h := s.Health()
			if h.State != store.StateDown || store.Reason(h.Cause) != tc.reason || h.Changes != 1 {
				t.Fatalf("Health after the fault = %+v (reason %q)", h, store.Reason(h.Cause))
			}
			// Later writes are refused the same way, and so are metadata writes.
			for range 3 {
				if _, err := s.Append("q", []byte("refused")); err == nil || err.Error() != want {
					t.Fatalf("later Append error = %v, want %q", err, want)
				}
			}
			if err := s.SetMeta("k", []byte("v")); !errors.Is(err, store.ErrUnavailable) {
				t.Fatalf("SetMeta error = %v, want ErrUnavailable", err)
			}
			if n := logs.count(slog.LevelError, "store down"); n != 1 {
				t.Fatalf("%d 'store down' log lines, want 1", n)
			}
			if got := logs.attr("store down", "cause"); got != tc.reason {
				t.Fatalf("'store down' cause = %q, want %q", got, tc.reason)
			}
			lastFailed := s.stream("q", false).last

			// Keep failing for a few retries, then lift the fault.
			time.Sleep(30 * time.Millisecond)
			if s.Health().State != store.StateDown {
				t.Fatal("store recovered while the fault lasted")
			}
			ffs.set(faultNone)
			eventually(t, 10*time.Second, "store recovers", func() bool { return s.Health().State == store.StateOK })
			if h := s.Health(); h.Recoveries != 1 || h.Changes != 2 || h.Cause != nil {
				t.Fatalf("Health after recovery = %+v", h)
			}
			eventually(t, 5*time.Second, "one 'store recovered' log line", func() bool {
				return logs.count(slog.LevelWarn, "store recovered") == 1
			})
			seq, err := s.Append("q", []byte("after"))
			if err != nil {
				t.Fatalf("Append after recovery: %v", err)
			}
			if seq <= lastFailed {
				t.Fatalf("Append after recovery got seq %d, reusing a sequence handed out before (last %d)", seq, lastFailed)
			}
			acked[seq] = []byte("after")
			if err := s.SetMeta("k", []byte("v")); err != nil {
				t.Fatalf("SetMeta after recovery: %v", err)
			}
			checkAcked(t, s, acked)
			closeT(t, s)

			// Every acknowledged record survives a restart.
			s2 := openT(t, dir, Options{})
			checkAcked(t, s2, acked)
			closeT(t, s2)
		})
	}
}

// checkAcked fails unless every acknowledged record is in stream q with its data.
func checkAcked(t *testing.T, s *Store, acked map[uint64][]byte) {
	t.Helper()
	got := contents(t, s, "q")
	for seq, rec := range acked {
		if !bytes.Equal(got[seq], rec) {
			t.Fatalf("acknowledged record %d: got %d bytes, want %d", seq, len(got[seq]), len(rec))
		}
	}
}

// TestDiskFaultConcurrentNoFalseSuccess runs producers while the disk fails and recovers
// again and again: every Append that returned success is there after a restart, and every
// failure says why.
func TestDiskFaultConcurrentNoFalseSuccess(t *testing.T) {
	s, ffs, _, dir := faultStore(t, Options{MemTableBytes: 1 << 20})
	var mu sync.Mutex
	acked := map[string]bool{}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var refused [4]int
	for p := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				rec := fmt.Sprintf("p%d-%d-%s", p, i, strings.Repeat("y", 500))
				_, err := s.Append(fmt.Sprintf("q%d", p), []byte(rec))
				if err != nil {
					if !errors.Is(err, store.ErrUnavailable) {
						t.Errorf("Append: %v", err)
						return
					}
					refused[p]++
					time.Sleep(time.Millisecond)
					continue
				}
				mu.Lock()
				acked[rec] = true
				mu.Unlock()
			}
		}()
	}
	for _, f := range []fault{faultFull, faultReadOnly, faultReadOnlyNew, faultFull} {
		time.Sleep(20 * time.Millisecond)
		ffs.set(f)
		time.Sleep(20 * time.Millisecond)
		// Every fault takes the store down once a write meets it (TestDiskFaultRefusesAndRecovers);
		// read-only-for-new-files only at the next file the producers' writes make.
		eventually(t, 10*time.Second, "store down", func() bool { return s.Health().State == store.StateDown })
		ffs.set(faultNone)
		eventually(t, 10*time.Second, "store recovers", func() bool { return s.Health().State == store.StateOK })
	}
	time.Sleep(20 * time.Millisecond)
	close(stop)
	wg.Wait()
	if h := s.Health(); h.Recoveries < 4 {
		t.Fatalf("Health = %+v, want at least 4 recoveries", h)
	}
	closeT(t, s)

	s2 := openT(t, dir, Options{})
	defer closeT(t, s2)
	found := map[string]bool{}
	for p := range 4 {
		if err := s2.Scan(fmt.Sprintf("q%d", p), 0, func(_ uint64, data []byte) bool {
			found[string(data)] = true
			return true
		}); err != nil {
			t.Fatal(err)
		}
	}
	for rec := range acked {
		if !found[rec] {
			t.Fatalf("acknowledged record %.12s… lost (%d acknowledged, %d found)", rec, len(acked), len(found))
		}
	}
	t.Logf("%d acknowledged, %d stored, refused per producer %v", len(acked), len(found), refused)
}

// TestBackgroundFaultDegrades: when only flushes fail (the table files cannot be written,
// while the WAL still has room) the store is degraded, not down, and says so once. Once
// memtables pile up and Pebble stalls writes behind the failing flushes, the store goes
// down: later writes are refused with the reason instead of blocking forever, and the few
// already inside Pebble complete once the fault is lifted, truthfully; then the store is OK
// again and every acknowledged record is there after a restart.
func TestBackgroundFaultDegrades(t *testing.T) {
	// stallBound tells an Append stalled inside Pebble (which waits there until the fault is
	// lifted) from a slow one on a loaded machine: far above any write's time, so that a
	// busy CI machine does not count slow writes as stalls.
	const stallBound = 3 * time.Second
	s, ffs, logs, dir := faultStore(t, Options{MemTableBytes: 1 << 20, DeleteSyncInterval: -1})
	ffs.match = func(name string) bool { return strings.HasSuffix(name, ".sst") }
	ffs.set(faultFull)
	rec := bytes.Repeat([]byte("z"), 32<<10)
	type result struct {
		seq uint64
		err error
	}
	var mu sync.Mutex
	acked := map[uint64][]byte{}
	var blocked []chan result
	sawDegraded := false
	var refusal error
	for i := 0; i < 2000 && refusal == nil; i++ {
		done := make(chan result, 1)
		go func() {
			seq, err := s.Append("q", rec)
			done <- result{seq, err}
		}()
		select {
		case r := <-done:
			if r.err != nil {
				refusal = r.err
				break
			}
			mu.Lock()
			acked[r.seq] = rec
			mu.Unlock()
		case <-time.After(stallBound):
			blocked = append(blocked, done) // stalled inside Pebble
		}
		sawDegraded = sawDegraded || s.Health().State == store.StateDegraded
	}
	if !sawDegraded {
		t.Error("the store was never degraded while only flushes failed")
	}
	const want = "store unavailable: no space left on device"
	if refusal == nil || refusal.Error() != want {
		t.Fatalf("refusal = %v, want %q", refusal, want)
	}
	if len(blocked) > 3 {
		t.Fatalf("%d Appends blocked inside Pebble, want at most a few", len(blocked))
	}
	if h := s.Health(); h.State != store.StateDown {
		t.Fatalf("Health = %+v, want down", h)
	}
	if n := logs.count(slog.LevelWarn, "store degraded"); n != 1 {
		t.Fatalf("%d 'store degraded' lines, want 1", n)
	}

	ffs.set(faultNone)
	for _, done := range blocked {
		select {
		case r := <-done:
			if r.err != nil {
				t.Fatalf("a stalled Append failed after the fault was lifted: %v", r.err)
			}
			acked[r.seq] = rec
		case <-time.After(20 * time.Second):
			t.Fatal("a stalled Append still blocks after the fault was lifted")
		}
	}
	eventually(t, 20*time.Second, "store OK again", func() bool { return s.Health().State == store.StateOK })
	seq, err := s.Append("q", []byte("after"))
	if err != nil {
		t.Fatal(err)
	}
	acked[seq] = []byte("after")
	checkAcked(t, s, acked)
	closeT(t, s)
	s2 := openT(t, dir, Options{})
	checkAcked(t, s2, acked)
	closeT(t, s2)
	t.Logf("%d records acknowledged, %d Appends stalled and completed", len(acked), len(blocked))
}

// A recovery attempt does not wait forever for a call in progress (a Scan whose callback
// blocks): reads keep working meanwhile, and the store recovers once the call returns.
func TestRecoveryWaitsForCallsInProgressBounded(t *testing.T) {
	old := drainTimeout
	drainTimeout = 30 * time.Millisecond
	t.Cleanup(func() { drainTimeout = old })
	s, ffs, _, _ := faultStore(t, Options{})
	if _, err := s.Append("q", []byte("one")); err != nil {
		t.Fatal(err)
	}
	inScan, release, scanned := make(chan struct{}), make(chan struct{}), make(chan error, 1)
	go func() {
		scanned <- s.Scan("q", 0, func(uint64, []byte) bool {
			close(inScan)
			<-release
			return true
		})
	}()
	<-inScan
	ffs.set(faultFull)
	if _, err := s.Append("q", []byte("two")); !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("Append on a full disk: %v", err)
	}
	ffs.set(faultNone)
	time.Sleep(150 * time.Millisecond) // several attempts give up on the blocked Scan
	if h := s.Health(); h.State != store.StateDown {
		t.Fatalf("recovered while a call was in progress: %+v", h)
	}
	eventually(t, 5*time.Second, "a read between recovery attempts", func() bool {
		_, _, err := s.Meta("k")
		return err == nil
	})
	close(release)
	if err := <-scanned; err != nil {
		t.Fatalf("Scan: %v", err)
	}
	eventually(t, 10*time.Second, "recovery after the Scan returned", func() bool { return s.Health().State == store.StateOK })
	if _, err := s.Append("q", []byte("three")); err != nil {
		t.Fatal(err)
	}
	closeT(t, s)
}

// Close while the store is down (the fault never lifted) returns, stops the recoverer, and
// a later Open finds every acknowledged record.
func TestCloseWhileDown(t *testing.T) {
	for _, f := range []fault{faultFull, faultReadOnly} {
		s, ffs, _, dir := faultStore(t, Options{})
		acked := map[uint64][]byte{}
		for i := range 3 {
			seq, err := s.Append("q", []byte(fmt.Sprint(i)))
			if err != nil {
				t.Fatal(err)
			}
			acked[seq] = []byte(fmt.Sprint(i))
		}
		ffs.set(f)
		if _, err := s.Append("q", []byte("refused")); !errors.Is(err, store.ErrUnavailable) {
			t.Fatalf("Append: %v", err)
		}
		time.Sleep(20 * time.Millisecond) // a few recovery attempts
		_ = s.Close()                     // its error, if any, is the fault's
		if err := s.Close(); !errors.Is(err, store.ErrClosed) {
			t.Fatalf("second Close: %v", err)
		}
		if h := s.Health(); h.State != store.StateDown {
			t.Fatalf("Health after Close = %+v, want the last state (down)", h)
		}
		ffs.set(faultNone)
		s2 := openT(t, dir, Options{})
		checkAcked(t, s2, acked)
		closeT(t, s2)
	}
}

// Close under load (the lock-free call gate): calls running when Close begins finish
// before it closes Pebble, every call after it is refused with store.ErrClosed, and no
// call reaches a closed database (Pebble panics on one). Run it with -race.
func TestCloseUnderConcurrentCalls(t *testing.T) {
	s := openT(t, t.TempDir(), Options{})
	const workers = 8
	errs := make(chan error, workers)
	for w := range workers {
		go func() {
			name := fmt.Sprintf("q%d", w)
			for i := 0; ; i++ {
				var err error
				switch i % 3 {
				case 0:
					_, err = s.Append(name, []byte("x"))
				case 1:
					err = s.Scan(name, 0, func(uint64, []byte) bool { return false })
				default:
					_, _, err = s.Meta("k")
				}
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	time.Sleep(50 * time.Millisecond)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	for range workers {
		if err := <-errs; !errors.Is(err, store.ErrClosed) {
			t.Errorf("a call after Close: %v, want store.ErrClosed", err)
		}
	}
}
