// Package pebblestore is the embedded, durable adapter of the store port, on
// github.com/cockroachdb/pebble/v2: one directory (--data-dir), no server.
//
// # Key layout
//
// Everything lives in one Pebble keyspace, ordered bytewise. Integers are unsigned and
// big-endian, so record keys sort by sequence number; names are raw bytes preceded by their
// length, so that one stream's keys never interleave with those of a stream whose name
// extends it ("a" and "a\x00b"). The golden tests TestKeyLayoutGolden and TestOnDiskBytes
// pin these bytes.
//
//	state      'r' (0x72) | nameLen u16 | name                     → last u64 | count u64 | bytes u64
//	record     'r' (0x72) | nameLen u16 | name | seq u64           → the record's data, verbatim
//	checkpoint 'r' (0x72) | nameLen u16 | name | seq u64 | 0x00    → last u64 | count u64 | bytes u64 (last = seq)
//	meta       'm' (0x6d) | key                                    → the value, verbatim
//	version    'v' (0x76)                                          → format u32 (currently 2)
//
// A stream's keys are contiguous: its state key first, then its records in seq order, each
// checkpoint right after the record whose seq it names. A state value — under the state key
// or a checkpoint key — holds a high-water mark, and the number of records at or below it
// and their total data bytes, exactly as Pebble held them when the value was written in the
// same batch. The stream's state is the newest of them (the state key, or the highest
// checkpoint above it) plus the records above its high-water mark.
//
// Why: a group commit writes a stream's records without its state, except for the stream's
// first batch (which creates the state key), a batch whose records of the stream were all
// deleted before it was written (the state then keeps the high-water mark), and a
// checkpoint once 2^18 records or 64 MiB were written above the last persisted state (which
// bounds what Open reads). Delete, Trim and Drop rewrite the state key. So the memtables of
// a stream that only grows (an events-store log) flush to tables whose keys lie above every
// older table's, and Pebble moves them down the levels instead of rewriting them. Format 1
// kept the state under 's' | nameLen | name, after every record key, and rewrote it with
// every batch: each flushed table then overlapped every newer one, and compactions
// (12–17% of the broker's CPU on an events-store live tail) rewrote appended data level
// after level. Open upgrades a format-1 store in one synced batch (migrateV1).
//
// After any crash the states match the records: a removal writes the state key in the
// batch of its tombstones, covering every record Pebble holds then; records written later
// sort above it. A stream whose records were all deleted or trimmed keeps its high-water
// mark: sequences are never reused. Open finds each stream by its state key (one seek per
// stream, which skips the stream's records and tombstones), and walks back from the
// stream's last key to the newest checkpoint above the state, or to the state, counting the
// records on the way; when the state counts records it checks with one bounded seek that a
// record at or below its high-water mark exists.
//
// # Durability and group commit
//
// Append builds one batch (records, and the stream's state when one is due) and commits it
// with Sync. It holds the
// stream's mutex only while Pebble sequences and applies the batch (DB.ApplyNoSyncWait),
// then waits for the fsync (Batch.SyncWait) without it. Pebble's WAL writer (record.LogWriter)
// has a single flusher: batches queued while an fsync is in flight are written and synced
// together by the next one, so concurrent Appends share fsyncs. On top of it the write-behind
// group commit (groupcommit.go) holds the next group open, for at most the last commit's
// time, until the producers the last landing released have appended again, so N producers
// that each await their own Append share every fsync instead of alternating between two
// groups of N/2. Measured on this project's machine (TestGroupCommit): 1.0 fsync per message
// with one producer, 0.25 with 4, 0.064 with 16 (0.5 and 0.126 without the hold).
//
// Holding the stream's mutex until Pebble has sequenced the batch makes Pebble's commit order
// for a stream its seq order. Scan reads only up to the stream's durable mark (the highest
// seq whose Append has synced), so a reader never sees a record before it is durable, and a
// reader that resumes from the last seq it saw cannot skip one.
//
// Delete and Trim commit without Sync (Delete looks each seq up first to keep the counts
// exact; Trim counts, then writes one range deletion). They become durable with the next
// synced commit — any Append or SetMeta, or the background syncer, which syncs the WAL every
// Options.DeleteSyncInterval while deletes are pending — and at Close.
//
// # Recovery
//
// Pebble replays the write-ahead log at Open. A torn tail (a write cut short by a crash) in
// the newest WAL is dropped: those batches' Appends never returned. Damage before the tail is
// corruption and Open returns store.ErrCorrupt, leaving the directory untouched. Two details
// matter:
//
//   - Pebble tells damage from a torn tail by the sync offsets recorded in each WAL chunk
//     (FormatWALSyncChunks), but only looks for them in later 32 KiB blocks; damage in the
//     final block was dropped silently, with every record synced after it. Open therefore
//     first scans the newest WAL itself (checkWALTail) and refuses when any later chunk
//     records a sync offset beyond the damage.
//   - Pebble creates a new database's first WAL before it applies the format version, so
//     that WAL carries no sync offsets; Open flushes once after creating a store to rotate
//     to a WAL that does.
//
// Damage that lies after the highest sync offset any surviving chunk records cannot be
// proved synced, so Open goes on and Pebble drops it like a torn tail — but not silently:
// when the damaged chunk was written whole (its checksum is wrong) or whole chunks of the
// log follow it, Open logs one Error line naming the WAL, the damage offset and the chunks
// and bytes dropped (checkWALTail). A plain torn tail (a write cut short) is not reported. With small records
// that is the last few batches (about 2 KB measured with 256-byte records); Pebble
// v2.1.7 undercounts the offsets it records when a batch fills a 32 KiB block, so after large
// records the unprovable tail can reach tens of KiB (TestFlippedWALByte logs it).
//
// # Disk faults
//
// A write that cannot be committed — a full disk, a read-only file system, any WAL I/O
// error — takes the store down (Health: store.StateDown with the cause, one Error log line):
// that write and every later one fail with a *store.UnavailableError ("store unavailable:
// no space left on device"); reads go on. Pebble cannot continue after a WAL error (its
// next WAL rotation panics, and on a read-only directory died with "sync: unlock of
// unlocked mutex"), so a shield under Pebble (walFS) keeps WAL errors from it and records
// them, and every synced commit checks the record: no success is returned for a write the
// fault may have touched. A recoverer goroutine then retries with exponential backoff
// (Options.RetryInterval to MaxRetryInterval): it writes and syncs a probe file, and once
// that works, waits for the calls in progress (new calls get store.ErrUnavailable for
// those few milliseconds), closes Pebble, reopens it from disk (the WAL ends where it failed:
// a torn tail, whose batches never reported success), reloads the streams without lowering
// any high-water mark, and commits a synced batch. Then the store is OK again, logged at
// Warn. A failed flush or compaction while the WAL still works only makes the store
// degraded (Warn, once), until one succeeds — but once memtables pile up and Pebble stalls
// writes behind those flushes, the stall would last until the disk recovers, so the store
// goes down: later writes are refused instead of blocking, and the few already inside
// Pebble complete when a flush succeeds. A failed MANIFEST write, which Pebble declares
// fatal, takes it down and through the same recovery. Corruption takes it down for good.
//
// A fault met at Open (store.IsDiskFault: no space, a quota, a read-only file system) is
// not an error either: Open probes with the same small synced write before Pebble, and on
// a fault returns a store that is already down with that cause, reading from a read-only
// Pebble (without Pebble's directory lock, which a read-only file system cannot create) or,
// when the directory holds no database yet, from an empty in-memory one. The recoverer then
// creates the directory and takes Titan's lock if Open could not, and reopens read-write.
// Recoveries do not start until Open has returned.
//
// # Metadata
//
// Meta keys ('m' | key) are listed by prefix with ScanMeta (one bounded iterator) and
// removed with DeleteMeta (one synced batch); durable subscriptions' positions are such keys.
//
// # Concurrency
//
// A Store is safe for concurrent use. Calls are counted without a lock while the store is
// up (an atomic count and a gate word that mirrors the closed, reopening and down states);
// Close and the recoverer set the gate under Store.mu and wait for the count to reach 0.
// Lock order: Store.mu (state changes, health, the drain wait; never held across Pebble
// calls) is a leaf; Store.smu (stream map) is never held while a
// stream's mutex is acquired, except by Check; a stream's mu is held across Pebble batch
// application but never across an fsync wait or a Scan callback. A background goroutine
// (the delete syncer) runs from Open to Close, and one (the recoverer) while the store is
// down.
//
// # Logging
//
// Pebble's messages go to Options.Logger (informational at Debug, errors and corruption at
// Error); with a nil Logger they are discarded.
package pebblestore
