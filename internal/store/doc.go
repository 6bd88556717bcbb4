// Package store is Titan's durable port: the Store interface, its StreamInfo and its errors.
// Adapters live in subpackages (memstore, pebblestore); storetest is the conformance suite
// every adapter passes.
//
// The store is byte-oriented. It knows streams — named, append-only sequences of opaque
// records numbered from 1 — and a small key-value space for metadata. Message encoding, and
// the mapping from destinations to stream names, belong to the caller.
//
// # Durability (DESIGN.md §5)
//
// Append returns only once its records are committed and fsync'd; concurrent Appends share
// one fsync (group commit), so a RECEIPT may be written as soon as Append returns. SetMeta is
// durable on return too. Delete and Trim are durable at the next sync: losing one in a crash
// only means a redelivery, never a loss.
//
// # Sequences
//
// Sequences are per stream, start at 1, strictly increase and are never reused: the
// high-water mark survives deletes, trims and restarts. Scan sees a record only once its
// Append's commit is durable, so a reader that remembers the last sequence it saw never
// skips a record that a concurrent, not yet synced Append will later publish below it.
//
// # Concurrency
//
// A Store is safe for concurrent use. Data handed to a Scan callback is valid only during the
// callback; everything else returned is owned by the caller.
package store
