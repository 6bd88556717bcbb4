package pebblestore

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/titan-broker/titan/internal/store"
)

// The committed mark (doc.go, "Damage is never silent").
//
// The committed mark is the sum of every stream's durable high-water mark, plus those of
// the streams Drop removed (kept under droppedKey, in the Drop's own batch): the number of
// sequences ever handed out and synced. It only grows. After each group commit's fsync
// returned, the committer writes it to markFile (12 bytes: the mark u64 BE and its
// CRC-32C u32 BE, at offset 0, without an fsync of its own: it reaches the disk with the
// file system's writeback, and Close syncs it). A process crash (kill -9) keeps the file,
// since the page cache survives the process; a power loss may keep an older value, which is
// only ever lower than the truth. The file is therefore never ahead of what was synced.
//
// At Open the same sum is taken over the recovered streams (each stream's high-water mark
// survives deletes, trims and restarts, so nothing but lost commits can lower it). A
// recovered sum below the file's proves that synced, receipted records were lost (the
// difference is how many): Open refuses with store.ErrDataLoss unless
// Options.AcceptDataLoss. Nothing is added to the hot path but one 12-byte pwrite per group
// commit, and no key is added to the batches (a fixed key in every batch would make every
// flushed table overlap the others and stop Pebble's move compactions).
const markFile = "titan.committed"

// droppedKey holds the high-water marks of dropped streams, summed (u64 BE), in the
// version prefix's space.
var droppedKey = []byte{prefixVersion, 'd'}

// markLen is markFile's size in bytes.
const markLen = 12

// appendMark appends markFile's content for mark (markLen bytes) to dst.
func appendMark(dst []byte, mark uint64) []byte {
	dst = binary.BigEndian.AppendUint64(dst, mark)
	return binary.BigEndian.AppendUint32(dst, crc32.Checksum(dst[len(dst)-8:], castagnoli))
}

// readMarkFile returns the mark recorded in dir's markFile: 0 when there is none, and an
// error when it exists but does not hold a valid mark (the caller logs it and goes on).
func readMarkFile(fs vfs.FS, dir string) (uint64, error) {
	f, err := fs.Open(fs.PathJoin(dir, markFile))
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return 0, nil
		}
		return 0, err
	}
	defer func() { _ = f.Close() }()
	b := make([]byte, markLen)
	if _, err := io.ReadFull(f, b); err != nil {
		return 0, fmt.Errorf("pebblestore: %s: %w", markFile, err)
	}
	if crc32.Checksum(b[:8], castagnoli) != binary.BigEndian.Uint32(b[8:]) {
		return 0, fmt.Errorf("pebblestore: %s: checksum mismatch", markFile)
	}
	return binary.BigEndian.Uint64(b), nil
}

// readDropped reads droppedKey from db: 0 when absent.
func readDropped(db *pebble.DB) (uint64, error) {
	v, closer, err := db.Get(droppedKey)
	if errors.Is(err, pebble.ErrNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, wrapErr("open", err)
	}
	defer func() { _ = closer.Close() }()
	if len(v) != 8 {
		return 0, fmt.Errorf("%w: pebblestore: dropped-streams mark of %d bytes", store.ErrCorrupt, len(v))
	}
	return binary.BigEndian.Uint64(v), nil
}

// openMarkFile opens (creating) markFile for the committer; nil when the file system
// refuses (a read-only start: tried again by noteLanded).
func (s *Store) openMarkFile() {
	if s.markF != nil {
		return
	}
	path := s.fs.PathJoin(s.dir, markFile)
	f, err := s.fs.OpenReadWrite(path, vfs.WriteCategoryUnspecified)
	if err != nil {
		return
	}
	s.markF = f
}

// noteLanded raises the committed mark by raised, the sequences a group whose fsync
// returned made durable, and writes it to markFile. A failed write is ignored: the file then
// holds an older mark, which only weakens the check. Called by the committer only.
func (s *Store) noteLanded(raised uint64) {
	if raised == 0 {
		return
	}
	mark := s.committed.Add(raised)
	if s.markF == nil {
		s.openMarkFile()
		if s.markF == nil {
			return
		}
	}
	_, _ = s.markF.WriteAt(appendMark(s.markBuf[:0], mark), 0)
}

// closeMarkFile syncs and closes markFile (Close).
func (s *Store) closeMarkFile() {
	if s.markF != nil {
		_ = s.markF.Sync()
		_ = s.markF.Close()
		s.markF = nil
	}
}

// Recovery is what Open found while recovering the store, as logged at start and printed by
// `titan store check`.
type Recovery struct {
	// WAL is the newest write-ahead log's path ("" when there was none).
	WAL string
	// WALBytes is its size; Records the complete records in it that Pebble replays, and
	// ReplayedBytes where the last of them ends.
	WALBytes, ReplayedBytes int64
	Records                 int
	// DiscardedBytes is the size of a torn or cut tail after the last complete record,
	// dropped by recovery (0 for a clean end, and for the leftovers of an older log in a
	// recycled file).
	DiscardedBytes int64
	// CleanClose reports that the log ends with the trailer of a clean close.
	CleanClose bool
	// CommittedMark is the committed mark recorded as synced (markFile): the sequences ever
	// committed, summed over streams; RecoveredMark the same sum over what recovery found.
	// CommittedMark > RecoveredMark means receipted records were lost (MissingRecords).
	CommittedMark, RecoveredMark uint64
	// MissingRecords is CommittedMark - RecoveredMark when positive, else 0: how many
	// committed records (messages, duplicate ids, log entries) recovery did not find.
	MissingRecords uint64
	// AcceptedLoss reports that the store was opened despite MissingRecords (AcceptDataLoss).
	AcceptedLoss bool
}

