package router

import (
	"errors"
	"time"

	"github.com/titan-broker/titan/internal/delivery"
	"github.com/titan-broker/titan/internal/dest"
	"github.com/titan-broker/titan/internal/frame"
	"github.com/titan-broker/titan/internal/message"
	"github.com/titan-broker/titan/internal/selector"
)

// The router's ports. Each is declared here, by its consumer, in the router's terms
// (identities, messages, subscriptions); the pattern packages, the store and the session
// are adapters behind them, wired by the broker. No port names an adapter type. The
// refusals a port method returns are the router's too (errors.go, declared in its leaf
// package refusal so that the adapters can return them): each method names its own.

// Client is the port to one client connection (implemented by session.Session). Every method
// is safe for concurrent use and never blocks on the socket.
type Client interface {
	delivery.Writer
	// ID is the session id.
	ID() string
	// WriteFrame queues a control frame (RECEIPT, ERROR).
	WriteFrame(f *frame.Frame) bool
	// Fail sends pe as an ERROR frame and, when pe.Fatal, closes after it is written.
	Fail(pe *frame.ProtocolError)
	// Disconnect closes after everything queued is written.
	Disconnect()
	// Done is closed when the connection has closed.
	Done() <-chan struct{}
}

// Publisher is one pattern's way in for a message: the last stage of its SEND route calls
// it.
type Publisher interface {
	// Publish hands m to id's destination. dropped reports a DROP-policy discard (accepted,
	// not enqueued). A wait for room (address-full policy BLOCK) ends when cancel closes
	// (the producer's connection closed). Errors (errors.Is), each an ERROR of its own
	// (failPublish): ErrQueueFull, ErrQueuePaused, ErrCanceled, ErrDestinationLimit,
	// ErrGroupLimit, ErrNotStored (a durable pattern without a store), ErrNoQueue (the
	// destination is gone for good: a closed owner's temp-queue); any other error is
	// "publish failed".
	Publish(id dest.Identity, m *message.Message, cancel <-chan struct{}) (dropped bool, err error)
}

// Subscriber is one pattern's way in for a subscription: the last stage of its SUBSCRIBE
// route calls it. The pattern registers sub on its connection (sub.Conn.Add) and makes
// itself the subscription's Owner, which UNSUBSCRIBE and connection close reach through
// Deliveries without the router choosing a pattern.
type Subscriber interface {
	// Subscribe registers sub. Errors: delivery.ErrDuplicateSubscription (its id is
	// active on the connection), ErrDurableSubscriptionLimit (a new events-store
	// durable-name past max-durable-subscriptions); any other error is "subscribe failed".
	Subscribe(sub *delivery.Subscription) error
}

// Selecting is implemented by a Subscriber that honours delivery.Subscription.Selector (a
// JMS selector): HonoursSelectors reports true. A SUBSCRIBE with a selector header to a
// Subscriber that does not is refused with an ERROR naming the header, never ignored.
type Selecting interface {
	HonoursSelectors() bool
}

// HonoursSelectors reports whether s implements Selecting and honours selectors; a wrapper
// around a port forwards its Selecting through it.
func HonoursSelectors(s any) bool {
	sp, ok := s.(Selecting)
	return ok && sp.HonoursSelectors()
}

// Pattern is a messaging pattern behind the router: events, queues, events-store,
// temp-queues.
type Pattern interface {
	Publisher
	Subscriber
}

// Requests is the request/response port (commands, queries and the temp-queues replies go
// to). Subscribe registers a responder.
type Requests interface {
	Subscriber
	// Request sends m (a command or query to id) to one responder and arms its timeout;
	// replyTo is where the response, or the broker's executed:false answer, goes;
	// requester is the sending connection's delivery state (nil when there is none), whose
	// pending requests are bounded. Errors: ErrCanceled (the pattern closed: shutting
	// down), a bound on pending requests (an error with a Refusal() (message, detail
	// string) method giving the ERROR to send); any other error is a correlation-id already
	// pending on replyTo.
	Request(id dest.Identity, m *message.Message, replyTo dest.Identity, corr string, timeout time.Duration, requester *delivery.Conn) error
	// Respond matches a SEND to replyTo with correlation-id corr: pending when it completed
	// a request, late when that request had timed out.
	Respond(replyTo dest.Identity, corr string) (pending, late bool)
	// CountDroppedResponse counts a response the router dropped.
	CountDroppedResponse(replyTo dest.Identity, late bool)
	// Own registers c as the owner of session id's temp-queues; Release ends that (the
	// connection closed) and drops them.
	Own(session string, c *delivery.Conn)
	Release(session string)
	// TempOwnerAlive reports whether session id owns live temp-queues.
	TempOwnerAlive(session string) bool
}

