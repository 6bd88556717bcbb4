package pebblestore

import (
	"strings"
	"sync/atomic"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// syncFS wraps the store's file system to count WAL fsyncs for metrics and benchmarks (how
// well group commit shares them). One atomic add per fsync.
type syncFS struct {
	vfs.FS
	walSyncs atomic.Uint64
}

func (c *syncFS) wrap(f vfs.File, name string, err error) (vfs.File, error) {
	if err != nil || !strings.HasSuffix(name, ".log") {
		return f, err
	}
	return &syncFile{File: f, n: &c.walSyncs}, nil
}

func (c *syncFS) Create(name string, cat vfs.DiskWriteCategory) (vfs.File, error) {
	f, err := c.FS.Create(name, cat)
	return c.wrap(f, name, err)
}

func (c *syncFS) OpenReadWrite(name string, cat vfs.DiskWriteCategory, opts ...vfs.OpenOption) (vfs.File, error) {
	f, err := c.FS.OpenReadWrite(name, cat, opts...)
	return c.wrap(f, name, err)
}

func (c *syncFS) ReuseForWrite(oldname, newname string, cat vfs.DiskWriteCategory) (vfs.File, error) {
	f, err := c.FS.ReuseForWrite(oldname, newname, cat)
	return c.wrap(f, newname, err)
}

func (c *syncFS) Unwrap() vfs.FS { return c.FS }

type syncFile struct {
	vfs.File
	n *atomic.Uint64
}

func (f *syncFile) Sync() error     { f.n.Add(1); return f.File.Sync() }
func (f *syncFile) SyncData() error { f.n.Add(1); return f.File.SyncData() }
func (f *syncFile) SyncTo(length int64) (bool, error) {
	full, err := f.File.SyncTo(length)
	if full {
		f.n.Add(1)
	}
	return full, err
}

// WALSyncs returns the number of write-ahead-log fsyncs since Open. Safe for concurrent use.
func (s *Store) WALSyncs() uint64 { return s.syncs.walSyncs.Load() }
