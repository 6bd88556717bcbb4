// Package dispatch is the Dispatcher (reference 000): the one map from an exact destination
// identity to its dispatcher queue, shared by the patterns that own such queues (events
// under fanout-mode, queues, temp-queues), with the address-full policy those queues admit
// by (Admit), the broker-wide message counters and the channel trie operators search
// (SearchAll, discovery only — routing never uses it).
//
// It knows no pattern: each pattern package registers the Factory of its queue type, and
// the Dispatcher calls the Queue interface only. Operator actions (create, pause, ring size,
// delete) work through it.
//
// # Concurrency
//
// Everything exported is safe for concurrent use. Dispatcher.mu is never held while taking
// a queue's or a delivery.Conn's lock, except that Factory.NewQueue runs under it (see
// internal/broker/LOCKS.md). No lock is held while calling the SettingsStore.
package dispatch
