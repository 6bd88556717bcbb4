// Package rpc is request/response (DESIGN §2, commands and queries) and the temp-queues
// replies go to. A requester SENDs to /command/<ch> or /query/<ch> with reply-to and
// correlation-id; exactly one responder subscribed to that group and channel receives it
// (round-robin). The responder SENDs its answer to the reply-to destination with the same
// correlation-id. When no responder is subscribed, or the timeout passes first, the broker
// itself answers on reply-to with executed:false and error:no responder or error:timeout,
// so a requester never waits in silence. A response that arrives after its timeout, or
// names no pending request, is dropped and counted.
//
// A temp-queue (/temp-queue/) is a queue owned by one connection (RabbitMQ temp-queue
// semantics): the pattern keeps who owns which, refuses SENDs to the queues of a closed
// connection, and has the queues pattern drop them when their owner goes.
//
// # Lifecycle
//
// Each pending request arms one timeout timer, owned by the Pattern: a response stops it,
// and Close stops every one, so no timeout fires (and publishes) after Close.
//
// # Concurrency
//
// Everything exported is safe for concurrent use. No lock of the pattern spans more than one
// request channel or one shard of pending requests (issue 32): a request channel's lock
// (its responders and round-robin cursor) is held while asking a responder's credit
// (delivery.Conn.mu), and a pending shard's lock nests nothing. Neither is held while
// delivering or publishing.
//
// # Bounds
//
// Pending requests are bounded per connection (Options.MaxPendingByClient) and for the
// pattern (Options.MaxPending) besides their timeout; a request over a bound is refused
// with a *PendingLimitError naming its configuration key. Every responder's credit is
// bounded by its prefetch: a client-ack responder's by its unacknowledged requests
// (delivery), an ack:auto responder's by the requests it was given that await their
// response or timeout (member); one without credit is skipped, and with none left the
// request is answered "no responder".
package rpc

import (
	"log/slog"
	"time"

	"github.com/titan-broker/titan/internal/clock"
	"github.com/titan-broker/titan/internal/delivery"
	"github.com/titan-broker/titan/internal/dest"
	"github.com/titan-broker/titan/internal/message"
	"github.com/titan-broker/titan/internal/router/refusal"
)

// Publisher publishes a message to an identity (the router's Deliver, for the broker's own
// executed:false answers, which may go to a topic, a queue or a temp-queue).
type Publisher interface {
	Publish(id dest.Identity, m *message.Message, cancel <-chan struct{}) (dropped bool, err error)
}

// TempQueues is the port to the queues that hold temp-queue messages (the queues pattern).
type TempQueues interface {
	Publisher
	// DropOwned deletes every temp-queue of the connection with session id.
	DropOwned(session string)
}

// Responders is the port that carries a request to a responder the pattern does not hold
// itself (cluster mode: a responder subscribed on any node, implemented by
// cluster.Requests). Offer hands m, a request to id whose response goes to replyTo with
// correlation-id corr, to exactly one responder, and reports whether one took it (false:
// none is subscribed or none has room, answered "no responder"). It is called without the
// pattern's lock, after the request's timeout is armed, so a response may complete the
// request before Offer returns. Safe for concurrent use.
type Responders interface {
	Offer(id dest.Identity, m *message.Message, replyTo dest.Identity, corr string, timeout time.Duration) bool
}

// Options configure a Pattern.
type Options struct {
	// Replies publishes the broker's executed:false answers. Required.
	Replies Publisher
	// TempQueues holds temp-queue messages. Required.
	TempQueues TempQueues
	// Responders, when set, carries every request to its responder (cluster mode); the
	// pattern's own Subscribe is then unused. nil: requests go to the responders subscribed
	// through Subscribe.
	Responders Responders
	// Clock tells the time and arms the request timeouts (default clock.Real).
	Clock clock.Clock
	// MessageID returns the message-id of each answer the broker makes itself (executed:false
	// on a timeout), so that it has the form of every other message-id
	// ("titan-<boot>-<n>"). Default: message.NewID("titan").
	MessageID func() string
	// Logger receives the pattern's events; nil discards them.
	Logger *slog.Logger
	// MaxPending bounds the requests awaiting a response in the whole pattern
	// (limits.max-pending-requests); a request over it is refused with a
	// *PendingLimitError. 0 means no bound.
	MaxPending int
	// MaxPendingByClient bounds the requests one connection has awaiting a response
	// (limits.max-pending-requests-by-client); 0 means no bound.
	MaxPendingByClient int
}