// Deliveries is the port to the per-connection subscription and acknowledgement
// bookkeeping (implemented by delivery.Registry). UNSUBSCRIBE, ACK, NACK and a closing
// connection reach the right pattern through the subscription's Owner and the delivery's
// Source, so they need no route per pattern.
type Deliveries interface {
	NewConn(w delivery.Writer) *delivery.Conn
	Unsubscribe(c *delivery.Conn, id string) error
	Ack(c *delivery.Conn, key, subID string, nack bool) error
	CloseConn(c *delivery.Conn)
}

// Destinations is the port that creates destinations (implemented by
// dispatch.Dispatcher): a queue, a temp-queue or an events-store log exists before anything
// is stored for it, so a refused creation leaves nothing behind. Safe for concurrent use.
type Destinations interface {
	// Exists reports whether id's destination exists.
	Exists(id dest.Identity) bool
	// Ensure makes id's destination exist; created reports a creation. Errors:
	// ErrDestinationLimit (the broker-wide bound), ErrGroupLimit (max-groups); nothing is
	// created on either.
	Ensure(id dest.Identity) (created bool, err error)
}

// Duplicates is duplicate detection (implemented by dedup.Cache): Claim reports whether a
// SEND's duplicate id repeats one whose SEND was accepted on the same destination within
// the window; when it does not, the id is claimed and settle (called exactly once, when the
// SEND is answered) keeps it (accepted) or forgets it (refused); a stored message's id is
// stored with it (message.DuplicateClaimed, durable.Log). A
// repeat whose first SEND is unanswered is an error (its Refusal names it): the repeat is
// refused, because the first SEND may still fail. Safe for concurrent use.
type Duplicates interface {
	Claim(id dest.Identity, dupID string) (dup bool, settle func(accepted bool), err error)
}

// DurableTopics is the port to durable topic subscriptions (implemented by
// topicsub.Registry; issue 26): a durable subscription (group, owner, name) is a queue fed by
// the fan-out of the events destinations its filter matches. owner is the CONNECT client-id
// (ActiveMQ, Artemis) or "" (RabbitMQ). Safe for concurrent use.
type DurableTopics interface {
	// AttachDurable returns the queue of the subscription, creating it (stored before it
	// returns) or moving it to filter and sel (the SUBSCRIBE's selector, nil for none: only
	// messages it selects enter the queue). Errors: ErrDurableSubscriptionLimit,
	// ErrDurableSubscriptionInUse (moving one that has consumers), a store error (its
	// Refusal names it).
	AttachDurable(group, owner, name string, filter dest.Destination, sel *selector.Selector) (queue dest.Identity, err error)
	// DeleteDurable removes the subscription and its queue. Errors:
	// ErrNoDurableSubscription, ErrDurableSubscriptionInUse, a store error.
	DeleteDurable(group, owner, name string) error
	// Feeds appends to dst, and returns, the queue of every subscription whose filter
	// matches the events destination id and whose selector (if any) selects m. Called on
	// every topic SEND: it must allocate nothing when it feeds no subscription.
	Feeds(id dest.Identity, m selector.Message, dst []dest.Identity) []dest.Identity
}

