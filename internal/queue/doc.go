// Package queue is the data structure behind one point-to-point queue (the "queues" messaging
// pattern, DESIGN §4): it keeps messages and their states, and applies ring, expiry,
// delivery-limit and redelivery rules. Choosing which consumer receives a message, timers,
// flow control and persistence belong to the owner (the dispatcher).
//
// # States
//
// Every message the Queue holds is in exactly one state:
//
//   - ready: waiting for a consumer, on a FIFO deque. Enqueue adds at the tail; Cancel, Nack
//     and Promote add at the head; Pop takes from the head.
//   - delivering: handed to a consumer by Pop and not yet settled. Ack removes it; Cancel and
//     Nack return it to ready (or to scheduled, or remove it at MaxDeliveries).
//   - scheduled: held until Message.DeliverAt, on a min-heap by (DeliverAt, Seq). Promote, and
//     every method that takes now, moves the due ones to the head of ready. NextDue tells the
//     owner when to call Promote next.
//
// # Priority
//
// Ready messages are ordered by Message.Priority (0 to 9, JMS 2.0 §3.4.10), highest first,
// and FIFO within a priority: the ready list is one deque per priority, and "the head"
// everywhere in this doc is the head of the highest priority holding a message. Cancel,
// Nack and Promote return a message to the head of its own priority; the ring rule removes
// from the head, as Artemis's ring queue removes from its PriorityLinkedList's head. PopFunc
// delivers the first message, in that order, that a picky consumer (a JMS selector) takes,
// leaving the others in place.
//
// Counts mirrors the reference's gauges: Messages (messageCount) is all three states,
// Delivering is deliveringCount and Scheduled is scheduledCount. Bytes sums Message.Size over
// all three.
//
// Expired messages (now >= ExpiresAt) are removed lazily, when Pop finds them at the head, and
// count in Counts until then. Removed messages are returned to the owner with a Reason, for it
// to count, log or dead-letter; the Queue forgets them once its next call overwrites the result.
//
// # Ring rule
//
// The ring follows ActiveMQ Artemis "Ring Queues" (reference 002): a ring queue keeps its size
// by removing the message at the head, preferring messages at the tail. Here:
//
//   - the ring count is Ready + Delivering; scheduled messages are not on the ring until due;
//   - whenever n messages join the ring, up to n messages are removed from the head of the
//     ready list, with ReasonRing, while the ring count is over RingSize. A tail Enqueue
//     (n = 1) removes only messages ahead of the one it adds: Artemis enforces the ring before
//     adding at the tail and finds nothing to remove when no message is ready, which the
//     reference's first walk-through needs (D, sent while A, B, C are in delivery, is kept and
//     dispatched: messageCount=4). Additions at the head (n = the batch for Cancel or
//     Promote, 1 for Nack) are themselves the first candidates;
//   - messages in delivery are never removed, so Messages can exceed RingSize;
//   - SetRingSize removes nothing at once: below the current count, each addition removes one
//     message, so the queue stops growing and shrinks only as consumers drain it.
//
// This reproduces every walk-through of the reference: with ring 3, sending A, B, C, D keeps
// B, C, D; a consumer that takes each of A..D as it arrives holds four in delivery (D is sent
// while the ring is full of deliveries and is kept), and when it closes without acknowledging
// (Cancel) they go back to the head in reverse order of consumption, so A is at the head and
// is the one removed; a message scheduled for 12:05 on a ring already full with B, C, D joins
// the head at 12:05 and is removed at once.
//
// # Complexity and memory
//
// Ready messages sit on deques (power-of-two ring buffers with insertion at both ends, one
// per priority, found through a bit mask; a queue that has only ever held one priority at a
// time keeps a single inline deque, so a Queue costs 208 bytes, not 560),
// scheduled ones on a min-heap that keeps its (DeliverAt, Seq) key inline, and messages in
// delivery in a map by Seq that also records their consumption order. Enqueue, Pop and Ack are
// O(1) amortized (O(log n) when a scheduled message is involved) and allocation-free in steady
// state: the deque reuses its backing array (shrinking only above 1024 slots, when a quarter
// full), and the []Removed results share one buffer owned by the Queue. That buffer is valid until the next
// call returning a []Removed; callers copy what they keep. Purge is the exception and returns
// a fresh slice.
//
// # Time
//
// Every time is compared on the wall clock: the Queue strips the monotonic reading from each
// now it is given (time.Time.Round(0)), so DeliverAt and ExpiresAt, which usually come from
// Unix-millisecond message headers, and the DeliverAt that Nack sets all compare the same way,
// and the owner's timer for NextDue agrees with Promote even if the wall clock is stepped.
//
// # Concurrency
//
// A Queue is not safe for concurrent use and starts no goroutines, timers or locks. Its owner
// serialises every call under its own mutex and passes the current time, now, into each call
// that needs one, so tests replay scenarios with fixed times and no sleeps.
package queue
