//go:build linux

package pebblestore

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/titan-broker/titan/internal/mountns"
	"github.com/titan-broker/titan/internal/store"
)

// mountTmpfs mounts a tmpfs of size bytes on a new directory under t.TempDir and unmounts
// it at cleanup. It needs root: as root (CI) or in the user and mount namespace of
// mountns.Delegate, which the test calls first.
func mountTmpfs(t *testing.T, size int64) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Fatal("mountTmpfs needs root: call mountns.Delegate first")
	}
	dir := filepath.Join(t.TempDir(), "mnt")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	run(t, "mount", "-t", "tmpfs", "-o", fmt.Sprintf("size=%d", size), "tmpfs", dir)
	t.Cleanup(func() { unmountAll(t, dir) })
	return dir
}

// unmountAll unmounts every mount stacked on dir.
func unmountAll(t *testing.T, dir string) {
	for range 5 {
		if err := exec.Command("umount", dir).Run(); err != nil {
			return
		}
	}
	t.Errorf("%s still mounted after 5 unmounts", dir)
}

func run(t *testing.T, name string, args ...string) {
	t.Helper()
	if out, err := exec.Command(name, args...).CombinedOutput(); err != nil {
		t.Fatalf("%s %s: %v: %s", name, strings.Join(args, " "), err, out)
	}
}

// fillUntilRefused appends records of n bytes until one is refused and returns the
// acknowledged ones and the refusal.
func fillUntilRefused(t *testing.T, s *Store, n int, acked map[uint64][]byte) error {
	t.Helper()
	for i := range 10000 {
		rec := bytes.Repeat([]byte{byte(i)}, n)
		seq, err := s.Append("q", rec)
		if err != nil {
			return err
		}
		acked[seq] = rec
	}
	t.Fatal("no Append was refused")
	return nil
}

// TestRealDiskFull fills a real (tmpfs) file system under the store: the Append that does
// not fit is refused with "store unavailable: no space left on device", the store is down,
// and once space is freed it recovers on its own and every acknowledged record is kept.
func TestRealDiskFull(t *testing.T) {
	if mountns.Delegate(t) {
		return
	}
	mnt := mountTmpfs(t, 24<<20)
	ballast := filepath.Join(mnt, "ballast")
	if err := os.WriteFile(ballast, make([]byte, 12<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(mnt, "data")
	logs := &logRecorder{}
	s := openT(t, dir, Options{MinFreeBytes: -1, Logger: slog.New(logs), MemTableBytes: 4 << 20,
		RetryInterval: 10 * time.Millisecond, MaxRetryInterval: 100 * time.Millisecond})
	acked := map[uint64][]byte{}
	err := fillUntilRefused(t, s, 100<<10, acked)
	const want = "store unavailable: no space left on device"
	if !errors.Is(err, store.ErrUnavailable) || err.Error() != want {
		t.Fatalf("refusal = %v, want %q", err, want)
	}
	if h := s.Health(); h.State != store.StateDown || store.Reason(h.Cause) != "no space left on device" {
		t.Fatalf("Health = %+v", h)
	}
	if _, err := s.Append("q", []byte("small")); err == nil || err.Error() != want {
		t.Fatalf("later Append = %v, want %q", err, want)
	}
	t.Logf("%d records of 100 KiB acknowledged before the disk was full", len(acked))

	if err := os.Remove(ballast); err != nil {
		t.Fatal(err)
	}
	eventually(t, 20*time.Second, "store recovers after space is freed", func() bool {
		return s.Health().State == store.StateOK
	})
	seq, err := s.Append("q", []byte("after"))
	if err != nil {
		t.Fatalf("Append after recovery: %v", err)
	}
	acked[seq] = []byte("after")
	checkAcked(t, s, acked)
	if n := logs.count(slog.LevelError, "store down"); n != 1 {
		t.Errorf("%d 'store down' lines, want 1", n)
	}
	closeT(t, s)
	s2 := openT(t, dir, Options{MinFreeBytes: -1, MemTableBytes: 4 << 20})
	checkAcked(t, s2, acked)
	closeT(t, s2)
}

// TestRealReadOnlyDir makes the data directory read-only under a running store (a
// read-only bind mount over it: files already open keep writing, nothing new can be
// created), which used to kill the process at the next WAL rotation. The store must refuse
// with "store unavailable: read-only file system", keep the process alive, and recover
// once the directory is writable again.
func TestRealReadOnlyDir(t *testing.T) {
	if mountns.Delegate(t) {
		return
	}
	mnt := mountTmpfs(t, 64<<20)
	dir := filepath.Join(mnt, "data")
	s := openT(t, dir, Options{MinFreeBytes: -1, MemTableBytes: 1 << 20,
		RetryInterval: 10 * time.Millisecond, MaxRetryInterval: 100 * time.Millisecond})
	acked := map[uint64][]byte{}
	for i := range 3 {
		seq, err := s.Append("q", []byte(fmt.Sprint("before ", i)))
		if err != nil {
			t.Fatal(err)
		}
		acked[seq] = []byte(fmt.Sprint("before ", i))
	}
	run(t, "mount", "--bind", dir, dir)
	run(t, "mount", "-o", "remount,bind,ro", dir)
	err := fillUntilRefused(t, s, 64<<10, acked)
	const want = "store unavailable: read-only file system"
	if !errors.Is(err, store.ErrUnavailable) || err.Error() != want {
		t.Fatalf("refusal = %v, want %q", err, want)
	}
	if h := s.Health(); h.State != store.StateDown {
		t.Fatalf("Health = %+v", h)
	}
	time.Sleep(50 * time.Millisecond) // a few failed recovery attempts
	run(t, "umount", dir)
	eventually(t, 20*time.Second, "store recovers once the directory is writable", func() bool {
		return s.Health().State == store.StateOK
	})
	seq, err := s.Append("q", []byte("after"))
	if err != nil {
		t.Fatalf("Append after recovery: %v", err)
	}
	acked[seq] = []byte("after")
	checkAcked(t, s, acked)
	closeT(t, s)
	s2 := openT(t, dir, Options{MinFreeBytes: -1})
	checkAcked(t, s2, acked)
	closeT(t, s2)
}
