//go:build linux

package main

import (
	"fmt"
	"os"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// openPTY opens a pseudo-terminal pair (master, slave).
func openPTY(t *testing.T) (*os.File, *os.File) {
	t.Helper()
	m, err := os.OpenFile("/dev/ptmx", os.O_RDWR, 0)
	if err != nil {
		t.Fatalf("no pseudo-terminals here: %v", err)
	}
	if err := unix.IoctlSetPointerInt(int(m.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		t.Fatal(err)
	}
	n, err := unix.IoctlGetInt(int(m.Fd()), unix.TIOCGPTN)
	if err != nil {
		t.Fatal(err)
	}
	s, err := os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	return m, s
}

// TestWatchKeysReadsSingleKeysAndRestores: a key arrives without Enter (non-canonical mode)
// and restore gives the terminal its line mode back.
func TestWatchKeysReadsSingleKeysAndRestores(t *testing.T) {
	m, s := openPTY(t)
	defer m.Close()
	keys, restore, ok := watchKeys(s)
	if !ok {
		t.Fatal("watchKeys refused a terminal")
	}
	if _, err := m.Write([]byte("q")); err != nil {
		t.Fatal(err)
	}
	select {
	case k := <-keys:
		if k != 'q' {
			t.Fatalf("key %q, want q", k)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no key without Enter: the terminal is still in line mode")
	}
	restore()
	tio, err := unix.IoctlGetTermios(int(s.Fd()), unix.TCGETS)
	if err != nil {
		t.Fatal(err)
	}
	if tio.Lflag&unix.ICANON == 0 || tio.Lflag&unix.ECHO == 0 {
		t.Fatal("restore left the terminal without line mode or echo")
	}
	s.Close() // ends the reading goroutine
	if _, _, ok := watchKeys(os.NewFile(uintptr(^uint(0)>>1), "bad")); ok {
		t.Fatal("watchKeys accepted a non-terminal")
	}
}