// Pattern is request/response. Create with New.
type Pattern struct {
	opts   Options
	log    *slog.Logger
	rpc    *rpcState
	timers clock.Callbacks // running timeout callbacks, waited for by Close

	brokerLimit, byClientLimit error // the refusals over MaxPending and MaxPendingByClient, made once
}

// New returns the request/response pattern.
func New(o Options) *Pattern {
	if o.Clock == nil {
		o.Clock = clock.Real
	}
	if o.MessageID == nil {
		o.MessageID = func() string { return message.NewID("titan") }
	}
	p := &Pattern{opts: o, log: o.Logger, rpc: newRPCState(),
		brokerLimit:   &PendingLimitError{Key: KeyMaxPending, Max: o.MaxPending},
		byClientLimit: &PendingLimitError{Key: KeyMaxPendingByClient, Max: o.MaxPendingByClient}}
	if p.log == nil {
		p.log = slog.New(slog.DiscardHandler)
	}
	return p
}

// Subscribe registers sub as a responder of its (group, pattern, channel). Errors:
// delivery.ErrDuplicateSubscription.
func (p *Pattern) Subscribe(sub *delivery.Subscription) error {
	sub.Owner = p
	if err := sub.Conn.Add(sub); err != nil {
		return err
	}
	id := sub.Identity()
	for {
		v, _ := p.rpc.channels.LoadOrStore(id, &channel{})
		ch := v.(*channel)
		ch.mu.Lock()
		if ch.dead { // its last responder just left: make a new one
			ch.mu.Unlock()
			continue
		}
		ch.subs = append(ch.subs[:len(ch.subs):len(ch.subs)], newMember(sub))
		ch.mu.Unlock()
		return nil
	}
}

// Detach implements delivery.Owner: sub stops responding. A request it received and did not
// answer times out.
func (p *Pattern) Detach(sub *delivery.Subscription, _ []delivery.Unacked) {
	id := sub.Identity()
	v, ok := p.rpc.channels.Load(id)
	if !ok {
		return
	}
	ch := v.(*channel)
	ch.mu.Lock()
	for i, s := range ch.subs {
		if s.sub == sub {
			ch.subs = append(ch.subs[:i:i], ch.subs[i+1:]...)
			ch.rr = 0
			break
		}
	}
	if len(ch.subs) == 0 && !ch.dead {
		ch.dead = true
		p.rpc.channels.CompareAndDelete(id, ch)
	}
	ch.mu.Unlock()
}

// Own registers c as the connection owning session id's temp-queues.
func (p *Pattern) Own(session string, c *delivery.Conn) { p.rpc.owners.Store(session, c) }

// Release forgets session id's ownership and deletes its temp-queues (its connection
// closed): pending replies are discarded.
func (p *Pattern) Release(session string) {
	p.rpc.owners.Delete(session)
	p.opts.TempQueues.DropOwned(session)
}

// TempOwnerAlive reports whether session id owns live temp-queues.
func (p *Pattern) TempOwnerAlive(session string) bool {
	_, ok := p.rpc.owners.Load(session)
	return ok
}

// Temp returns the publisher of temp-queue messages: a SEND to the temp-queue of a closed
// connection is refused with refusal.ErrNoQueue (the queue is gone for good and must not be
// recreated); others go to the queues pattern.
func (p *Pattern) Temp() Publisher { return tempPublisher{p} }

type tempPublisher struct{ p *Pattern }

func (t tempPublisher) Publish(id dest.Identity, m *message.Message, cancel <-chan struct{}) (bool, error) {
	if !t.p.TempOwnerAlive(tempOwner(id.Channel)) {
		return false, refusal.ErrNoQueue
	}
	return t.p.opts.TempQueues.Publish(id, m, cancel)
}

// Close stops every pending request's timer and waits for a timeout already running; later
// Requests fail with refusal.ErrCanceled. After Close returns no timeout fires.
// Idempotent.
func (p *Pattern) Close() {
	p.timers.Close()
	for i := range p.rpc.pending {
		sh := &p.rpc.pending[i]
		sh.mu.Lock()
		sh.closed = true
		for k, pr := range sh.pending {
			pr.timer.Stop()
			delete(sh.pending, k)
			pr.finish()
			p.release(pr.requester)
		}
		sh.mu.Unlock()
	}
}

// tempOwner returns the owning session id of a temp-queue channel ("<session>.<name>").
func tempOwner(channel string) string {
	for i := 0; i < len(channel); i++ {
		if channel[i] == '.' {
			return channel[:i]
		}
	}
	return channel
}
