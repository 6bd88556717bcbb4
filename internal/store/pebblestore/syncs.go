package pebblestore

import (
	"io"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/titan-broker/titan/internal/store"
)

// walFS wraps the store's file system under one Pebble instance. It counts WAL fsyncs for
// metrics and benchmarks (how well group commit shares them), and it shields Pebble from
// write-ahead-log I/O errors.
//
// Why the shield: Pebble treats a failed WAL write or sync as unrecoverable. Its log writer
// keeps the error, and the next WAL rotation (a full memtable, a flush) panics on it — or on
// a failure to create the next WAL, as on a read-only directory — while DB.mu is released,
// so the deferred unlock up the stack dies with "fatal error: sync: unlock of unlocked
// mutex", which no recover can stop. The shield instead records the first WAL error (the
// fault), tells the store (onFault), and from then on lets that WAL swallow every write and
// sync without touching the file, reporting success to Pebble. The store checks the fault
// after every synced commit, so a commit that the fault may have touched is reported as
// failed (never a false success; a false failure only means a redundant retry), and it
// reopens Pebble, from the files on disk, once the file system accepts writes again. The
// WAL on disk simply ends where the fault happened: a torn tail, which recovery drops, and
// those batches never reported success. A WAL that cannot be created becomes a file that
// swallows everything in the same way.
//
// Table, MANIFEST and other files are not shielded: Pebble handles their errors (failed
// flushes and compactions are retried; see Store.backgroundError).
type walFS struct {
	vfs.FS
	walSyncs *atomic.Uint64 // shared by every walFS of one Store

	fault   atomic.Pointer[error] // the first WAL I/O error; read after every synced commit
	onFault func(error)           // called once, with the first fault, from the failing goroutine
}

// faultErr returns the first WAL I/O error seen, or nil. One atomic load.
func (w *walFS) faultErr() error {
	if p := w.fault.Load(); p != nil {
		return *p
	}
	return nil
}

// setFault records err as the fault if it is the first one, and reports it.
func (w *walFS) setFault(err error) {
	if w.fault.CompareAndSwap(nil, &err) && w.onFault != nil {
		w.onFault(err)
	}
}

func isWAL(name string) bool { return strings.HasSuffix(name, walFileSuffix) }

