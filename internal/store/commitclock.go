package store

import "time"

// Epoch is the origin of Since: the process's start, near enough.
var Epoch = time.Now()

// Since returns the monotonic time elapsed since Epoch, never 0: one clock read (time.Now
// takes two, wall and monotonic). It is the time base of CommitClock, and of latencies
// measured per message.
func Since() time.Duration { return time.Since(Epoch) + 1 }

// CommitClock is implemented by AsyncAppenders that note when their commits land, so that a
// caller timing an append until its wait returns (durable's commit latency) needs no clock
// read of its own after the wait: the store reads the clock once per group commit instead
// of every waiter once per record.
type CommitClock interface {
	// LastCommit returns Since() at the latest landing of a group commit (its fsync
	// returned, or it had nothing left to write, and its waits were released), 0 before the
	// first. Once an append's wait has returned, LastCommit is at or after that append's
	// commit landed and at or before the call. Safe for concurrent use.
	LastCommit() time.Duration
}
