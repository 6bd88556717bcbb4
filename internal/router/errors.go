package router

import "github.com/titan-broker/titan/internal/router/refusal"

// The router's refusals: the sentinel errors its ports return (each port method names the
// ones it may return) and the router turns into ERROR frames; also the Err of the
// *frame.ProtocolError that Router.Publish returns, for errors.Is. They are declared in the
// router's leaf package refusal, which the adapters behind the ports (pattern packages,
// dispatch) may import where they may not import the router; these are the same values.
var (
	// ErrQueueFull: refusal.ErrQueueFull (ERROR "queue full").
	ErrQueueFull = refusal.ErrQueueFull
	// ErrQueuePaused: refusal.ErrQueuePaused (ERROR "queue paused").
	ErrQueuePaused = refusal.ErrQueuePaused
	// ErrCanceled: refusal.ErrCanceled (ERROR "server shutting down").
	ErrCanceled = refusal.ErrCanceled
	// ErrNoQueue: refusal.ErrNoQueue. It is also the error of a SEND or SUBSCRIBE that
	// names a queue with a spelling addressing an existing queue only (RabbitMQ's
	// /amq/queue/<name>) when that queue does not exist; the client's ERROR is "no queue
	// '<name>'" (RabbitMQ: "NOT_FOUND - no queue").
	ErrNoQueue = refusal.ErrNoQueue
	// ErrDestinationLimit: refusal.ErrDestinationLimit (ERROR "destination limit reached";
	// "temp-queue limit reached" for the per-connection temp-queue bound).
	ErrDestinationLimit = refusal.ErrDestinationLimit
	// ErrGroupLimit: refusal.ErrGroupLimit (ERROR "group limit reached").
	ErrGroupLimit = refusal.ErrGroupLimit
	// ErrNotStored: refusal.ErrNotStored (ERROR: the store's Refusal text, else "message
	// not stored").
	ErrNotStored = refusal.ErrNotStored
	// ErrDurableSubscriptionLimit: refusal.ErrDurableSubscriptionLimit (ERROR "durable
	// subscription limit reached").
	ErrDurableSubscriptionLimit = refusal.ErrDurableSubscriptionLimit
	// ErrNoDurableSubscription: refusal.ErrNoDurableSubscription (ERROR "unknown durable
	// subscription").
	ErrNoDurableSubscription = refusal.ErrNoDurableSubscription
	// ErrDurableSubscriptionInUse: refusal.ErrDurableSubscriptionInUse (ERROR "durable
	// subscription in use").
	ErrDurableSubscriptionInUse = refusal.ErrDurableSubscriptionInUse
)
