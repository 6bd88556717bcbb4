package pebblestore

import (
	"log/slog"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// Default option values, applied by Open for zero fields.
const (
	// DefaultCacheBytes is the default block cache size: 16 MiB.
	DefaultCacheBytes = 16 << 20
	// DefaultMemTableBytes is the default memtable size: 16 MiB.
	DefaultMemTableBytes = 16 << 20
	// DefaultDeleteSyncInterval is the default DeleteSyncInterval: 1 s.
	DefaultDeleteSyncInterval = time.Second
	// DefaultRetryInterval is the default RetryInterval: 250 ms.
	DefaultRetryInterval = 250 * time.Millisecond
	// DefaultMaxRetryInterval is the default MaxRetryInterval: 10 s.
	DefaultMaxRetryInterval = 10 * time.Second
)

// Options configures Open. The zero value is ready to use. Options are read once by Open;
// none can be changed on an open Store.
type Options struct {
	// Logger receives the store's state changes (one line per change: "store down: ..." at
	// Error, "store degraded: ..." and "store recovered: ..." at Warn and Info, each with
	// state and cause attributes), a damaged WAL tail dropped at Open (Error), and Pebble's
	// messages: informational ones at slog.LevelDebug, errors and corruption reports at
	// slog.LevelError. nil (the default) discards them all.
	Logger *slog.Logger

	// FS is the file system the store lives on. nil (the default) is the operating system's
	// (vfs.Default). Tests pass a wrapper to count fsyncs or inject faults (Pebble's
	// vfs/errorfs), or vfs.NewMem() for a store that lives in memory.
	FS vfs.FS

	// CacheBytes is the size of the block cache, in bytes. Zero means DefaultCacheBytes;
	// negative is invalid.
	CacheBytes int64

	// MemTableBytes is the size of one memtable, in bytes: records are buffered in memory up
	// to this size (and logged to the WAL) before being flushed to a table file. Zero means
	// DefaultMemTableBytes; negative is invalid.
	MemTableBytes int64

	// DeleteSyncInterval bounds how long a Delete or Trim can stay unsynced when no Append or
	// SetMeta syncs the write-ahead log in the meantime: a background goroutine syncs the
	// log this often while deletes are pending. Zero means DefaultDeleteSyncInterval; a
	// negative value disables the background sync (deletes then become durable with the next
	// Append, SetMeta or Close).
	DeleteSyncInterval time.Duration

	// RetryInterval is how long a store that went down (a write failed: full disk,
	// read-only file system) waits before its first attempt to recover; each failed attempt
	// doubles the wait, up to MaxRetryInterval. An attempt writes and syncs a small probe
	// file, and only when that works reopens the database. Zero or negative means
	// DefaultRetryInterval.
	RetryInterval time.Duration

	// MinFreeBytes is the low-water mark of free space on the store's file system, in
	// bytes: below it, Appends (new messages) are refused with an *store.UnavailableError
	// whose cause is store.ErrLowDiskSpace, and Health reports the store down with that
	// cause, until the free space is above ResumeFreeBytes. Deletes and metadata writes go
	// on. Zero means 4 × MemTableBytes (64 MiB by default: head-room for Pebble's WAL
	// preallocation of about one memtable, a memtable flush and a compaction's output, the
	// writes that otherwise meet ENOSPC first); negative disables the check. Sampled every
	// SpaceCheckInterval. A file system that cannot report its usage is not checked.
	MinFreeBytes int64

	// ResumeFreeBytes is the high-water mark, in bytes: refused Appends are taken again once
	// the free space is above it. Zero, or a value not above MinFreeBytes, means 1.5 ×
	// MinFreeBytes. The gap between the two keeps the state steady on a disk that hovers
	// around one mark.
	ResumeFreeBytes int64

	// SpaceCheckInterval is how often the free space is sampled. Zero or negative means
	// DefaultSpaceCheckInterval (250 ms).
	SpaceCheckInterval time.Duration

	// AcceptDataLoss opens a store whose recovered data ends before the commit it had
	// recorded as synced (see Open's store.ErrDataLoss), keeping what remains, logging the
	// loss at Error and recording the new state so that the next start is clean. false (the
	// default) refuses such a store. Meant for an operator who chose to go on after reading
	// `titan store check` (the serve flag --accept-data-loss).
	AcceptDataLoss bool

	// MaxRetryInterval caps the wait between recovery attempts. Zero or negative means
	// DefaultMaxRetryInterval; it is raised to RetryInterval if below it.
	MaxRetryInterval time.Duration
}
