// Package pull is the JetStream pull loop shared by the cluster's queues and events-store
// adapters (issue 28: one component, not one copy per pattern). A Loop pulls from one
// consumer only as many messages as its Handler has credit for, holds what it pulled until
// the handler takes it (in order), keeps explicitly acknowledged messages alive with +WPI
// while it holds them or a client does, and waits for a Kick when there is no credit. A
// loop over an ordered consumer (NewOrdered: a live events-store tail) reads instead
// through one Messages iterator that pulls up to MaxBatch ahead of the handler.
//
// # Concurrency
//
// Run is the loop's only goroutine and the only one touching what the loop holds, so the
// per-message path takes no lock; Kick and Stop are safe from any goroutine, and Held
// waits for Run to return.
package pull

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// MaxBatch bounds one pull request (messages).
const MaxBatch = 256

// Tunables of a Loop.
const (
	// fetchWait is how long one pull waits for messages on the server.
	fetchWait = time.Second
	// retryWait is the pause after a failed pull (no leader, no quorum).
	retryWait = 250 * time.Millisecond
	// orderedExpiry and orderedHeartbeat are an ordered loop's pull request lifetime and
	// idle heartbeat: an ordered consumer lives on its stream's leader only (R1, memory),
	// so the leader's crash removes it without a word to the reader, and the iterator
	// re-creates it from the next sequence once heartbeats are missed. With nats.go's
	// defaults (30 s expiry) a live tail stayed silent 9.4 s after its leader died, with
	// these 0.4 s (TestOrderedLoopFollowsALeaderCrash).
	orderedExpiry    = 2 * time.Second
	orderedHeartbeat = 500 * time.Millisecond
)

// Handler is the adapter side of a Loop (declared here, implemented by the queues and
// events-store adapters). Every method is called from the loop's goroutine.
type Handler interface {
	// Credit is how many messages the handler's subscriptions may take now.
	Credit() int
	// Deliver hands jm, the oldest held message, on: delivered, or settled without a
	// delivery (expired, undecodable, dead-lettered). It returns false when no
	// subscription can take it now; the loop then keeps jm first and waits for a Kick.
	Deliver(jm jetstream.Msg) bool
	// Done reports whether the loop should end (no subscription left). It is asked once
	// per round, before anything is delivered or pulled.
	Done() bool
	// InFlight appends the messages delivered to clients and not yet settled to dst (kept
	// alive with the held ones; nil for a consumer without acks).
	InFlight(dst []jetstream.Msg) []jetstream.Msg
}

// Loop is one consumer's pull loop (New; OnError is set before Run).
type Loop struct {
	cons jetstream.Consumer // pulled from; replaced by SetConsumer (loop's goroutine only)
	h    Handler
	// acked is true for an explicitly acknowledged consumer: held and in-flight messages
	// are kept alive with +WPI every keepAlive (cluster.KeepAlive).
	acked     bool
	keepAlive time.Duration

	// OnError is told of a failed pull, on the loop's goroutine (for example to bind a
	// deleted consumer anew with SetConsumer).
	OnError func(err error)

	// ordered: cons is an ordered consumer, read through one Messages iterator (it);
	// ctx is cancelled by Stop, ending a Next that waits (NewOrdered).
	ordered bool
	it      jetstream.MessagesContext
	ctx     context.Context
	cancel  context.CancelFunc

	kick chan struct{}
	stop chan struct{}
	done chan struct{}
	once sync.Once

	// held[head:] is what was pulled and not yet taken by the handler, oldest first; the
	// backing array is reused once drained. Loop's goroutine only (Held after Run returned).
	held []jetstream.Msg
	head int
	// alive is keepAliveAll's reused scratch list (loop's goroutine only).
	alive []jetstream.Msg
}

