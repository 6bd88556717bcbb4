package dispatch

import (
	"errors"

	"github.com/titan-broker/titan/internal/router/refusal"
)

// Errors of dispatcher queues, shared by every pattern package that owns one. The refusals
// a router port returns are the router's own (package refusal, declared by the consumer):
// the values below with those names are the same values, so a pattern returning
// dispatch.ErrQueueFull returns the router's refusal.ErrQueueFull.
var (
	// ErrQueueFull is returned by a publish when the queue is full under PolicyFail, or
	// stayed full (or paused) for the whole block timeout under PolicyBlock.
	ErrQueueFull = refusal.ErrQueueFull
	// ErrQueuePaused is returned by a publish when the queue stayed paused for the whole
	// block timeout, or at once under PolicyFail.
	ErrQueuePaused = refusal.ErrQueuePaused
	// ErrQueueDeleted is returned for operations on a queue that was deleted; a publisher
	// retries on the fresh queue the Dispatcher creates.
	ErrQueueDeleted = errors.New("dispatch: queue deleted")
	// ErrCanceled is returned by a publish when the producer's wait for room ended because
	// its connection closed or the dispatcher was closed (shutdown).
	ErrCanceled = refusal.ErrCanceled
	// ErrQueueNotEmpty is returned by Delete without force for a queue holding messages.
	ErrQueueNotEmpty = errors.New("dispatch: queue not empty")
	// ErrNoQueue is returned when no queue exists for an identity (or it has no ring).
	ErrNoQueue = refusal.ErrNoQueue
	// ErrDestinationLimit is returned when a SEND would create a destination (a
	// dispatcher queue or an events-store log) while the broker already holds
	// Options.MaxDestinations of them. Nothing is created.
	ErrDestinationLimit = refusal.ErrDestinationLimit
	// ErrGroupLimit is returned when a SEND would create the first destination of a group
	// while Options.MaxGroups groups hold destinations. Nothing is created.
	ErrGroupLimit = refusal.ErrGroupLimit
	// ErrDurableSubscriptionLimit is returned when a SUBSCRIBE would create a new durable
	// subscription (an events-store durable-name never seen on that log) while the broker
	// already holds max-durable-subscriptions of them. Nothing is created.
	ErrDurableSubscriptionLimit = refusal.ErrDurableSubscriptionLimit
	// ErrNoDurableSubscription is returned when deleting a durable subscription that does
	// not exist.
	ErrNoDurableSubscription = refusal.ErrNoDurableSubscription
	// ErrDurableSubscriptionInUse is returned when deleting (or expiring) a durable
	// subscription that a live SUBSCRIBE is reading; it is kept.
	ErrDurableSubscriptionInUse = refusal.ErrDurableSubscriptionInUse
	// ErrNotStored is returned when a message of a durable pattern was not (or could not
	// be) committed to the store, or the pattern needs a store and none is configured.
	ErrNotStored = refusal.ErrNotStored
)
