// Package event is the events pattern (DESIGN §2, reference 000): fan-out to the
// subscriptions present now, nothing retained. Without fanout-mode a SEND is written
// straight to the matching subscriptions (reference 000's default handler); with it, or for
// a destination whose dispatcher queue an operator created, it goes through a bounded
// hand-off Queue drained by one consumer goroutine per identity.
//
// Subscriptions may use wildcards over the channel's segments (`*`, trailing `>`); a SEND
// never does. Routing is by exact (group, bare) index plus the channel filter; a
// subscription's own filters (fan.deliver) then decide per message.
//
// # Slow subscribers
//
// The fan-out never waits for a subscriber (issue 30): each one's connection buffers what
// it has not read, a client-ack subscription at its prefetch has its messages held, and the
// destination's slow-consumer policy (CLOSE or DROP) applies to that subscriber alone
// (delivery.Conn.DeliverEvent). Producers and the other subscribers go on.
//
// # Concurrency
//
// Everything exported is safe for concurrent use. Pattern.mu serializes changes of the
// subscription indexes (a publication reads them without it) and is never held while taking
// a Queue's or a delivery.Conn's lock.
package event

import (
	"log/slog"
	"maps"
	"sync"
	"sync/atomic"
	"time"

	"github.com/titan-broker/titan/internal/address"
	"github.com/titan-broker/titan/internal/delivery"
	"github.com/titan-broker/titan/internal/dest"
	"github.com/titan-broker/titan/internal/dispatch"
	"github.com/titan-broker/titan/internal/flow"
	"github.com/titan-broker/titan/internal/message"
	"github.com/titan-broker/titan/internal/sublist"
)

// Spawner starts a tracked goroutine; Go returns false once its owner is shutting down.
type Spawner interface {
	Go(name string, fn func()) bool
}

// Options configure a Pattern.
type Options struct {
	// FanoutMode routes every SEND through a dispatcher Queue and its consumer (reference
	// 000's fanout-mode); off, a SEND is written straight to the subscriptions unless an
	// operator created a queue for its destination.
	FanoutMode bool
	// Spawner starts the queues' consumer goroutines (default: plain go).
	Spawner Spawner
	// Flow counts events dropped by policy (nil: a private Stats). The fan-out pauses no
	// producer: producers pause only at the broker-wide heap watermarks.
	Flow *flow.Stats
	// DropPolicy, when set, names the destinations whose slow-consumer-policy is DROP; nil
	// means none (every subscriber is flow-controlled).
	DropPolicy DropPolicy
	// Logger receives the rate-limited log of drops by policy (nil: discarded).
	Logger *slog.Logger
	// SlowConsumerTimeout is how long messages may stay held for a client-ack subscription
	// at its prefetch without an acknowledgement before its connection is closed as a slow
	// consumer (0: never; delivery.EventPolicy.SlowAfter).
	SlowConsumerTimeout time.Duration
	// MaxBufferBytes bounds what one subscriber connection may have queued or held for its
	// events subscriptions before it is closed as a slow consumer at once
	// (flow-control.subscriber.max-buffer-bytes; 0: delivery.DefaultEventMaxBytes).
	MaxBufferBytes int64
	// ConsumerLinger is how long a fanout-mode queue's consumer goroutine waits for more
	// messages once its queue is empty before it ends (default DefaultConsumerLinger).
	ConsumerLinger time.Duration
}

// DropPolicy says which events destinations drop messages for a subscriber over its
// outbound limit instead of pausing their producers (address setting
// slow-consumer-policy: DROP). Called once per publication that has a subscriber; must be
// fast and safe for concurrent use.
type DropPolicy interface {
	DropWhenFull(id dest.Identity) bool
}

