// Package dispatch is Titan's messaging core: dispatcher queues keyed by exact destination
// identity, delivery to subscriptions, acknowledgement tracking and redelivery.
//
// # dest.Identity and queues (reference 000, DESIGN §3–§4)
//
// Inside the broker a destination is an dest.Identity (group, pattern, channel). The Dispatcher
// maps each identity to exactly one queue (GetOrPut is atomic); routing never falls back to a
// prefix and never fans out by wildcard. What the queue is depends on the pattern:
//
//   - queues: a PointQueue holding each message until one subscriber acknowledges it
//     (round-robin across subscribers, prefetch-bounded, NACK and disconnect redeliver).
//   - events: delivery to the subscriptions present now, directly or (fanout-mode) through a
//     bounded hand-off queue drained by one consumer per identity.
//
// # Connections
//
// Conn is the delivery-side state of one client connection: its subscriptions and its
// unacknowledged deliveries, keyed by ack id. It writes through the Writer port, which the
// session implements; dispatch never imports the transport.
//
// # Concurrency
//
// Everything exported is safe for concurrent use. Lock order (see internal/broker/LOCKS.md):
// PointQueue.mu before Conn.mu; the Engine's index lock is never held while taking either.
// No lock is held while calling into the store.
package dispatch
