// Package memstore is the in-memory adapter of the store port, for tests and for
// `titan serve --store memory`. Nothing survives the process; within a process,
// Store.Reopen simulates a restart over the same data.
//
// # Concurrency
//
// A Store is safe for concurrent use. Each stream has its own mutex guarding its records; a
// store-wide RWMutex guards the set of streams and the metadata. No lock is held while a Scan
// callback runs, so the callback may call back into the Store. Append and SetMeta are
// "durable" (visible to every later call and to a Reopen'd store) on return.
package memstore