// Recovery returns what Open found (see Recovery).
func (s *Store) Recovery() Recovery { return s.recovery }

// checkMark compares the recovered committed mark (streams' high-water marks summed, and
// the dropped ones') with the recorded one once the database is open, fills s.recovery and
// sets s.committed and s.dropped. Missing records are ErrDataLoss unless AcceptDataLoss;
// accepted, the missing sequences are counted as dropped in the database (synced, when
// writable) so that the next start does not refuse again.
func (s *Store) checkMark(streams map[string]*stream, writable bool) error {
	dropped, err := readDropped(s.db)
	if err != nil {
		return err
	}
	r := dropped
	for _, st := range streams {
		r += st.last
	}
	c, ferr := readMarkFile(s.fs, s.dir)
	if ferr != nil {
		s.log.Warn("store: the committed-mark file is unreadable; the recovered data cannot be checked against it", "file", markFile, "err", ferr)
	}
	s.recovery.CommittedMark, s.recovery.RecoveredMark = c, r
	s.dropped = dropped
	s.committed.Store(max(r, c))
	if c <= r {
		return nil
	}
	s.recovery.MissingRecords = c - r
	if !s.opts.AcceptDataLoss {
		return fmt.Errorf("%w: pebblestore: %s: %d committed records are missing (the store had recorded %d sequences as synced, recovery found %d; "+
			"the write-ahead log %s replayed %d records and discarded %d bytes at its tail): messages answered with a RECEIPT are lost. "+
			"Run `titan store check --data-dir %s` for the report; restore the directory from a backup, "+
			"or start with --accept-data-loss to continue with what remains",
			store.ErrDataLoss, s.dir, c-r, c, r, s.recovery.WAL, s.recovery.Records, s.recovery.DiscardedBytes, s.dir)
	}
	s.recovery.AcceptedLoss = true
	s.dropped += c - r
	if writable {
		if err := s.db.Set(droppedKey, binary.BigEndian.AppendUint64(nil, s.dropped), pebble.Sync); err != nil {
			return wrapErr("open", err)
		}
	}
	return nil
}

// logRecovery writes one line saying what recovery found, and an Error line for lost
// commits accepted with AcceptDataLoss.
func (s *Store) logRecovery(streams int) {
	r := s.recovery
	attrs := []any{"dir", s.dir, "wal", r.WAL, "wal_bytes", r.WALBytes, "records_replayed", r.Records,
		"replayed_bytes", r.ReplayedBytes, "discarded_bytes", r.DiscardedBytes, "clean_close", r.CleanClose,
		"committed_mark", r.CommittedMark, "recovered_mark", r.RecoveredMark, "streams", streams}
	switch {
	case r.MissingRecords > 0:
		s.log.Error("store recovery: committed records are missing, data loss accepted (--accept-data-loss)",
			append(attrs, "missing_records", r.MissingRecords)...)
	case r.DiscardedBytes > 0:
		s.log.Warn("store recovery: a torn tail of the write-ahead log was discarded (writes cut short by a crash; nothing committed is missing)", attrs...)
	default:
		s.log.Info("store recovery: nothing committed is missing", attrs...)
	}
}

// Report is what Inspect found in a store directory.
type Report struct {
	// Recovery is what an Open would find (MissingRecords > 0: it would refuse without
	// AcceptDataLoss).
	Recovery Recovery
	// Streams, Records and Bytes count the recovered streams, their records and the
	// records' bytes.
	Streams int
	Records uint64
	Bytes   uint64
	// Problems lists the invariant violations Check found (nil: none).
	Problems error
}

// Inspect reads the store in dir without writing anything — the directory is opened
// read-only, its WAL replayed in memory — and reports what recovery finds there and whether
// the recovered store passes Check: the `titan store check` command. It takes the
// directory's lock, so it fails with store.ErrLocked while a broker runs on dir. Other
// errors: those of Open (store.ErrCorrupt with advice, store.ErrIncompatible), never
// store.ErrDataLoss, which the report shows instead. opts.FS and opts.Logger are used.
func Inspect(dir string, opts Options) (Report, error) {
	var rep Report
	opts, err := opts.withDefaults()
	if err != nil {
		return rep, err
	}
	opts.AcceptDataLoss = true // report the loss; nothing is written (read-only)
	fs := opts.FS
	if _, err := fs.Stat(dir); err != nil {
		return rep, fmt.Errorf("pebblestore: %s: %w", dir, err)
	}
	lock, err := fs.Lock(fs.PathJoin(dir, lockFile))
	if err != nil {
		return rep, fmt.Errorf("%w: %s (stop the titan process using it first): %v", store.ErrLocked, dir, err)
	}
	defer func() { _ = lock.Close() }()
	s := newStore(dir, opts)
	if err := s.openDB(true); err != nil {
		return rep, err
	}
	defer func() { _ = s.db.Close() }()
	streams, err := s.loadStreams()
	if err != nil {
		if adv := missingFileAdvice(dir, err); adv != nil {
			err = adv
		}
		return rep, err
	}
	if err := s.checkMark(streams, false); err != nil {
		return rep, err
	}
	s.streams = streams
	rep.Recovery = s.recovery
	rep.Recovery.AcceptedLoss = false
	rep.Streams = len(streams)
	for _, st := range streams {
		rep.Records += st.count
		rep.Bytes += st.bytes
	}
	rep.Problems = s.Check()
	return rep, nil
}