// New returns a loop pulling cons for h. acked: cons is explicitly acknowledged, so what
// the loop holds and what h has in flight is kept alive with +WPI every keepAlive.
func New(cons jetstream.Consumer, h Handler, acked bool, keepAlive time.Duration) *Loop {
	return &Loop{cons: cons, h: h, acked: acked, keepAlive: keepAlive,
		kick: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
}

// NewOrdered returns a loop reading the ordered consumer cons (no acks: nothing is kept
// alive) for h through one Messages iterator that keeps up to MaxBatch messages pulled
// ahead. nats.go's ordered Fetch re-creates the server-side consumer on every call (one
// JetStream API round trip per pull: issue 28's scenario g ran at a fifth of its rate);
// an iterator keeps one consumer and re-creates it only after a gap. Handler.Done is
// asked once per message or Kick; Stop ends a wait for the next message at once.
func NewOrdered(cons jetstream.Consumer, h Handler) *Loop {
	l := New(cons, h, false, time.Hour)
	l.ordered = true
	l.ctx, l.cancel = context.WithCancel(context.Background())
	return l
}

// SetConsumer replaces the consumer pulled from (loop's goroutine only: OnError).
func (l *Loop) SetConsumer(c jetstream.Consumer) { l.cons = c }

// Consumer returns the consumer pulled from (loop's goroutine only).
func (l *Loop) Consumer() jetstream.Consumer { return l.cons }

// Kick wakes the loop (credit or a subscription changed). Never blocks.
func (l *Loop) Kick() {
	select {
	case l.kick <- struct{}{}:
	default:
	}
}

// Stop ends the loop and waits for Run to return. Idempotent.
func (l *Loop) Stop() {
	l.once.Do(func() {
		close(l.stop)
		if l.cancel != nil {
			l.cancel()
		}
	})
	<-l.done
}

// Done is closed when Run returned.
func (l *Loop) Done() <-chan struct{} { return l.done }

// Held removes and returns what the loop pulled and nobody took, in pull order, to NAK
// them. It waits for Run to return (call it after Stop, or once Done is closed).
func (l *Loop) Held() []jetstream.Msg {
	<-l.done
	h := l.held[l.head:]
	l.held, l.head = nil, 0
	return h
}

// Run is the loop: deliver what is held, then pull as much as the handler has credit for;
// wait for a kick when it has none or holds something it could not deliver. It returns
// when the handler is Done or Stop was called.
func (l *Loop) Run() {
	defer close(l.done)
	if l.ordered {
		l.runOrdered()
		return
	}
	tick := time.NewTicker(l.keepAlive)
	defer tick.Stop()
	for {
		credit, ok := l.begin(tick.C)
		if !ok {
			return
		}
		if credit == 0 {
			continue
		}
		batch, err := l.cons.Fetch(min(credit, MaxBatch), jetstream.FetchMaxWait(fetchWait))
		if err != nil {
			if !l.failed(err) {
				return
			}
			continue
		}
		for m := range batch.Messages() {
			l.held = append(l.held, m)
			if l.head == len(l.held)-1 {
				l.deliverHeld() // m is first: hand it on
				continue
			}
			// Behind a message the handler could not take, the head is tried again
			// only once something changed (a Kick), not once per arrival.
			select {
			case <-l.kick:
				l.deliverHeld()
			default:
			}
		}
		if err := batch.Error(); err != nil && l.OnError != nil {
			l.OnError(err)
		}
		select {
		case <-tick.C:
			l.keepAliveAll()
		default:
		}
	}
}

// deliverHeld hands held messages to the handler in order while it takes them; once all
// are taken the backing array is reused for the next pull.
func (l *Loop) deliverHeld() {
	for l.head < len(l.held) {
		if !l.h.Deliver(l.held[l.head]) {
			return
		}
		l.held[l.head] = nil
		l.head++
	}
	l.held, l.head = l.held[:0], 0
}

// keepAliveAll sends +WPI for every held and in-flight message so that AckWait never
// redelivers a message this node still holds or a live client has (issue 27: held ones
// were not kept alive, so a subscriber whose outbound stayed full past AckWait had them
// redelivered elsewhere while this node still held its copy).
func (l *Loop) keepAliveAll() {
	if !l.acked {
		return
	}
	l.alive = l.h.InFlight(append(l.alive[:0], l.held[l.head:]...))
	for _, m := range l.alive {
		_ = m.InProgress()
	}
	clear(l.alive) // hold no settled message past this call
}

// runOrdered is Run for NewOrdered: one message per round from the iterator, handed on at
// once; with no credit, or holding a message the handler could not take, it waits for a
// Kick without reading.
func (l *Loop) runOrdered() {
	defer func() {
		if l.it != nil {
			l.it.Stop()
		}
	}()
	for {
		credit, ok := l.begin(nil) // nothing to keep alive: no acks
		if !ok {
			return
		}
		if credit == 0 {
			continue
		}
		if l.it == nil {
			it, err := l.cons.Messages(jetstream.PullMaxMessages(MaxBatch),
				jetstream.PullExpiry(orderedExpiry), jetstream.PullHeartbeat(orderedHeartbeat))
			if err != nil {
				if !l.failed(err) {
					return
				}
				continue
			}
			l.it = it
		}
		m, err := l.it.Next(jetstream.NextContext(l.ctx))
		if err != nil {
			if l.ctx.Err() != nil {
				return
			}
			if errors.Is(err, jetstream.ErrMsgIteratorClosed) {
				l.it = nil // a new iterator at the next round
			}
			if !l.failed(err) {
				return
			}
			continue
		}
		l.held = append(l.held, m)
		l.deliverHeld()
	}
}

// begin is the start of a round of either loop: ok is false when the loop is to end (Stop,
// or the handler is Done); otherwise it hands held messages on and returns the handler's
// credit, or 0 after waiting for a Kick (or a tick, which keeps what is held alive) when
// it has none or holds a message the handler could not take.
func (l *Loop) begin(tick <-chan time.Time) (credit int, ok bool) {
	select {
	case <-l.stop:
		return 0, false
	default:
	}
	if l.h.Done() {
		return 0, false
	}
	l.deliverHeld()
	credit = l.h.Credit()
	if credit > 0 && l.head == len(l.held) {
		return credit, true
	}
	select {
	case <-l.stop:
		return 0, false
	case <-l.kick:
	case <-tick:
		l.keepAliveAll()
	}
	return 0, true
}

// failed tells OnError of err and waits retryWait or a Kick; false when stopped meanwhile.
func (l *Loop) failed(err error) bool {
	if l.OnError != nil {
		l.OnError(err)
	}
	select {
	case <-l.stop:
		return false
	case <-l.kick:
	case <-time.After(retryWait):
	}
	return true
}
