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

// GroupCommitStats counts a store's group commits since Open. Every field is a monotonic
// counter (for metrics: rates over time give records per fsync, the share of records that
// never reached the disk and the mean commit time).
type GroupCommitStats struct {
	// Syncs counts write-ahead-log fsyncs: the group commits, and the syncs that make
	// deletes, trims and lazily written metadata durable.
	Syncs uint64
	// Groups counts the group commits that wrote records, one fsync each.
	Groups uint64
	// GroupTime sums those commits' times: from handing the group's batch to the
	// write-ahead log to the landing of its fsync.
	GroupTime time.Duration
	// Records counts the records appended through group commit; Unwritten those of them
	// deleted before their group was written (a queue message consumed and acknowledged
	// first), which cost neither a write nor a delete.
	Records, Unwritten uint64
}

// GroupCommitCounter is implemented by stores that commit appends in groups (the Pebble
// store). GroupCommitStats is safe for concurrent use and cheap (a few atomic loads): it is
// read at every metrics scrape.
type GroupCommitCounter interface {
	GroupCommitStats() GroupCommitStats
}
