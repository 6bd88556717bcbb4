// Package storetest is the conformance suite of the store port. Every adapter's tests call
// Run with a function that opens that adapter; Run checks the port's contract (ordering,
// sequence monotonicity across restarts, delete, trim, metadata, concurrency, Close
// stickiness) and, after every subtest, the store's invariants (CheckInvariants).
//
// The suite starts goroutines only inside tests and waits for them; it needs no goleak
// setup of its own.
package storetest
