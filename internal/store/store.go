package store

// MaxNameBytes is the longest stream name or meta key, in bytes, that every adapter accepts.
// Longer (or empty) names are refused with ErrInvalidName.
const MaxNameBytes = 4096

// Store is the durable port: named append-only streams of opaque records plus a small
// key-value space for metadata. It is safe for concurrent use by any number of goroutines.
//
// Sequences are per stream, start at 1, are strictly increasing and are never reused, even
// after deletes, trims or restarts. A record is immutable once appended; the only ways to
// remove it are Delete and Trim.
//
// Every method returns ErrClosed once Close has begun (Close itself included), and
// ErrInvalidName for an empty stream name or meta key or one longer than MaxNameBytes.
// A Store whose write failed is down (Health): it refuses every later write with an error
// wrapping ErrUnavailable (or ErrCorrupt), never reports success for a write it did not
// commit, and, where the adapter can, recovers on its own once writes succeed again.
type Store interface {
	// Append durably appends records, in order, to stream (creating the stream on first use)
	// and returns the sequence number given to the first; record i gets firstSeq+i.
	//
	// It returns only after the records are committed and fsync'd; concurrent Appends share
	// one fsync (group commit). The records are copied: the caller may reuse the slices once
	// Append returns. An empty record is allowed; no records at all is ErrNoRecords.
	Append(stream string, records ...[]byte) (firstSeq uint64, err error)

	// Delete removes the records with the given sequence numbers (acknowledged or dropped
	// messages). A missing, already deleted or never assigned seq, and an unknown stream, are
	// not errors. The removal is durable at the next sync (the next Append or SetMeta, or the
	// adapter's periodic sync): losing it in a crash only means a redelivery.
	Delete(stream string, seqs ...uint64) error

	// Scan calls fn for each record of stream with seq >= from (0 means 1) in ascending seq
	// order, until fn returns false or the records run out. Scan sees only records whose
	// Append has committed durably. An unknown stream is not an error: fn is never called.
	//
	// data is valid only during fn; copy it to keep it. fn may call other methods of the
	// Store (records appended or deleted meanwhile may or may not be seen), but must return
	// before Close can complete.
	Scan(stream string, from uint64, fn func(seq uint64, data []byte) bool) error

	// Streams lists, sorted by name, every stream that holds records or has ever been
	// appended to. The returned slice belongs to the caller.
	Streams() ([]StreamInfo, error)

	// Trim deletes every record of stream with seq < before (retention). Like Delete it is
	// durable at the next sync, and an unknown stream is not an error.
	Trim(stream string, before uint64) error

	// SetMeta durably stores value under key (for example a durable subscription's position),
	// replacing any previous value; it returns after an fsync. value is copied; nil stores an
	// empty value.
	SetMeta(key string, value []byte) error

	// Meta returns a copy of the value stored under key, and whether the key exists.
	Meta(key string) (value []byte, ok bool, err error)

	// Health returns the store's condition: OK, degraded or down, with the cause and
	// counters of state changes. It never blocks on I/O and works after Close (returning
	// the last state).
	Health() Health

	// Close waits for calls in progress to return, syncs outstanding deletes and releases the
	// store's resources. It is sticky: Close and every other method called after it return
	// ErrClosed.
	Close() error
}

// StreamInfo describes one stream, as returned by Store.Streams.
type StreamInfo struct {
	// Name is the stream name given to Append.
	Name string
	// First is the lowest sequence number the stream holds; when Count is 0 it is Last+1
	// (where the next record will go).
	First uint64
	// Last is the highest sequence number ever given in the stream (its high-water mark),
	// whether or not that record still exists.
	Last uint64
	// Count is the number of records the stream holds.
	Count int64
	// Bytes is the total size of the records' data, in bytes (keys and overhead excluded).
	Bytes int64
}

// CheckName returns ErrInvalidName, wrapped with the offending length, when name is empty or
// longer than MaxNameBytes, and nil otherwise. Adapters use it to validate stream names and
// meta keys.
func CheckName(name string) error {
	if len(name) == 0 || len(name) > MaxNameBytes {
		return &nameError{n: len(name)}
	}
	return nil
}

type nameError struct{ n int }

func (e *nameError) Error() string {
	if e.n == 0 {
		return ErrInvalidName.Error() + ": empty"
	}
	return ErrInvalidName.Error() + ": longer than MaxNameBytes"
}

