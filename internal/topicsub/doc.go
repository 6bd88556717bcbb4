// Package topicsub keeps the durable topic subscriptions of the peers' dialects (issue 26):
// RabbitMQ's durable:true (or persistent:true) SUBSCRIBE with an id, ActiveMQ's
// activemq.subscriptionName and Artemis's durable-subscription-name with a CONNECT client-id.
//
// The model is Artemis's: a durable subscription is a queue of the queues pattern fed by
// the topic's fan-out. Every SEND to an events destination whose channel its filter matches
// (wildcards included) puts a copy of the message on that queue, stored like any queue
// message; the subscribers consume it like a queue (acknowledgements, redelivery, prefetch,
// dead-lettering, limits, flow control and the operator's queue commands all apply). The
// queue is made like an operator's queue, with the address settings that match the topic's
// channel, so it is never reclaimed and survives restarts; the registry of subscriptions
// (key → filter → queue) is stored in one metadata record, written (fsync'd) before a
// SUBSCRIBE that creates or changes a subscription is answered, and read at start.
//
// A subscription is keyed by (group, owner, name): owner is the CONNECT client-id
// (ActiveMQ, Artemis) or "" (RabbitMQ, whose subscription is named by its id alone, so that
// two connections subscribing with the same id share it). Its queue is
// /queue/$durable/<owner or ~>/<name>, each part escaped so that it is one channel token.
//
// # Concurrency
//
// Registry is safe for concurrent use. Registry.mu serializes changes (and the metadata
// write); Feeds reads the index under an RWMutex read lock and takes no queue lock.
package topicsub
