package pebblestore

import (
	"time"

	"github.com/titan-broker/titan/internal/store"
)

// Free-space watermarks (Options.MinFreeBytes, ResumeFreeBytes).
//
// Pebble preallocates each new WAL (about one memtable), writes a full memtable out as a
// table when it rotates, and compacts tables into new ones before it deletes the old: on a
// small disk those writes meet ENOSPC while much of the disk still looks free, and a store
// that took writes until then went down and up with each flush (issue 30: 9 times in 15 s at
// 74 % use). Refusing new records below a low-water mark of free space that covers that
// head-room, and taking them again only above a higher mark, gives one steady, reported
// refusal instead.

// DefaultSpaceCheckInterval is how often the store samples its file system's free space.
const DefaultSpaceCheckInterval = 250 * time.Millisecond

// spaceMarks returns the low- and high-water marks in bytes for opts (0, 0: disabled).
func spaceMarks(opts Options) (low, high int64) {
	if opts.MinFreeBytes < 0 {
		return 0, 0
	}
	low = opts.MinFreeBytes
	if low == 0 {
		low = 4 * opts.MemTableBytes // a WAL's preallocation, a flush, a compaction's output
	}
	high = opts.ResumeFreeBytes
	if high <= low {
		high = low + low/2
	}
	return low, high
}

// checkSpace samples the free space and moves the low-space state across the watermarks:
// below low it refuses Appends (and Health reports it at once), above high it takes them
// again; between the two it keeps its state (no flapping). A file system that cannot
// report its usage (an in-memory one) disables the check.
func (s *Store) checkSpace() {
	low, high := s.spaceLow.Load(), s.spaceHigh.Load()
	if low <= 0 {
		return
	}
	du, err := s.fs.GetDiskUsage(s.dir)
	if err != nil {
		return
	}
	free := int64(du.AvailBytes)
	s.freeBytes.Store(free)
	switch {
	case free < low && s.lowSpace.CompareAndSwap(false, true):
		s.setLowSpace(true, free, low, high)
	case free > high && s.lowSpace.CompareAndSwap(true, false):
		s.setLowSpace(false, free, low, high)
	}
}

// setLowSpace reports the low-space state (already flipped by the caller) in Health, counts
// it as a state change and logs it.
func (s *Store) setLowSpace(low bool, free, lowMark, highMark int64) {
	s.mu.Lock()
	s.health.lowSpace = low
	s.health.changedAt(time.Now())
	s.mu.Unlock()
	if low {
		s.log.Error("store refuses new messages: free disk space below the low-water mark",
			"dir", s.dir, "free_bytes", free, "low_water_bytes", lowMark, "high_water_bytes", highMark,
			"hint", "free space on the data directory's file system (or consume messages); writes resume above the high-water mark")
	} else {
		s.log.Info("store takes new messages again: free disk space above the high-water mark",
			"dir", s.dir, "free_bytes", free, "high_water_bytes", highMark)
	}
}

// spaceLoop samples the free space every interval until Close (a store that takes no
// Appends, refused ones included, still sees space come back).
func (s *Store) spaceLoop(interval time.Duration) { s.every(interval, s.spaceDone, s.checkSpace) }

// lowSpaceRefusal is the error of an Append refused for low space.
func lowSpaceRefusal() error { return &store.UnavailableError{Cause: store.ErrLowDiskSpace} }

// FreeBytes returns the free space of the store's file system at the last sample, in bytes
// (0 before the first, or when the file system cannot report it).
func (s *Store) FreeBytes() int64 { return s.freeBytes.Load() }
