package queue

// Reason says why the queue removed a message that was never acknowledged. The owner logs and
// counts it, and dead-letters messages removed with ReasonMaxDeliveries.
type Reason uint8

// Removal reasons. The zero Reason is not used, so a zero Removed is recognisably empty.
const (
	// ReasonRing: the ring was over its size and the message was at the head of the ready list
	// (Artemis AckReason.REPLACED; reference 002, "Ring Queues").
	ReasonRing Reason = iota + 1
	// ReasonExpired: the message reached the head in Pop at or after its ExpiresAt.
	ReasonExpired
	// ReasonMaxDeliveries: the message was cancelled or nacked after Options.MaxDeliveries
	// deliveries; the owner sends it to the dead-letter destination.
	ReasonMaxDeliveries
	// ReasonPurged: Purge removed the message.
	ReasonPurged
	numReasons
)

var reasonNames = [numReasons]string{"unknown", "ring", "expired", "max_deliveries", "purged"}

// String returns a snake_case label suitable for logs and metrics.
func (r Reason) String() string {
	if r < numReasons {
		return reasonNames[r]
	}
	return "unknown"
}

// AllReasons lists every removal reason, for metrics initialisation.
func AllReasons() []Reason {
	return []Reason{ReasonRing, ReasonExpired, ReasonMaxDeliveries, ReasonPurged}
}

// Removed is one message the queue gave up on, and why. Msg is the caller's *Message, no
// longer referenced by the queue.
type Removed struct {
	Msg    *Message
	Reason Reason
}
