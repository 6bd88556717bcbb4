// Package refusal is the router's vocabulary of refusals: the sentinel errors its ports
// (router.Publisher, router.Subscriber, router.Destinations, router.DurableTopics,
// router.Requests) return and the router turns into ERROR frames. It is owned by the router
// (the consumer declares what it reacts to, as it declares its ports) and kept in a leaf
// package of its own because the adapters behind the ports — the pattern packages and
// dispatch — may not import the router (internal/archtest): they import this package and
// return, or wrap (%w), these values. It imports nothing of the module.
//
// The router re-exports every value under the same name (router.ErrQueueFull is
// ErrQueueFull), and dispatch keeps its historic names as the same values
// (dispatch.ErrQueueFull is ErrQueueFull), so errors.Is works with any of the three.
package refusal

import "errors"

// Refusals of a publication (router.Publisher, router.Destinations).
var (
	// ErrQueueFull: the destination is full under the address-full policy FAIL, or stayed
	// full (or paused) for the whole block timeout under BLOCK (Artemis's
	// address-full-policy). ERROR "queue full".
	ErrQueueFull = errors.New("refusal: queue full")
	// ErrQueuePaused: an operator paused the destination and it stayed paused for the whole
	// block timeout (at once under FAIL). ERROR "queue paused".
	ErrQueuePaused = errors.New("refusal: queue paused")
	// ErrCanceled: a wait for room (policy BLOCK) or for a responder ended because the
	// producer's connection closed or the broker is shutting down. ERROR "server shutting
	// down".
	ErrCanceled = errors.New("refusal: publish canceled")
	// ErrNoQueue: no queue exists for the identity and none is created for it — a
	// temp-queue whose owning connection closed, a pattern without queues, a RabbitMQ
	// /amq/queue/ name that was never declared. ERROR "no queue '<name>'" where the router
	// reports it.
	ErrNoQueue = errors.New("refusal: no such queue")
	// ErrDestinationLimit: creating the destination would pass the broker's
	// max-destinations (or, wrapped with the bound's name, the connection's
	// max-destinations-by-client). Nothing is created. ERROR "destination limit reached".
	ErrDestinationLimit = errors.New("refusal: destination limit reached")
	// ErrGroupLimit: creating the first destination of a group would pass max-groups.
	// Nothing is created. ERROR "group limit reached".
	ErrGroupLimit = errors.New("refusal: group limit reached")
	// ErrNotStored: the message was not (or could not be) committed to the store, or its
	// pattern needs a store and none is configured. The router wraps a Persister's error
	// with it; the ERROR's message is the store's Refusal text or "message not stored".
	ErrNotStored = errors.New("refusal: message not stored")
)

// Refusals of a durable subscription (router.Subscriber for the events-store's durable-name,
// router.DurableTopics).
var (
	// ErrDurableSubscriptionLimit: a new durable subscription would pass
	// max-durable-subscriptions. Nothing is created. ERROR "durable subscription limit
	// reached".
	ErrDurableSubscriptionLimit = errors.New("refusal: durable subscription limit reached")
	// ErrNoDurableSubscription: the durable subscription to delete does not exist. ERROR
	// "unknown durable subscription".
	ErrNoDurableSubscription = errors.New("refusal: no such durable subscription")
	// ErrDurableSubscriptionInUse: the durable subscription to move or delete is consumed
	// by a live SUBSCRIBE; it is kept. ERROR "durable subscription in use".
	ErrDurableSubscriptionInUse = errors.New("refusal: durable subscription in use")
)
