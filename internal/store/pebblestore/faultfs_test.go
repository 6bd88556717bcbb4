package pebblestore

import (
	"context"
	"log/slog"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/titan-broker/titan/internal/testwait"
)

// fault is what a faultFS does to the file system under the store.
type fault int32

const (
	faultNone fault = iota
	// faultFull fails every write, sync and preallocation with ENOSPC (a full disk); file
	// creation still works, as on a full ext4.
	faultFull
	// faultReadOnlyNew fails the creation, renaming and removal of files with EROFS but lets
	// files that are already open keep writing: what a read-only bind mount over the data
	// directory does to a running process.
	faultReadOnlyNew
	// faultReadOnly is faultReadOnlyNew plus EROFS from every write and sync (a file system
	// remounted read-only after an error).
	faultReadOnly
)

// faultFS injects disk faults under a store, switched at run time with set. match, when not
// nil, limits the faults to the files whose names it accepts.
type faultFS struct {
	vfs.FS
	mode  atomic.Int32
	match func(name string) bool
}

func newFaultFS(base vfs.FS) *faultFS { return &faultFS{FS: base} }

func (f *faultFS) set(m fault) { f.mode.Store(int32(m)) }

func (f *faultFS) applies(name string) bool { return f.match == nil || f.match(name) }

// createErr is the error of creating, renaming or removing name, or nil.
func (f *faultFS) createErr(op, name string) error {
	switch fault(f.mode.Load()) {
	case faultReadOnlyNew, faultReadOnly:
		if f.applies(name) {
			return &os.PathError{Op: op, Path: name, Err: syscall.EROFS}
		}
	}
	return nil
}

// writeErr is the error of writing to or syncing name, or nil.
func (f *faultFS) writeErr(op, name string) error {
	switch fault(f.mode.Load()) {
	case faultFull:
		if f.applies(name) {
			return &os.PathError{Op: op, Path: name, Err: syscall.ENOSPC}
		}
	case faultReadOnly:
		if f.applies(name) {
			return &os.PathError{Op: op, Path: name, Err: syscall.EROFS}
		}
	}
	return nil
}

func (f *faultFS) wrap(file vfs.File, name string, err error) (vfs.File, error) {
	if err != nil {
		return nil, err
	}
	return &faultFile{File: file, fs: f, name: name}, nil
}

func (f *faultFS) Create(name string, cat vfs.DiskWriteCategory) (vfs.File, error) {
	if err := f.createErr("open", name); err != nil {
		return nil, err
	}
	file, err := f.FS.Create(name, cat)
	return f.wrap(file, name, err)
}

func (f *faultFS) ReuseForWrite(oldname, newname string, cat vfs.DiskWriteCategory) (vfs.File, error) {
	if err := f.createErr("rename", newname); err != nil {
		return nil, err
	}
	file, err := f.FS.ReuseForWrite(oldname, newname, cat)
	return f.wrap(file, newname, err)
}

func (f *faultFS) OpenReadWrite(name string, cat vfs.DiskWriteCategory, opts ...vfs.OpenOption) (vfs.File, error) {
	if err := f.createErr("open", name); err != nil {
		return nil, err
	}
	file, err := f.FS.OpenReadWrite(name, cat, opts...)
	return f.wrap(file, name, err)
}

func (f *faultFS) Rename(oldname, newname string) error {
	if err := f.createErr("rename", newname); err != nil {
		return err
	}
	return f.FS.Rename(oldname, newname)
}

func (f *faultFS) Link(oldname, newname string) error {
	if err := f.createErr("link", newname); err != nil {
		return err
	}
	return f.FS.Link(oldname, newname)
}

func (f *faultFS) Remove(name string) error {
	if err := f.createErr("remove", name); err != nil {
		return err
	}
	return f.FS.Remove(name)
}

func (f *faultFS) Unwrap() vfs.FS { return f.FS }

type faultFile struct {
	vfs.File
	fs   *faultFS
	name string
}

func (f *faultFile) Write(p []byte) (int, error) {
	if err := f.fs.writeErr("write", f.name); err != nil {
		return 0, err
	}
	return f.File.Write(p)
}

func (f *faultFile) WriteAt(p []byte, off int64) (int, error) {
	if err := f.fs.writeErr("write", f.name); err != nil {
		return 0, err
	}
	return f.File.WriteAt(p, off)
}

func (f *faultFile) Sync() error {
	if err := f.fs.writeErr("sync", f.name); err != nil {
		return err
	}
	return f.File.Sync()
}

func (f *faultFile) SyncData() error {
	if err := f.fs.writeErr("sync", f.name); err != nil {
		return err
	}
	return f.File.SyncData()
}

func (f *faultFile) SyncTo(length int64) (bool, error) {
	if err := f.fs.writeErr("sync", f.name); err != nil {
		return false, err
	}
	return f.File.SyncTo(length)
}

func (f *faultFile) Preallocate(off, length int64) error {
	if err := f.fs.writeErr("fallocate", f.name); err != nil {
		return err
	}
	return f.File.Preallocate(off, length)
}

// logRecorder is a slog.Handler that keeps every record, for assertions on log lines.
type logRecorder struct {
	mu   sync.Mutex
	recs []slog.Record
}

func (r *logRecorder) Enabled(context.Context, slog.Level) bool { return true }
func (r *logRecorder) Handle(_ context.Context, rec slog.Record) error {
	r.mu.Lock()
	r.recs = append(r.recs, rec.Clone())
	r.mu.Unlock()
	return nil
}
func (r *logRecorder) WithAttrs([]slog.Attr) slog.Handler { return r }
func (r *logRecorder) WithGroup(string) slog.Handler      { return r }

// count returns how many records at level or above have a message starting with prefix.
func (r *logRecorder) count(level slog.Level, prefix string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, rec := range r.recs {
		if rec.Level >= level && strings.HasPrefix(rec.Message, prefix) {
			n++
		}
	}
	return n
}

// attr returns the value of the attribute key of the first record whose message starts with
// prefix, or "".
func (r *logRecorder) attr(prefix, key string) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, rec := range r.recs {
		if !strings.HasPrefix(rec.Message, prefix) {
			continue
		}
		v := ""
		rec.Attrs(func(a slog.Attr) bool {
			if a.Key == key {
				v = a.Value.String()
				return false
			}
			return true
		})
		return v
	}
	return ""
}

// eventually polls cond until it holds or total has passed (testwait.Eventually).
func eventually(t *testing.T, total time.Duration, what string, cond func() bool) {
	t.Helper()
	testwait.Eventually(t, total, what, cond)
}