func (e *nameError) Unwrap() error { return ErrInvalidName }

// AsyncAppender is implemented by stores that can commit an append and wait for its
// durability separately, so that one producer's consecutive messages share fsyncs (the
// router pipelines a connection's persistent SENDs this way).
type AsyncAppender interface {
	// AppendAsync is Append split in two: it orders the records into the stream and returns
	// their first sequence; wait, which must be called exactly once, returns once they are
	// fsync'd (or with the error that prevented it). Records of one stream become durable in
	// sequence order.
	AppendAsync(stream string, records ...[]byte) (firstSeq uint64, wait func() error, err error)
}

// LazyAppender is implemented by AsyncAppenders that can take an append without starting
// its commit. AppendAsyncLazy is AppendAsync, except that the commit starts only when wait is
// called, or with the next commit another append starts: meant for a message published
// before its commit, so that a consumer that acknowledges it first (and so deletes it) spares
// its write. wait keeps its meaning: it returns nil once the records are durable, or were
// deleted before they had to be.
type LazyAppender interface {
	AppendAsyncLazy(stream string, records ...[]byte) (firstSeq uint64, wait func() error, err error)
}

// Dropper is implemented by stores that can forget an empty stream entirely, state
// included, so that a name no longer used costs nothing at Open (durable.Log drops the
// streams of reclaimed and empty queues). It is the one exception to "sequences are never
// reused": a dropped stream's next Append starts again at 1.
type Dropper interface {
	// Drop removes each of streams that holds no records, in one write; a stream that
	// holds records is left alone (the result is then ErrNotEmpty, after the empty ones are
	// dropped), and an unknown stream is not an error. Durable at the next sync, like
	// Delete.
	Drop(streams ...string) error
}

// LazyMetaSetter is implemented by stores that can write metadata without an fsync of its
// own. SetMetaLazy stores value under key like SetMeta, but the write is durable only at the
// next sync (the next Append, SetMeta or Syncer.Sync, or the adapter's periodic sync), like
// Delete: a crash before then keeps the previous value. Durable subscriptions save their
// positions this way, so ACKs share the store's group commit instead of an fsync each.
type LazyMetaSetter interface {
	SetMetaLazy(key string, value []byte) error
}

// Syncer is implemented by stores whose Delete and Trim are durable only at the next sync:
// Sync makes every Delete and Trim that returned before it durable (group-committed with
// concurrent Appends). An ACK that asks for a receipt is answered only after Sync.
type Syncer interface {
	// Sync returns once everything committed before it is fsync'd. Errors: ErrClosed, or
	// an error wrapping ErrUnavailable when the store is down.
	Sync() error
}

// StreamRecords is one stream's share of an AppendMulti.
type StreamRecords struct {
	Stream  string
	Records [][]byte
}

// MultiAppender is implemented by stores that can append to several streams atomically:
// a transaction's messages to several destinations are committed all or none.
type MultiAppender interface {
	// AppendMulti appends every entry's records to its stream as one atomic commit (one
	// fsync) and returns each entry's first sequence, in order. Several entries may name
	// the same stream; their records are ordered as the entries are. wait, called exactly
	// once, returns once everything is durable (or with the error that prevented it: then
	// none of it is). Errors as Append.
	AppendMulti(entries []StreamRecords) (firstSeqs []uint64, wait func() error, err error)
}

// StreamScanner is implemented by stores that can read many streams' records in one ordered
// pass (one iterator for the whole store instead of one per stream), which keeps a start
// with many small streams proportional to the records stored (durable.Log.RecoverQueues).
type StreamScanner interface {
	// ScanStreams visits every stream whose name begins with prefix, streams in an order
	// fixed by the store and each stream's records in sequence order, like Scan from 1:
	// stream is called once per such stream with its name and record count (Streams'
	// Count) before its records; when it returns false the stream's records are skipped.
	// record is called for each record up to the stream's durable high-water mark; data is
	// valid only during the call. record returning false ends the whole scan. Streams that
	// hold nothing may or may not be visited (a store that finds streams by their records
	// does not see empty ones). Errors: ErrClosed, or a read error (ErrCorrupt for
	// corruption).
	ScanStreams(prefix string, stream func(name string, count int64) bool, record func(seq uint64, data []byte) bool) error
}
