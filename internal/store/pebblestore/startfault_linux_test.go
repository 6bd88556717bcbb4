//go:build linux

package pebblestore

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/titan-broker/titan/internal/mountns"
	"github.com/titan-broker/titan/internal/store"
)

// Starting on a faulty file system (issue 11): a store opened on a full disk or a
// read-only data directory comes up down with the cause, refuses writes with it, serves
// reads of what is stored, and recovers on its own once writes succeed — the same
// degrade-and-recover path as a fault while running.

// fillDisk writes a ballast file in mnt until the file system is full, and returns it.
func fillDisk(t *testing.T, mnt string) string {
	t.Helper()
	path := filepath.Join(mnt, "ballast")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []int{1 << 20, 4 << 10} {
		buf := make([]byte, n)
		for {
			if _, err := f.Write(buf); err != nil {
				break
			}
		}
	}
	_ = f.Close()
	return path
}

func requireStartedDown(t *testing.T, s *Store, reason string) {
	t.Helper()
	h := s.Health()
	if h.State != store.StateDown || store.Reason(h.Cause) != reason {
		t.Fatalf("Health after a start on a faulty file system = %v (%v), want down: %s", h.State, h.Cause, reason)
	}
	_, err := s.Append("q", []byte("refused"))
	if want := "store unavailable: " + reason; !errors.Is(err, store.ErrUnavailable) || err.Error() != want {
		t.Fatalf("Append while down = %v, want %q", err, want)
	}
	if err := s.SetMeta("k", []byte("v")); !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("SetMeta while down = %v, want ErrUnavailable", err)
	}
}

func TestStartOnFullDisk(t *testing.T) {
	if mountns.Delegate(t) {
		return
	}
	mnt := mountTmpfs(t, 16<<20)
	ballast := fillDisk(t, mnt)
	dir := filepath.Join(mnt, "data")
	logs := &logRecorder{}
	s, err := Open(dir, Options{MinFreeBytes: -1, Logger: slog.New(logs), MemTableBytes: 1 << 20, RetryInterval: 10 * time.Millisecond, MaxRetryInterval: 100 * time.Millisecond})
	if err != nil {
		t.Fatalf("Open on a full disk: %v, want a store that is down", err)
	}
	requireStartedDown(t, s, "no space left on device")
	if ss, err := s.Streams(); err != nil || len(ss) != 0 {
		t.Fatalf("Streams while down = %v, %v; want none", ss, err)
	}
	if n := logs.count(slog.LevelError, "store down"); n != 1 {
		t.Errorf("%d 'store down' lines, want 1", n)
	}
	if err := os.Remove(ballast); err != nil {
		t.Fatal(err)
	}
	eventually(t, 20*time.Second, "store recovers once space is freed", func() bool {
		return s.Health().State == store.StateOK
	})
	acked := map[uint64][]byte{}
	for i := range 3 {
		rec := []byte(fmt.Sprint("after ", i))
		seq, err := s.Append("q", rec)
		if err != nil {
			t.Fatalf("Append after recovery: %v", err)
		}
		acked[seq] = rec
	}
	checkAcked(t, s, acked)
	closeT(t, s)
	s2 := openT(t, dir, Options{MinFreeBytes: -1, MemTableBytes: 1 << 20})
	checkAcked(t, s2, acked)
	closeT(t, s2)
}

func TestStartOnReadOnlyDir(t *testing.T) {
	if mountns.Delegate(t) {
		return
	}
	mnt := mountTmpfs(t, 64<<20)
	dir := filepath.Join(mnt, "data")
	s := openT(t, dir, Options{MinFreeBytes: -1})
	acked := map[uint64][]byte{}
	for i := range 3 {
		rec := []byte(fmt.Sprint("before ", i))
		seq, err := s.Append("q", rec)
		if err != nil {
			t.Fatal(err)
		}
		acked[seq] = rec
	}
	if err := s.SetMeta("k", []byte("v1")); err != nil {
		t.Fatal(err)
	}
	closeT(t, s)
	run(t, "mount", "--bind", dir, dir)
	run(t, "mount", "-o", "remount,bind,ro", dir)
	t.Cleanup(func() { run(t, "umount", dir) }) // before the tmpfs under it (cleanups run last-in first-out)

	s, err := Open(dir, Options{MinFreeBytes: -1, RetryInterval: 10 * time.Millisecond, MaxRetryInterval: 100 * time.Millisecond})
	if err != nil {
		t.Fatalf("Open on a read-only directory: %v, want a store that is down", err)
	}
	requireStartedDown(t, s, "read-only file system")
	checkAcked(t, s, acked) // what is stored stays readable
	if v, ok, err := s.Meta("k"); err != nil || !ok || string(v) != "v1" {
		t.Fatalf("Meta while down = %q, %v, %v", v, ok, err)
	}
	// Writable again (its read-only view holds files open on the mount: remount it).
	run(t, "mount", "-o", "remount,bind,rw", dir)
	eventually(t, 20*time.Second, "store recovers once the directory is writable", func() bool {
		return s.Health().State == store.StateOK
	})
	seq, err := s.Append("q", []byte("after"))
	if err != nil {
		t.Fatalf("Append after recovery: %v", err)
	}
	if seq != 4 {
		t.Errorf("first sequence after recovery = %d, want 4 (sequences are never reused)", seq)
	}
	acked[seq] = []byte("after")
	checkAcked(t, s, acked)
	closeT(t, s)
	s2 := openT(t, dir, Options{MinFreeBytes: -1})
	checkAcked(t, s2, acked)
	closeT(t, s2)
}
