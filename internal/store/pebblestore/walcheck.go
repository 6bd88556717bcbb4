package pebblestore

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"io"
	"log/slog"
	"strconv"
	"strings"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/titan-broker/titan/internal/store"
)

// WAL chunk format constants, from Pebble's record package documentation (record/record.go):
// the log is a sequence of 32 KiB blocks; each chunk is
//
//	CRC u32 LE | Size u16 LE | Type u8 | LogNum u32 LE | SyncOffset u64 LE | payload
//
// for the "WAL sync" chunk types 9–12 written since FormatWALSyncChunks. The CRC is the
// masked CRC-32C of Type through the end of the payload. SyncOffset is the offset up to which
// the log was durably synced when the chunk was written. A clean close ends the log with an
// 11-byte "EOF trailer": a recyclable-format header (type 5) with CRC 0, Size 0 and LogNum
// one more than the log's.
const (
	walBlockBytes        = 32 << 10
	walLegacyHeader      = 7
	walRecyclableHeader  = 11
	walSyncHeader        = 19
	walTypeRecyclable    = 5 // recyclable full chunk; also the EOF trailer's type
	walTypeSyncFirst     = 9
	walTypeSyncLast      = 12
	walMaskDelta         = 0xa282ead8
	walFileSuffix        = ".log"
	walFileNumberPadding = 6
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// walCRC is Pebble's masked CRC-32C (internal/crc).
func walCRC(b []byte) uint32 {
	c := crc32.Update(0, castagnoli, b)
	return (c>>15 | c<<17) + walMaskDelta
}

// walDamage describes damage found before the end of a WAL.
type walDamage struct {
	badOffset int64  // offset of the first chunk that does not parse
	evidence  string // why that is not a torn tail; "" when it cannot be proved
	// damagedBytes is the size of the chunk at badOffset when it is a whole chunk of this
	// log with a wrong checksum (changed after it was written), else 0.
	damagedBytes int
	// Valid chunks of this log that lie after the damage and that recovery will drop.
	dropped      int
	droppedBytes int64
	firstDropped int64
}

// checkWALTail inspects the newest WAL in dir before Pebble replays it.
//
// Pebble replays the newest WAL tolerantly: at the first chunk that does not parse it stops
// and treats the rest as a torn tail, unless a chunk in a *later 32 KiB block* says the log
// had been synced past that point (then it reports corruption). Damage within the final
// block is therefore dropped silently, and with it every record synced after the damage.
// This check closes that gap: it scans the whole remainder of the file, at every offset,
// for a valid chunk of this log whose SyncOffset lies beyond the damage. That proves the
// damaged bytes had been synced, so the log is corrupt rather than torn, and Open refuses
// with store.ErrCorrupt.
//
// What no check can tell apart is damage in the last batches written, after the highest
// SyncOffset any surviving chunk records: that is exactly what a torn tail looks like. (A
// clean close's EOF trailer is deliberately not taken as evidence: a crash during Close can
// persist the trailer but tear the unsynced deletes written just before it.)
//
// When the damage cannot be proved synced but it is a whole chunk with a wrong checksum (its
// bytes changed after they were written: a write cut short leaves a shorter file or zeros),
// or whole, valid chunks of this log lie beyond it, recovery will still drop them, and some
// may hold acknowledged records: checkWALTail then logs one Error line on log saying which
// WAL, where the damage is, and how many chunks and bytes are dropped from which offset, and
// lets Open go on. A write cut short by a crash (nothing of this log after the damage, and
// no complete damaged chunk) is the normal torn tail and is not reported.
//
// A WAL written in an older chunk format is not checked (Pebble's own rules apply).
//
// It returns what it found (walStats) for Open's recovery report.
func checkWALTail(fs vfs.FS, dir string, log *slog.Logger) (walStats, error) {
	var stats walStats
	names, err := fs.List(dir)
	if err != nil {
		return stats, nil // a missing directory is Pebble's to report
	}
	var newest string
	var newestNum uint64
	for _, n := range names {
		num, ok := walFileNum(n)
		if ok && (newest == "" || num > newestNum) {
			newest, newestNum = n, num
		}
	}
	if newest == "" {
		return stats, nil
	}
	path := fs.PathJoin(dir, newest)
	f, err := fs.Open(path)
	if err != nil {
		return stats, fmt.Errorf("pebblestore: open WAL %s: %w", path, err)
	}
	data, err := io.ReadAll(f)
	_ = f.Close()
	if err != nil {
		return stats, fmt.Errorf("pebblestore: read WAL %s: %w", path, err)
	}
	d, stats := scanWAL(data, uint32(newestNum))
	stats.path = path
	if d != nil && d.evidence == "" {
		// Not provably synced, so Pebble will replay up to the damage and drop the rest;
		// but the damaged chunk was written whole, or whole records of this log lie beyond
		// it, and any of them may have been acknowledged. Say so loudly.
		log.Error("store recovery drops records at the damaged tail of the write-ahead log",
			"wal", path, "wal_bytes", len(data), "damage_offset", d.badOffset,
			"damaged_chunk_bytes", d.damagedBytes,
			"dropped_chunks", d.dropped, "dropped_bytes", d.droppedBytes,
			"first_dropped_offset", d.firstDropped,
			"hint", "the damaged bytes were not provably synced; any acknowledged message in them is lost")
		return stats, nil
	}
	if d != nil && d.evidence != "" {
		return stats, fmt.Errorf("%w: pebblestore: WAL %s (%d bytes) is damaged at offset %d, but %s: "+
			"the damaged bytes had been synced, so recovery would silently drop acknowledged records "+
			"(the directory was left untouched: restore it from a backup, or move it aside to start empty)",
			store.ErrCorrupt, path, len(data), d.badOffset, d.evidence)
	}
	return stats, nil
}

// walStats is what scanWAL found in the newest WAL, for the recovery report.
type walStats struct {
	path     string
	bytes    int64 // the file's size
	records  int   // complete records (a full chunk, or a last chunk)
	validEnd int64 // where the last valid chunk of this log ends
	// torn is the size of the bytes after validEnd that are neither zeros nor the chunks of
	// an older log left in a recycled file: a write cut short, or a cut file.
	torn  int64
	clean bool // the log ends with a clean close's EOF trailer
}

// walFileNum parses Pebble's WAL file name, "NNNNNN.log".
func walFileNum(name string) (uint64, bool) {
	digits, ok := strings.CutSuffix(name, walFileSuffix)
	if !ok || len(digits) < walFileNumberPadding {
		return 0, false
	}
	n, err := strconv.ParseUint(digits, 10, 64)
	return n, err == nil
}

// scanWAL walks the chunks of one WAL (log number logNum) and returns the damage it proves,
// or nil when the log ends cleanly, ends torn, or is not in the WAL-sync chunk format; and
// what it walked (walStats, without path).
func scanWAL(data []byte, logNum uint32) (*walDamage, walStats) {
	stats := walStats{bytes: int64(len(data))}
	d := scanWALStats(data, logNum, &stats)
	if !stats.clean && stats.validEnd < int64(len(data)) {
		stats.torn = tornBytes(data, int(stats.validEnd), logNum)
	}
	return d, stats
}

// tornBytes returns how many bytes from off on are a torn or cut tail of log logNum: 0 when
// they are zeros, or begin with a whole chunk of an older log (a recycled file's leftovers).
func tornBytes(data []byte, off int, logNum uint32) int64 {
	rest := data[off:]
	if allZero(rest) {
		return 0
	}
	if len(rest) >= walSyncHeader {
		typ := rest[6]
		n := binary.LittleEndian.Uint32(rest[7:])
		end := walSyncHeader + int(binary.LittleEndian.Uint16(rest[4:]))
		if typ >= walTypeSyncFirst && typ <= walTypeSyncLast && n != logNum && end <= len(rest) &&
			walCRC(rest[6:end]) == binary.LittleEndian.Uint32(rest) {
			return 0
		}
	}
	return int64(len(rest))
}

// scanWALStats is scanWAL's walk; it fills stats as it goes.
func scanWALStats(data []byte, logNum uint32, stats *walStats) *walDamage {
	bad, damaged := -1, 0
	off := 0
walk:
	for off < len(data) {
		blockEnd := min((off/walBlockBytes+1)*walBlockBytes, len(data))
		room := (off/walBlockBytes+1)*walBlockBytes - off
		if room < walLegacyHeader {
			off += room // block trailer padding
			continue
		}
		if off+walLegacyHeader > len(data) {
			bad = off // torn header
			break
		}
		sum := binary.LittleEndian.Uint32(data[off:])
		size := int(binary.LittleEndian.Uint16(data[off+4:]))
		typ := data[off+6]
		switch {
		case sum == 0 && size == 0 && typ == 0:
			if room < walSyncHeader && allZero(data[off:blockEnd]) {
				off += room // a block's tail too small for another chunk
				continue
			}
			bad = off
			break walk
		case typ == walTypeRecyclable && off+walRecyclableHeader <= len(data) &&
			binary.LittleEndian.Uint32(data[off+7:]) == logNum+1:
			stats.clean = true
			return nil // EOF trailer: a clean end
		case off == 0 && typ < walTypeSyncFirst && typ != 0:
			return nil // a log in an older chunk format: not ours to judge
		case typ < walTypeSyncFirst || typ > walTypeSyncLast:
			bad = off
			break walk
		}
		end := off + walSyncHeader + size
		if end > blockEnd || binary.LittleEndian.Uint32(data[off+7:]) != logNum {
			bad = off
			break
		}
		if walCRC(data[off+6:end]) != sum {
			// A whole chunk of this log, written out to its end, whose bytes changed
			// afterwards: damage, not a write cut short.
			bad, damaged = off, end-off
			break
		}
		if typ == walTypeSyncFirst || typ == walTypeSyncLast { // a full or last chunk ends a record
			stats.records++
		}
		off = end
		stats.validEnd = int64(end)
	}
	if bad < 0 {
		return nil
	}
	var drop walDamage
	for p := bad + 1; p+walRecyclableHeader <= len(data); p++ {
		typ := data[p+6]
		if typ < walTypeSyncFirst || typ > walTypeSyncLast || p+walSyncHeader > len(data) ||
			binary.LittleEndian.Uint32(data[p+7:]) != logNum {
			continue
		}
		end := p + walSyncHeader + int(binary.LittleEndian.Uint16(data[p+4:]))
		if end > len(data) || end > (p/walBlockBytes+1)*walBlockBytes || walCRC(data[p+6:end]) != binary.LittleEndian.Uint32(data[p:]) {
			continue
		}
		if synced := binary.LittleEndian.Uint64(data[p+11:]); synced > uint64(bad) {
			return &walDamage{badOffset: int64(bad), evidence: fmt.Sprintf("the chunk at offset %d records the log as synced up to offset %d", p, synced)}
		}
		if drop.dropped == 0 {
			drop.firstDropped = int64(p)
		}
		drop.dropped++
		drop.droppedBytes += int64(end - p)
		p = end - 1
	}
	if drop.dropped == 0 && damaged == 0 {
		return nil
	}
	drop.badOffset, drop.damagedBytes = int64(bad), damaged
	return &drop
}

func allZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}