// Ports are the adapters a Router routes to. A nil pattern port makes the resolver refuse
// that pattern ("unsupported destination pattern").
type Ports struct {
	// Deliveries keeps subscriptions and unacknowledged deliveries (default: a
	// delivery.Registry without an egress counter).
	Deliveries Deliveries
	// Events is the events pattern (/topic/, bare destinations by default).
	Events Pattern
	// Queues is the queues pattern (/queue/).
	Queues Pattern
	// EventsStore is the events-store pattern (/events-store/).
	EventsStore Pattern
	// Requests is request/response (/command/, /query/).
	Requests Requests
	// TempQueues is the temp-queue pattern (/temp-queue/): publish refuses the queues of
	// closed connections; subscribe consumes like a queue.
	TempQueues Pattern
	// DurableTopics keeps durable topic subscriptions; nil refuses them with an ERROR
	// (cluster mode on an external NATS: "durable subscriptions unavailable").
	DurableTopics DurableTopics
	// Destinations creates queues, temp-queues and events-store logs under the broker's
	// and the connection's limits (the destination stage); nil applies no limit.
	Destinations Destinations
	// ExistingQueues answers whether a queue exists, for the destination spellings that
	// address an existing queue only (RabbitMQ's /amq/queue/<name>, dest.AddressesExisting):
	// a SEND or SUBSCRIBE to one that does not exist is the ERROR "no queue". nil creates
	// it on first use like /queue/ (cluster mode, where queues live in JetStream).
	ExistingQueues QueueExistence
}

// QueueExistence is the port that tells whether a queue exists (implemented by
// dispatch.Dispatcher's Exists). Safe for concurrent use.
type QueueExistence interface {
	// Exists reports whether id's destination exists.
	Exists(id dest.Identity) bool
}

// Clock is the time source (injectable for tests).
type Clock func() time.Time

// Persister is the durable-acceptance port (implemented by *durable.Log; in cluster mode by
// cluster.Persister, whose PersistAsync publishes to JetStream and whose wait returns after
// the PubAck). Persist commits m
// (fsync'd) and sets m.Sequence before m is shared; Forget deletes a persisted message whose
// admission was then refused.
//
// PersistAsync is Persist split in two: it orders m into the store and sets m.Sequence, and
// wait (called exactly once) returns once m is fsync'd, so a connection's consecutive SENDs
// share fsyncs.
//
// PersistAll commits a transaction's messages (ms[i] to ids[i]) as one atomic store batch
// with one commit and sets their Sequences: all are stored or none is.
type Persister interface {
	Persist(id dest.Identity, m *message.Message) error
	PersistAll(ids []dest.Identity, ms []*message.Message) error
	PersistAsync(id dest.Identity, m *message.Message) (wait func() error, err error)
	Forget(id dest.Identity, m *message.Message)
}

// LazyPersister is implemented by a Persister that can take a message without starting its
// commit: PersistLazy is PersistAsync, except that the commit starts only when wait is called
// (or with another message's commit). The store stage uses it for a queue SEND without a
// receipt, which is published before its commit: a consumer that acknowledges the message
// meanwhile spares its write (durable.Log over a store.LazyAppender).
type LazyPersister interface {
	PersistLazy(id dest.Identity, m *message.Message) (wait func() error, err error)
}

// QueueStorer is implemented by a Persister that is the only place a queue message lives
// (cluster mode: a queue is a subject of a JetStream stream, so a persistent:false SEND is
// published there too). When StoresEveryQueueSend is true the queue route's store stage
// takes every SEND, persistent or not, so a connection's persistent:false SENDs are
// pipelined like its persistent ones (issue 28) instead of published one at a time by the
// publish stage; each RECEIPT still follows its own message's store, in SEND order.
type QueueStorer interface {
	StoresEveryQueueSend() bool
}

// Syncer is implemented by a Persister whose acknowledgements (store deletes) are synced
// lazily: Sync returns once every acknowledgement so far is durable. The ACK and NACK
// stages call it before writing a RECEIPT (and COMMIT, for a transaction holding ACKs), so a
// RECEIPT for an acknowledgement means it survives a crash; acknowledgements without a
// receipt stay lazily synced.
type Syncer interface {
	Sync() error
}

// Refusal is implemented by Persister errors that say why a message was not stored: its
// text becomes the ERROR frame's message header ("store unavailable: no space left on
// device"). Any other Persister error reads "message not stored".
type Refusal interface {
	Refusal() string
}

// storeRefusal is the ERROR message header for a Persister error (see Refusal).
func storeRefusal(err error) string {
	var r Refusal
	if errors.As(err, &r) {
		return r.Refusal()
	}
	return "message not stored"
}
