package pebblestore

import (
	"strings"
	"sync/atomic"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// countingFS wraps a vfs.FS and counts the fsyncs issued on its files: Sync, SyncData and
// the SyncTo calls that turned into a full sync. WAL files (*.log) are counted apart.
type countingFS struct {
	vfs.FS
	walSyncs   atomic.Int64
	otherSyncs atomic.Int64
}

func newCountingFS(fs vfs.FS) *countingFS { return &countingFS{FS: fs} }

func (c *countingFS) wrap(f vfs.File, name string, err error) (vfs.File, error) {
	if err != nil {
		return nil, err
	}
	return &countingFile{File: f, fs: c, wal: strings.HasSuffix(name, ".log")}, nil
}

func (c *countingFS) Create(name string, cat vfs.DiskWriteCategory) (vfs.File, error) {
	f, err := c.FS.Create(name, cat)
	return c.wrap(f, name, err)
}

func (c *countingFS) Open(name string, opts ...vfs.OpenOption) (vfs.File, error) {
	f, err := c.FS.Open(name, opts...)
	return c.wrap(f, name, err)
}

func (c *countingFS) OpenReadWrite(name string, cat vfs.DiskWriteCategory, opts ...vfs.OpenOption) (vfs.File, error) {
	f, err := c.FS.OpenReadWrite(name, cat, opts...)
	return c.wrap(f, name, err)
}

func (c *countingFS) OpenDir(name string) (vfs.File, error) {
	f, err := c.FS.OpenDir(name)
	return c.wrap(f, name, err)
}

func (c *countingFS) ReuseForWrite(oldname, newname string, cat vfs.DiskWriteCategory) (vfs.File, error) {
	f, err := c.FS.ReuseForWrite(oldname, newname, cat)
	return c.wrap(f, newname, err)
}

func (c *countingFS) Unwrap() vfs.FS { return c.FS }

type countingFile struct {
	vfs.File
	fs  *countingFS
	wal bool
}

func (f *countingFile) count() {
	if f.wal {
		f.fs.walSyncs.Add(1)
	} else {
		f.fs.otherSyncs.Add(1)
	}
}

func (f *countingFile) Sync() error {
	f.count()
	return f.File.Sync()
}

func (f *countingFile) SyncData() error {
	f.count()
	return f.File.SyncData()
}

func (f *countingFile) SyncTo(length int64) (bool, error) {
	full, err := f.File.SyncTo(length)
	if full {
		f.count()
	}
	return full, err
}
