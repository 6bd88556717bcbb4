// Package lockorder names the ranks of the ordered message-path locks of
// internal/broker/LOCKS.md and, built with the `invariants` tag, checks them at run time.
//
// A lock declared as Mutex[R] or RWMutex[R] has the rank R.Rank() (LOCKS.md's number in its
// ordered list). Without the tag, Mutex[R] and RWMutex[R] are type aliases of sync.Mutex and
// sync.RWMutex: the rank exists only in the type and nothing runs. With `-tags invariants`
// (the race run of scripts/test), every acquisition records, per goroutine, the locks it
// holds, and an acquisition of a lock whose rank is not greater than the rank of a lock the
// goroutine already holds panics with both locks' ranks: the code took locks in an order
// LOCKS.md forbids (including two locks of one rank, such as two queues' locks).
//
// Lock and RLock are checked; TryLock and TryRLock never wait, so they are recorded but not
// checked (a lock taken by TryLock still ranks the locks taken under it). The zero value is an unlocked lock in
// both builds. A lock released on another goroutine than the one that took it is found and
// forgotten there.
package lockorder

// Ranker is a lock's rank: a type whose Rank is the lock's number in LOCKS.md's ordered list.
// The rank types below are empty structs; a lock's rank is its type argument.
type Ranker interface {
	// Rank returns the rank: a goroutine holding a lock of rank r may only take locks of a
	// greater rank.
	Rank() int
}

// The ranks of LOCKS.md's ordered list ("Ordered (the message path)"), by lock.
type (
	// BrokerRank is broker.Broker.mu (1).
	BrokerRank struct{}
	// ReclaimRank is dispatch.Dispatcher.reclaimMu (2).
	ReclaimRank struct{}
	// DispatcherRank is dispatch.Dispatcher.mu (3).
	DispatcherRank struct{}
	// QueuesPatternRank is pointqueue.Pattern.mu (4).
	QueuesPatternRank struct{}
	// RPCChannelRank is rpc.channel.mu (5).
	RPCChannelRank struct{}
	// QueueRank is pointqueue.Queue.mu and event.Queue.mu (6).
	QueueRank struct{}
	// ConnRank is delivery.Conn.mu (7).
	ConnRank struct{}
	// SessionRank is session.Session.mu (8).
	SessionRank struct{}
	// HeartBeatRank is session.hbScheduler.mu (9).
	HeartBeatRank struct{}
)

// Rank returns 1.
func (BrokerRank) Rank() int { return 1 }

// Rank returns 2.
func (ReclaimRank) Rank() int { return 2 }

// Rank returns 3.
func (DispatcherRank) Rank() int { return 3 }

// Rank returns 4.
func (QueuesPatternRank) Rank() int { return 4 }

// Rank returns 5.
func (RPCChannelRank) Rank() int { return 5 }

// Rank returns 6.
func (QueueRank) Rank() int { return 6 }

// Rank returns 7.
func (ConnRank) Rank() int { return 7 }

// Rank returns 8.
func (SessionRank) Rank() int { return 8 }

// Rank returns 9.
func (HeartBeatRank) Rank() int { return 9 }
