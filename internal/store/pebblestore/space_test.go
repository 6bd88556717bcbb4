package pebblestore

import (
	"errors"
	"testing"
	"time"

	"github.com/titan-broker/titan/internal/store"
)

// Below the low-water mark of free space Appends are refused (ErrLowDiskSpace inside an
// UnavailableError) and Health reports it at once, while deletes go on; the store takes
// Appends again only above the high-water mark, so free space between the marks changes
// nothing (no flapping).
func TestFreeSpaceWatermarks(t *testing.T) {
	dir := t.TempDir()
	s := openT(t, dir, Options{MinFreeBytes: -1})
	if _, err := s.Append("q", []byte("a"), []byte("b")); err != nil {
		t.Fatal(err)
	}
	closeT(t, s)
	// A low-water mark above any disk: refused from the start.
	s = openT(t, dir, Options{MinFreeBytes: 1 << 62, ResumeFreeBytes: 1<<62 + 1, SpaceCheckInterval: time.Hour})
	defer closeT(t, s)
	h := s.Health()
	if h.State != store.StateDown || !errors.Is(h.Cause, store.ErrLowDiskSpace) || h.Changes != 1 {
		t.Fatalf("Health below the low-water mark: %+v", h)
	}
	_, err := s.Append("q", []byte("c"))
	if !errors.Is(err, store.ErrUnavailable) || !errors.Is(err, store.ErrLowDiskSpace) {
		t.Fatalf("Append below the low-water mark: %v", err)
	}
	if got := store.Describe(err); got != "store unavailable: free disk space below the low-water mark" {
		t.Fatalf("refusal text %q", got)
	}
	if err := s.Delete("q", 1); err != nil {
		t.Fatalf("Delete below the low-water mark: %v", err)
	}
	free := s.FreeBytes()
	if free <= 0 {
		t.Fatalf("FreeBytes = %d", free)
	}
	marks := func(low, high int64) { // new marks, sampled at once
		s.spaceLow.Store(low)
		s.spaceHigh.Store(high)
		s.checkSpace()
	}
	marks(free/2, free*2) // between the marks: still refused
	if _, err := s.Append("q", []byte("c")); !errors.Is(err, store.ErrLowDiskSpace) {
		t.Fatalf("Append between the marks after a refusal: %v", err)
	}
	marks(free/2, free/2+1) // above the high-water mark: taken again
	if _, err := s.Append("q", []byte("c")); err != nil {
		t.Fatalf("Append above the high-water mark: %v", err)
	}
	if h := s.Health(); h.State != store.StateOK || h.Changes != 2 {
		t.Fatalf("Health above the high-water mark: %+v", h)
	}
	marks(free/2, free*2) // between the marks: still taken
	if _, err := s.Append("q", []byte("d")); err != nil {
		t.Fatalf("Append between the marks while taking: %v", err)
	}
	if h := s.Health(); h.Changes != 2 {
		t.Fatalf("a sample between the marks changed the state: %+v", h)
	}
}
