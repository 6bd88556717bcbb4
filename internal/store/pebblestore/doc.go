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
//	record     'r' (0x72) | nameLen u16 | name | seq u64     → the record's data, verbatim
//	stream     's' (0x73) | nameLen u16 | name               → last u64 | count u64 | bytes u64
//	meta       'm' (0x6d) | key                              → the value, verbatim
//	version    'v' (0x76)                                    → format u32 (currently 1)
//
// The stream value holds the high-water mark (the highest seq ever given), the number of
// records held and their total data bytes. It is rewritten in the same batch as every change
// to the stream's records, so after any crash it matches the records exactly, and a stream
// whose records were all deleted or trimmed keeps its high-water mark: sequences are never
// reused. Open reads every stream value (one per stream, not one per record) and checks it
// against the stream's last record key.
//
// # Durability and group commit
//
// Append builds one batch (records + stream value) and commits it with Sync. It holds the
// stream's mutex only while Pebble sequences and applies the batch (DB.ApplyNoSyncWait),
// then waits for the fsync (Batch.SyncWait) without it. Pebble's WAL writer (record.LogWriter)
// has a single flusher: batches queued while an fsync is in flight are written and synced
// together by the next one, so concurrent Appends share fsyncs. Measured on this project's
// machine (TestGroupCommit, BenchmarkAppend): 1.0 fsync per message with one producer, 0.5
// with 4, 0.13 with 16 — about producers/2 messages per fsync, the best a single flusher can
// do without adding delay, so no extra coalescing layer is needed.
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
// Damage that lies after the highest sync offset any surviving chunk records is
// indistinguishable from a torn tail and is dropped without an error. With small records
// that is the last few batches (about 2 KB measured with 256-byte records); Pebble
// v2.1.7 undercounts the offsets it records when a batch fills a 32 KiB block, so after large
// records the unprovable tail can reach tens of KiB (TestFlippedWALByte logs it).
//
// # Concurrency
//
// A Store is safe for concurrent use. Lock order: Store.mu (call accounting, sticky error;
// never held across Pebble calls) is a leaf; Store.smu (stream map) is never held while a
// stream's mutex is acquired, except by Check; a stream's mu is held across Pebble batch
// application but never across an fsync wait or a Scan callback. A background goroutine
// (the delete syncer) runs from Open to Close.
//
// # Logging
//
// Pebble's messages go to Options.Logger (informational at Debug, errors and corruption at
// Error); with a nil Logger they are discarded.
package pebblestore