// Pattern is the events pattern: the subscription index, direct fan-out and the factory of
// fanout-mode queues. Create with New.
type Pattern struct {
	d    *dispatch.Dispatcher
	opts Options

	mu sync.Mutex // serializes changes of subs
	// subs holds the subscription indexes by key(group, bare), copied on write under mu
	// (a new group's first subscription, its last one leaving), so that a publication reads
	// it without a lock.
	subs atomic.Pointer[map[subsKey]*sublist.Sublist[*delivery.Subscription]]
	// queues counts the fanout-mode queues this pattern made that were not purged: while it
	// is 0, a direct-mode publication need not look for an operator-made queue.
	queues atomic.Int64

	// drops accounts for deliveries not made: the dispatcher's EventsDropped, Flow.Dropped
	// and the rate-limited log line (Drops).
	drops *delivery.EventDrops
}

// New returns the events pattern over d and registers its queue factory for
// dest.PatternEvents.
func New(d *dispatch.Dispatcher, o Options) *Pattern {
	if o.Flow == nil {
		o.Flow = new(flow.Stats)
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.ConsumerLinger <= 0 {
		o.ConsumerLinger = DefaultConsumerLinger
	}
	p := &Pattern{d: d, opts: o, drops: &delivery.EventDrops{Total: &d.EventsDropped, ByPolicy: &o.Flow.Dropped, Logger: o.Logger}}
	p.subs.Store(&map[subsKey]*sublist.Sublist[*delivery.Subscription]{})
	d.Register(dest.PatternEvents, p, true) // operator-made queues and their state survive restarts
	return p
}

// Drops returns the accounting of the events this pattern did not deliver, for a cluster
// node's events fan-out to share (one counter set and one rate-limited log line per
// broker).
func (p *Pattern) Drops() *delivery.EventDrops { return p.drops }

// key keys the subscription indexes: one per group, and within a group one for prefixed
// (/topic/...) and one for bare destinations, which are different identities.
func key(group string, bare bool) subsKey { return subsKey{group, bare} }

type subsKey struct {
	group string
	bare  bool
}

func (p *Pattern) goroutine(name string, fn func()) bool {
	if p.opts.Spawner == nil {
		go fn()
		return true
	}
	return p.opts.Spawner.Go(name, fn)
}

// Publish fans m out to id's subscriptions, directly or through id's dispatcher queue (see
// the package doc). The fan-out never waits for a subscriber; a wait for room in a
// fanout-mode queue under PolicyBlock ends with dispatch.ErrCanceled when
// cancel closes or the dispatcher closes. dropped reports a PolicyDrop discard. Errors:
// dispatch.ErrQueueFull, dispatch.ErrQueuePaused, dispatch.ErrCanceled.
func (p *Pattern) Publish(id dest.Identity, m *message.Message, cancel <-chan struct{}) (dropped bool, err error) {
	p.d.Published.Add(1)
	if !p.opts.FanoutMode {
		if explicit := p.queues.Load() > 0 && p.hasQueue(id); !explicit {
			if p.fanout(id, m) == 0 {
				p.d.EventsNoSub.Add(1)
			}
			return false, nil
		}
	}
	for range 3 {
		q, err := p.d.Get(id)
		if err != nil {
			return false, err
		}
		dropped, err = q.(*Queue).enqueue(m, dispatch.Wait{Cancel: cancel, Stop: p.d.Stop()})
		if err != dispatch.ErrQueueDeleted {
			return dropped, err
		}
	}
	return false, dispatch.ErrQueueDeleted
}

// fanout writes m to every subscription of id's group whose filter matches id's channel,
// and returns how many took it (written or held for credit). It never waits for a
// subscriber (issue 30): each one's own bounded buffer absorbs what it has not read yet, and
// the slow-consumer policy applies to it alone (delivery.Conn.DeliverEvent) — the caller,
// the producer's read goroutine or a fanout-mode queue's consumer, goes on at once. A
// message not delivered to a subscription is counted as dropped; under
// slow-consumer-policy DROP also by policy.
func (p *Pattern) fanout(id dest.Identity, m *message.Message) int {
	sl := (*p.subs.Load())[key(id.Group, id.Bare)]
	if sl == nil {
		return 0
	}
	f := fan{p: p, id: id, m: m}
	sl.Match(id.Channel, f.deliver)
	return f.n
}

// fan is one publication's fan-out state. It stays on the stack.
type fan struct {
	p      *Pattern
	id     dest.Identity
	m      *message.Message
	n      int
	policy int8 // 0 unknown, 1 close (CLOSE/BLOCK), 2 drop
}

// deliver is the per-subscription step of the fan-out: the subscription's filters (today
// Allow, the authorization of a wildcard subscription's concrete channel) decide whether
// it gets m at all, then m is written.
func (f *fan) deliver(sub *delivery.Subscription) {
	if sub.Allow != nil && !sub.Allow(f.id.Channel) {
		return
	}
	if !sub.Selects(f.m) {
		return // not selected by its JMS selector: skipped, not dropped
	}
	if f.policy == 0 {
		f.policy = 1
		if dp := f.p.opts.DropPolicy; dp != nil && dp.DropWhenFull(f.id) {
			f.policy = 2
		}
	}
	f.write(sub)
}

// write delivers f.m to sub under the destination's slow-consumer policy; what it does not
// deliver is accounted for by the pattern's EventDrops.
func (f *fan) write(sub *delivery.Subscription) {
	pol := delivery.EventPolicy{Drop: f.policy == 2, MaxBytes: f.p.opts.MaxBufferBytes, SlowAfter: f.p.opts.SlowConsumerTimeout}
	if f.p.drops.Note(sub, sub.Conn.DeliverEvent(sub, f.m, pol), f.m.Destination, f.id.Group) {
		f.n++
	}
}

// HonoursSelectors implements router.Selecting: a subscription's selector filters the
// fan-out (a message it does not select is skipped for it, not counted as dropped).
func (p *Pattern) HonoursSelectors() bool { return true }

// Subscribe registers sub (validated: pattern events, wildcards allowed) on its connection
// and in the index. Errors: delivery.ErrDuplicateSubscription.
func (p *Pattern) Subscribe(sub *delivery.Subscription) error {
	sub.Owner = p
	if err := sub.Conn.Add(sub); err != nil {
		return err
	}
	k := key(sub.Group, sub.Dest.Bare)
	p.mu.Lock()
	subs := *p.subs.Load()
	sl := subs[k]
	if sl == nil {
		sl = sublist.New[*delivery.Subscription]()
		next := maps.Clone(subs)
		next[k] = sl
		p.subs.Store(&next)
	}
	sl.Insert(sub.Dest.Channel, sub)
	p.mu.Unlock()
	return nil
}

// hasQueue reports whether id has a dispatcher queue (an operator made one).
func (p *Pattern) hasQueue(id dest.Identity) bool {
	_, ok := p.d.Lookup(id)
	return ok
}

// Detach implements delivery.Owner: sub leaves the index (a group's index lives only while
// it has subscriptions). Events retain nothing, so unacked deliveries are not redelivered.
func (p *Pattern) Detach(sub *delivery.Subscription, _ []delivery.Unacked) {
	k := key(sub.Group, sub.Dest.Bare)
	p.mu.Lock()
	subs := *p.subs.Load()
	if sl := subs[k]; sl != nil {
		sl.Remove(sub.Dest.Channel, sub)
		if sl.Count() == 0 {
			next := maps.Clone(subs)
			delete(next, k)
			p.subs.Store(&next)
		}
	}
	p.mu.Unlock()
}

// NewQueue implements dispatch.Factory: the fanout-mode hand-off queue of id. A queue
// created without a count or byte bound gets address.DefaultEventsCapacity.
func (p *Pattern) NewQueue(id dest.Identity, s address.Settings) dispatch.Queue {
	if s.Capacity == 0 && s.MaxPendingBytes == 0 {
		s.Capacity = address.DefaultEventsCapacity
	}
	p.queues.Add(1)
	return &Queue{id: id, p: p, settings: s, space: make(chan struct{}), wake: make(chan struct{}, 1)}
}
