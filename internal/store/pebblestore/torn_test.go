package pebblestore

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/titan-broker/titan/internal/store"
)

// walImage is a closed store's files plus where each appended record's batch ends in its
// write-ahead log.
type walImage struct {
	files   map[string][]byte // base name → contents
	wal     string            // base name of the WAL holding the appends
	recs    [][]byte          // recs[i] has seq i+1
	endOffs []int64           // endOffs[i]: WAL size once record i+1 was synced
}

// tornRecordSizes makes batches of very different sizes, so that the WAL has full, first,
// middle and last chunks and spans several 32 KiB blocks.
var tornRecordSizes = []int{40, 300, 7, 2100, 45000, 90, 1, 12000, 500, 64}

// buildWALImage opens a store on fs in dir, appends one record per Append (each synced),
// records the WAL size after each, and closes the store.
func buildWALImage(t *testing.T, fs vfs.FS, dir string) *walImage {
	t.Helper()
	s := openT(t, dir, Options{FS: fs, DeleteSyncInterval: -1})
	img := &walImage{files: map[string][]byte{}}
	for i, size := range tornRecordSizes {
		rec := bytes.Repeat([]byte{byte('a' + i)}, size)
		seq, err := s.Append("q", rec)
		if err != nil || seq != uint64(i+1) {
			t.Fatalf("Append %d: seq %d, %v", i, seq, err)
		}
		wal := latestWAL(t, fs, dir)
		if img.wal == "" {
			img.wal = wal
		} else if wal != img.wal {
			t.Fatalf("WAL rotated from %s to %s during the test", img.wal, wal)
		}
		fi, err := fs.Stat(fs.PathJoin(dir, wal))
		if err != nil {
			t.Fatal(err)
		}
		img.recs = append(img.recs, rec)
		img.endOffs = append(img.endOffs, fi.Size())
	}
	closeT(t, s)
	names, err := fs.List(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range names {
		if n == lockFile {
			continue
		}
		f, err := fs.Open(fs.PathJoin(dir, n))
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(f)
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		img.files[n] = b
	}
	if got := int64(len(img.files[img.wal])); got != img.endOffs[len(img.endOffs)-1] {
		t.Logf("WAL is %d bytes after Close, %d after the last Append", got, img.endOffs[len(img.endOffs)-1])
	}
	return img
}

// latestWAL returns the base name of the highest-numbered *.log file in dir.
func latestWAL(t *testing.T, fs vfs.FS, dir string) string {
	t.Helper()
	names, err := fs.List(dir)
	if err != nil {
		t.Fatal(err)
	}
	var logs []string
	for _, n := range names {
		if strings.HasSuffix(n, ".log") {
			logs = append(logs, n)
		}
	}
	if len(logs) == 0 {
		t.Fatalf("no WAL in %s: %v", dir, names)
	}
	slices.Sort(logs) // fixed-width numbers
	return logs[len(logs)-1]
}

// restore writes img into a fresh MemFS, with the WAL replaced by wal.
func (img *walImage) restore(t *testing.T, wal []byte) vfs.FS {
	t.Helper()
	fs := vfs.NewMem()
	if err := fs.MkdirAll("db", 0o755); err != nil {
		t.Fatal(err)
	}
	for n, b := range img.files {
		if n == img.wal {
			b = wal
		}
		writeFile(t, fs, fs.PathJoin("db", n), b)
	}
	return fs
}

func writeFile(t *testing.T, fs vfs.FS, name string, b []byte) {
	t.Helper()
	f, err := fs.Create(name, vfs.WriteCategoryUnspecified)
	if err != nil {
		t.Fatal(err)
	}
	// vfs.File.Write may modify its argument (MemFS does, in Pebble's invariants builds,
	// which -race enables): write a copy.
	if _, err := f.Write(slices.Clone(b)); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

// intact returns how many leading records end at or before off in the WAL.
func (img *walImage) intact(off int64) int {
	n := 0
	for n < len(img.endOffs) && img.endOffs[n] <= off {
		n++
	}
	return n
}

// recovered opens the damaged image and returns the number of records it holds, after
// checking they are exactly records 1..n with their original data and that the store is
// consistent and appendable. A non-nil error is Open's.
func (img *walImage) recovered(t *testing.T, fs vfs.FS, dir string) (int, error) {
	t.Helper()
	return img.recoveredLog(t, fs, dir, nil)
}

// recoveredLog is recovered with the store logging to log.
func (img *walImage) recoveredLog(t *testing.T, fs vfs.FS, dir string, log *slog.Logger) (int, error) {
	t.Helper()
	n, _, err := img.recoveredOpts(t, fs, dir, log, false)
	return n, err
}

// recoveredOpts is recoveredLog, opening with Options.AcceptDataLoss set to accept; it
// also returns what Open reported (Store.Recovery).
func (img *walImage) recoveredOpts(t *testing.T, fs vfs.FS, dir string, log *slog.Logger, accept bool) (int, Recovery, error) {
	t.Helper()
	s, err := Open(dir, Options{FS: fs, DeleteSyncInterval: -1, Logger: log, AcceptDataLoss: accept})
	if err != nil {
		return 0, Recovery{}, err
	}
	rec := s.Recovery()
	defer closeT(t, s)
	n := 0
	if err := s.Scan("q", 0, func(seq uint64, data []byte) bool {
		if seq != uint64(n+1) || int(seq) > len(img.recs) || !bytes.Equal(data, img.recs[seq-1]) {
			t.Errorf("record %d after recovery: seq %d, %d bytes — not the original prefix", n+1, seq, len(data))
			return false
		}
		n++
		return true
	}); err != nil {
		t.Fatalf("Scan after recovery: %v", err)
	}
	// The store must keep working: the next seq follows what survived.
	seq, err := s.Append("q", []byte("after"))
	if err != nil || seq != uint64(n+1) {
		t.Fatalf("Append after recovery: seq %d, %v; want %d", seq, err, n+1)
	}
	return n, rec, nil
}

// damageOffsets returns every offset of the last batch, the bytes around every batch
// boundary, and every 509th offset elsewhere.
func (img *walImage) damageOffsets(size int64) []int64 {
	var offs []int64
	tail := img.endOffs[len(img.endOffs)-2]
	for off := int64(0); off < size; off++ {
		nearBoundary := false
		for _, e := range img.endOffs {
			if off >= e-2 && off <= e+2 {
				nearBoundary = true
				break
			}
		}
		if off >= tail || nearBoundary || off%509 == 0 {
			offs = append(offs, off)
		}
	}
	return offs
}

// TestTornWALTail truncates the WAL of a closed store at many offsets. A cut that removes
// committed records is never silent: Open refuses with store.ErrDataLoss, naming `titan
// store check` and --accept-data-loss; with AcceptDataLoss it opens with exactly the
// records whose batches lie wholly before the cut, reports how many are missing, and the
// start after that is clean. A cut that removes nothing committed (the clean close's
// trailer) opens as before. Without the committed-mark file (a power loss can leave it
// behind the log) a cut is a torn tail again: tolerated, exactly the records before it.
func TestTornWALTail(t *testing.T) {
	img := buildWALImage(t, vfs.NewMem(), "db")
	wal := img.files[img.wal]
	offs := append(img.damageOffsets(int64(len(wal))), int64(len(wal)))
	num, _ := walFileNum(img.wal)
	var refused, accepted, untouched int
	for i, off := range offs {
		want := img.intact(off)
		fs := img.restore(t, wal[:off])
		logs := &logRecorder{}
		n, err := img.recoveredLog(t, fs, "db", slog.New(logs))
		if logs.count(slog.LevelError, "store recovery drops records") != 0 {
			t.Fatalf("truncated at %d: a torn tail was reported as damage", off)
		}
		if want == len(img.recs) {
			if err != nil || n != want {
				t.Fatalf("truncated at %d of %d (nothing committed cut): %d records, %v; want %d", off, len(wal), n, err, want)
			}
			continue
		}
		if !errors.Is(err, store.ErrDataLoss) || !strings.Contains(err.Error(), "titan store check") ||
			!strings.Contains(err.Error(), "--accept-data-loss") {
			t.Fatalf("truncated at %d of %d, %d of %d records cut: Open = %v (%d records); want ErrDataLoss naming titan store check and --accept-data-loss",
				off, len(wal), len(img.recs)-want, len(img.recs), err, n)
		}
		refused++
		if _, st := scanWAL(wal[:off], uint32(num)); st.torn > 0 {
			// A cut tail is refused before Pebble replays it writably: the WAL is untouched.
			if left := readFileT(t, fs, fs.PathJoin("db", img.wal)); !bytes.Equal(left, wal[:off]) {
				t.Fatalf("truncated at %d: the refused Open changed the WAL (%d bytes, was %d)", off, len(left), off)
			}
			untouched++
		}
		if i%16 != 0 && off != offs[len(offs)-2] {
			continue // the slower checks below on a sample
		}
		accepted++
		n, rec, err := img.recoveredOpts(t, fs, "db", nil, true)
		if err != nil || n != want || rec.MissingRecords != uint64(len(img.recs)-want) || !rec.AcceptedLoss {
			t.Fatalf("truncated at %d, --accept-data-loss: %d records (want %d), %+v, %v", off, n, want, rec, err)
		}
		again, err := Open("db", Options{FS: fs, DeleteSyncInterval: -1})
		if err != nil {
			t.Fatalf("truncated at %d: the start after --accept-data-loss: %v", off, err)
		}
		if r := again.Recovery(); r.MissingRecords != 0 {
			t.Fatalf("truncated at %d: the start after --accept-data-loss reports %+v", off, r)
		}
		closeT(t, again)
		noMark := img.restore(t, wal[:off])
		if err := noMark.Remove(noMark.PathJoin("db", markFile)); err != nil {
			t.Fatal(err)
		}
		if n, err := img.recovered(t, noMark, "db"); err != nil || n != want {
			t.Fatalf("truncated at %d without the mark file: %d records, %v; want %d", off, n, err, want)
		}
	}
	t.Logf("WAL of %d bytes truncated at %d offsets: %d cuts of committed records refused with ErrDataLoss (%d with a torn tail left untouched); "+
		"%d of them opened with AcceptDataLoss with exactly the records before the cut, and as torn tails without the mark file",
		len(wal), len(offs), refused, untouched, accepted)
	if refused == 0 || accepted == 0 {
		t.Fatal("no cut removed a committed record")
	}
}

// walChunk is one chunk of a WAL in the WAL-sync format.
type walChunk struct {
	start, end int64
	synced     uint64 // the SyncOffset the chunk records
}

// walChunks lists the valid chunks of an undamaged WAL.
func walChunks(t *testing.T, data []byte, logNum uint32) []walChunk {
	t.Helper()
	var out []walChunk
	for off := 0; off+walSyncHeader <= len(data); {
		room := (off/walBlockBytes+1)*walBlockBytes - off
		if room < walSyncHeader && allZero(data[off:min(off+room, len(data))]) {
			off += room
			continue
		}
		typ := data[off+6]
		if typ < walTypeSyncFirst || typ > walTypeSyncLast || binary.LittleEndian.Uint32(data[off+7:]) != logNum {
			break // EOF trailer or end
		}
		end := off + walSyncHeader + int(binary.LittleEndian.Uint16(data[off+4:]))
		out = append(out, walChunk{int64(off), int64(end), binary.LittleEndian.Uint64(data[off+11:])})
		off = end
	}
	if len(out) == 0 {
		t.Fatal("WAL has no WAL-sync chunks")
	}
	return out
}

// chunkAt returns the chunk holding off.
func chunkAt(chunks []walChunk, off int64) (walChunk, bool) {
	for _, c := range chunks {
		if off >= c.start && off < c.end {
			return c, true
		}
	}
	return walChunk{}, false
}

// provable reports whether damage at off is provably not a torn tail: a later chunk records
// the log as synced past the start of the chunk holding off.
func provable(chunks []walChunk, off int64) bool {
	for i, c := range chunks {
		if off < c.start || off >= c.end {
			continue
		}
		for _, later := range chunks[i+1:] {
			if later.synced > uint64(c.start) {
				return true
			}
		}
		return false
	}
	return false // padding or trailer
}

// TestFlippedWALByte flips one byte at many offsets of the WAL of a closed store. Open must
// either recover a prefix of the records holding at least every record that ends before
// the damage, or refuse with store.ErrCorrupt — and it must refuse whenever a later chunk
// proves the damaged bytes had been synced (checkWALTail; Pebble alone only looks in later
// 32 KiB blocks). Damage that no later sync offset covers looks exactly like a torn tail:
// the records from the damaged one on are dropped, without an error.
func TestFlippedWALByte(t *testing.T) {
	img := buildWALImage(t, vfs.NewMem(), "db")
	wal := img.files[img.wal]
	num, _ := walFileNum(img.wal)
	chunks := walChunks(t, wal, uint32(num))
	var maxSynced uint64
	for _, c := range chunks {
		maxSynced = max(maxSynced, c.synced)
	}
	var tolerated, refused, silentLoss, reported int
	for _, off := range img.damageOffsets(int64(len(wal))) {
		damaged := slices.Clone(wal)
		damaged[off] ^= 0x40
		logs := &logRecorder{}
		n, err := img.recoveredLog(t, img.restore(t, damaged), "db", slog.New(logs))
		loud := logs.count(slog.LevelError, "store recovery drops records") == 1
		if errors.Is(err, store.ErrDataLoss) { // the committed mark caught the dropped records
			refused++
			continue
		}
		switch {
		case err == nil:
			tolerated++
			if want := img.intact(off); n < want {
				t.Fatalf("flip at %d: %d records recovered, want at least %d (those before the damage)", off, n, want)
			}
			if n < len(img.recs) {
				if loud {
					reported++
				} else {
					silentLoss++
				}
				// A flip in a chunk's payload leaves a whole chunk with a wrong checksum:
				// that is damage, never a torn tail, and must be reported.
				if c, ok := chunkAt(chunks, off); ok && off >= c.start+walSyncHeader && !loud {
					t.Errorf("flip at %d (payload of the chunk at %d): records %d..%d dropped without the loud report",
						off, c.start, n+1, len(img.recs))
				}
				if provable(chunks, off) {
					t.Errorf("flip at %d: records %d..%d dropped without an error although a later chunk proves the damage was synced",
						off, n+1, len(img.recs))
				}
				// The committed mark makes every dropped committed record a refusal.
				t.Errorf("flip at %d: records %d..%d dropped without ErrDataLoss", off, n+1, len(img.recs))
			}
		case errors.Is(err, store.ErrCorrupt):
			refused++
		default:
			t.Fatalf("flip at %d: Open = %v, want success or ErrCorrupt", off, err)
		}
	}
	t.Logf("WAL of %d bytes in %d chunks; highest recorded sync offset %d (last batch starts at %d): "+
		"%d flips recovered (%d of them dropping records with an Error report, %d silently: damaged chunk headers), %d refused with ErrCorrupt",
		len(wal), len(chunks), maxSynced, img.endOffs[len(img.endOffs)-2], tolerated, reported, silentLoss, refused)
	if refused == 0 {
		t.Error("no flip was refused")
	}
}

// TestTornWALTailOnDisk repeats a few truncations and flips on the operating system's file
// system, with a real directory.
func TestTornWALTailOnDisk(t *testing.T) {
	base := t.TempDir()
	img := buildWALImage(t, vfs.Default, filepath.Join(base, "orig"))
	wal := img.files[img.wal]
	size := int64(len(wal))
	last := img.endOffs[len(img.endOffs)-2]
	cases := []struct {
		name    string
		damage  func([]byte) []byte
		intact  int  // records that must survive (with AcceptDataLoss when fewer than all)
		corrupt bool // Open must fail with ErrCorrupt
	}{
		{"truncate-1", func(b []byte) []byte { return b[:size-1] }, len(img.recs) - 1, false},
		{"truncate-mid-last", func(b []byte) []byte { return b[:(last+size)/2] }, len(img.recs) - 1, false},
		{"truncate-at-last", func(b []byte) []byte { return b[:last] }, len(img.recs) - 1, false},
		{"truncate-half", func(b []byte) []byte { return b[:size/2] }, img.intact(size / 2), false},
		{"zero-tail", func(b []byte) []byte {
			b = slices.Clone(b)
			clear(b[last+3:])
			return b
		}, len(img.recs) - 1, false},
		{"flip-last-byte", func(b []byte) []byte {
			b = slices.Clone(b)
			b[size-1] ^= 0xff
			return b
		}, len(img.recs) - 1, false},
		{"flip-first-batch", func(b []byte) []byte {
			b = slices.Clone(b)
			b[img.endOffs[0]/2] ^= 0xff // later chunks record it as synced
			return b
		}, 0, true},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(base, fmt.Sprint(i))
			if err := os.MkdirAll(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			for n, b := range img.files {
				if n == img.wal {
					b = tc.damage(wal)
				}
				if err := os.WriteFile(filepath.Join(dir, n), b, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			n, err := img.recovered(t, vfs.Default, dir)
			if tc.corrupt {
				if !errors.Is(err, store.ErrCorrupt) {
					t.Fatalf("Open = %v (recovered %d), want ErrCorrupt", err, n)
				}
				t.Logf("refused as expected: %v", err)
				return
			}
			switch {
			case errors.Is(err, store.ErrDataLoss):
				t.Logf("refused as expected: %v", err)
				n, _, err = img.recoveredOpts(t, vfs.Default, dir, nil, true)
			case err == nil && n < len(img.recs):
				t.Fatalf("%d of %d records recovered without ErrDataLoss", n, len(img.recs))
			}
			if err != nil {
				t.Fatalf("Open: %v", err)
			}
			if n < tc.intact {
				t.Fatalf("%d records recovered, want at least %d", n, tc.intact)
			}
		})
	}
}

func readFileT(t *testing.T, fs vfs.FS, name string) []byte {
	t.Helper()
	f, err := fs.Open(name)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	b, err := io.ReadAll(f)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
