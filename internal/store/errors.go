package store

import "errors"

// Sentinel errors of the store port and its adapters. Adapters wrap them with detail; test
// for them with errors.Is.
var (
	// ErrClosed is returned by every Store method called after Close has begun, Close
	// included.
	ErrClosed = errors.New("store: closed")
	// ErrCorrupt is returned when stored data fails validation: by Open when the data
	// directory cannot be recovered (for example a write-ahead log damaged before its tail),
	// and by any method after the engine reported corruption in the background. The wrapped
	// error says what was found and where.
	ErrCorrupt = errors.New("store: corrupt data")
	// ErrIncompatible is returned by Open when the data directory was written in a store
	// format this build does not understand (a newer or foreign format).
	ErrIncompatible = errors.New("store: incompatible data format")
	// ErrLocked is returned by Open when another open Store, in this process or another one,
	// holds the data directory.
	ErrLocked = errors.New("store: data directory in use")
	// ErrInvalidName is returned when a stream name or meta key is empty or longer than
	// MaxNameBytes.
	ErrInvalidName = errors.New("store: invalid stream name or meta key")
	// ErrNotEmpty is returned by Dropper.Drop for a stream that still holds records.
	ErrNotEmpty = errors.New("store: stream not empty")
	// ErrNoRecords is returned when Append is called without records.
	ErrNoRecords = errors.New("store: append without records")
)

// ErrDataLoss is returned by Open when recovery found less than the store had recorded as
// committed: the write-ahead log ends before a commit whose fsync had returned (its tail
// was cut or lost after a crash), so messages that were acknowledged with a RECEIPT are
// gone. The wrapped error says how much is missing and what to do; an adapter's
// AcceptDataLoss option opens the store with what remains.
var ErrDataLoss = errors.New("store: committed data missing")

// ErrLowDiskSpace is the cause (inside an *UnavailableError) of the Appends a store refuses
// while the free space of its file system is below its low-water mark, until it is back
// above the high-water mark (pebblestore.Options.MinFreeBytes, ResumeFreeBytes). Deletes
// are not refused: they free space.
var ErrLowDiskSpace = errors.New("free disk space below the low-water mark")