func isManifest(name string) bool {
	return strings.HasPrefix(name[strings.LastIndexAny(name, `/\`)+1:], "MANIFEST-")
}

func (w *walFS) wrap(f vfs.File, name string, err error) (vfs.File, error) {
	if isManifest(name) && err == nil {
		return &manifestFile{File: f}, nil
	}
	if !isWAL(name) {
		return f, err
	}
	if err != nil {
		// Pebble panics when it cannot create the next WAL: hand it a file that swallows
		// everything instead, and take the store down.
		err = &os.PathError{Op: "create WAL", Path: name, Err: err}
		w.setFault(err)
		return &walFile{fs: w, dead: true}, nil
	}
	return &walFile{File: f, fs: w}, nil
}

func (w *walFS) Create(name string, cat vfs.DiskWriteCategory) (vfs.File, error) {
	f, err := w.FS.Create(name, cat)
	return w.wrap(f, name, err)
}

func (w *walFS) ReuseForWrite(oldname, newname string, cat vfs.DiskWriteCategory) (vfs.File, error) {
	f, err := w.FS.ReuseForWrite(oldname, newname, cat)
	return w.wrap(f, newname, err)
}

func (w *walFS) OpenReadWrite(name string, cat vfs.DiskWriteCategory, opts ...vfs.OpenOption) (vfs.File, error) {
	f, err := w.FS.OpenReadWrite(name, cat, opts...)
	return w.wrap(f, name, err)
}

func (w *walFS) Unwrap() vfs.FS { return w.FS }

// manifestFile keeps the first error of a MANIFEST write or sync and returns it from every
// later write and sync, without touching the file again. Pebble treats a failed MANIFEST
// write as fatal (Logger.Fatalf, which the store turns into StateDown rather than a crash);
// this makes sure no later version edit lands behind the torn record, so recovery, which
// stops at the first invalid record, reads a clean prefix.
type manifestFile struct {
	vfs.File
	mu  sync.Mutex
	err error // guarded by mu: the first write or sync error
}

func (f *manifestFile) do(op func() error) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err == nil {
		f.err = op()
	}
	return f.err
}

func (f *manifestFile) Write(p []byte) (n int, err error) {
	err = f.do(func() error {
		var e error
		n, e = f.File.Write(p)
		return e
	})
	return n, err
}

func (f *manifestFile) Sync() error     { return f.do(func() error { return f.File.Sync() }) }
func (f *manifestFile) SyncData() error { return f.do(func() error { return f.File.SyncData() }) }
func (f *manifestFile) SyncTo(length int64) (full bool, err error) {
	err = f.do(func() error {
		var e error
		full, e = f.File.SyncTo(length)
		return e
	})
	return full, err
}

// walFile is one WAL under the shield. Once any of its writes or syncs fails (or it could
// not be created: File is nil), it is dead: every write and sync is swallowed.
type walFile struct {
	vfs.File // nil when the file could not be created
	fs       *walFS
	mu       sync.Mutex
	dead     bool // guarded by mu
}

// do runs op unless the file is dead; a failing op kills the file and records the fault.
func (f *walFile) do(opName string, op func() error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.dead {
		return
	}
	if err := op(); err != nil {
		f.dead = true
		f.fs.setFault(&os.PathError{Op: "WAL " + opName, Path: "write-ahead log", Err: err})
	}
}

func (f *walFile) Write(p []byte) (int, error) {
	f.do("write", func() error {
		n, err := f.File.Write(p)
		if err == nil && n < len(p) {
			err = io.ErrShortWrite
		}
		return err
	})
	return len(p), nil
}

func (f *walFile) WriteAt(p []byte, off int64) (int, error) {
	f.do("write", func() error {
		n, err := f.File.WriteAt(p, off)
		if err == nil && n < len(p) {
			err = io.ErrShortWrite
		}
		return err
	})
	return len(p), nil
}

func (f *walFile) Sync() error {
	f.fs.walSyncs.Add(1)
	f.do("sync", func() error { return f.File.Sync() })
	return nil
}

func (f *walFile) SyncData() error {
	f.fs.walSyncs.Add(1)
	f.do("sync", func() error { return f.File.SyncData() })
	return nil
}

func (f *walFile) SyncTo(length int64) (bool, error) {
	full := true
	f.do("sync", func() error {
		var err error
		full, err = f.File.SyncTo(length)
		return err
	})
	if full {
		f.fs.walSyncs.Add(1)
	}
	return full, nil
}

func (f *walFile) Preallocate(off, length int64) error {
	f.do("preallocate", func() error { return f.File.Preallocate(off, length) })
	return nil
}

func (f *walFile) Close() error {
	if f.File == nil {
		return nil
	}
	return f.File.Close()
}

func (f *walFile) Stat() (vfs.FileInfo, error) {
	if f.File == nil {
		return deadInfo{}, nil
	}
	return f.File.Stat()
}

func (f *walFile) Fd() uintptr {
	if f.File == nil {
		return vfs.InvalidFd
	}
	return f.File.Fd()
}

func (f *walFile) Prefetch(off, length int64) error {
	if f.File == nil {
		return nil
	}
	return f.File.Prefetch(off, length)
}

func (f *walFile) Read(p []byte) (int, error) {
	if f.File == nil {
		return 0, io.EOF
	}
	return f.File.Read(p)
}

func (f *walFile) ReadAt(p []byte, off int64) (int, error) {
	if f.File == nil {
		return 0, io.EOF
	}
	return f.File.ReadAt(p, off)
}

// deadInfo is the FileInfo of a WAL that could not be created.
type deadInfo struct{}

func (deadInfo) Name() string           { return "" }
func (deadInfo) Size() int64            { return 0 }
func (deadInfo) Mode() os.FileMode      { return 0 }
func (deadInfo) ModTime() time.Time     { return time.Time{} }
func (deadInfo) IsDir() bool            { return false }
func (deadInfo) Sys() any               { return nil }
func (deadInfo) DeviceID() vfs.DeviceID { return vfs.DeviceID{} }

// WALSyncs returns the number of write-ahead-log fsyncs since Open. Safe for concurrent use.
func (s *Store) WALSyncs() uint64 { return s.walSyncs.Load() }

// GroupCommitStats implements store.GroupCommitCounter: the WAL fsyncs since Open, the group
// commits that wrote records and their summed commit times (apply to landing), and the
// records appended through group commit, of which Unwritten were deleted before their group
// was written. Safe for concurrent use.
func (s *Store) GroupCommitStats() store.GroupCommitStats {
	return store.GroupCommitStats{
		Syncs:     s.walSyncs.Load(),
		Groups:    s.groups.Load(),
		GroupTime: time.Duration(s.groupNanos.Load()),
		Records:   s.Committed.Load(),
		Unwritten: s.Dropped.Load(),
	}
}
