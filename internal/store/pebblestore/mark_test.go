package pebblestore

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/titan-broker/titan/internal/store"
)

// A table file missing from the directory is refused with advice, not Pebble's raw error.
func TestMissingTableAdvice(t *testing.T) {
	dir := t.TempDir()
	s := openT(t, dir, Options{})
	for range 10 {
		if _, err := s.Append("q", []byte("record")); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.db.Flush(); err != nil {
		t.Fatal(err)
	}
	closeT(t, s)
	tables, _ := filepath.Glob(filepath.Join(dir, "*.sst"))
	if len(tables) == 0 {
		t.Fatal("no table after a flush")
	}
	for _, f := range tables {
		if err := os.Remove(f); err != nil {
			t.Fatal(err)
		}
	}
	_, err := Open(dir, Options{})
	if !errors.Is(err, store.ErrCorrupt) || !strings.Contains(err.Error(), "is missing") || !strings.Contains(err.Error(), "backup") {
		t.Fatalf("Open with its tables removed = %v; want ErrCorrupt saying a file is missing and what to do", err)
	}
	t.Log(err)
}

// Dropped streams keep their sequences in the committed mark: dropping and restarting is
// no data loss, and a later cut still is.
func TestCommittedMarkSurvivesDrop(t *testing.T) {
	dir := t.TempDir()
	s := openT(t, dir, Options{})
	for _, name := range []string{"a", "b", "c"} {
		if _, err := s.Append(name, []byte("x"), []byte("y")); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Delete("a", 1, 2); err != nil {
		t.Fatal(err)
	}
	if err := s.Drop("a"); err != nil {
		t.Fatal(err)
	}
	closeT(t, s)
	s, err := Open(dir, Options{})
	if err != nil {
		t.Fatalf("reopen after Drop: %v", err)
	}
	if r := s.Recovery(); r.CommittedMark != 6 || r.RecoveredMark != 6 || r.MissingRecords != 0 {
		t.Fatalf("Recovery after Drop: %+v; want committed and recovered 6", r)
	}
	closeT(t, s)
}
