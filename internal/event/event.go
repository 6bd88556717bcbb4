// Package event is the events pattern (DESIGN §2, reference 000): fan-out to the
// subscriptions present now, nothing retained. Without fanout-mode a SEND is written
// straight to the matching subscriptions (reference 000's default handler); with it, or for
// a destination whose dispatcher queue an operator created, it goes through a bounded
// hand-off Queue drained by one consumer goroutine per identity.
//
// Subscriptions may use wildcards over the channel's segments (`*`, trailing `>`); a SEND
// never does. Routing is by exact (group, bare) index plus the channel filter.
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
	// Flow counts producer pauses and events dropped by policy (nil: a private Stats).
	Flow *flow.Stats
	// DropPolicy, when set, names the destinations whose slow-consumer-policy is DROP; nil
	// means none (every subscriber is flow-controlled).
	DropPolicy DropPolicy
	// Logger receives the rate-limited log of drops by policy (nil: discarded).
	Logger *slog.Logger
	// SlowConsumerTimeout is how long a client-ack subscription at its prefetch may keep
	// producers waiting for an acknowledgement before its connection is closed as a slow
	// consumer (0: never). See credit.go.
	SlowConsumerTimeout time.Duration
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

	dropLog atomic.Int64 // unix nanoseconds of the last drop-by-policy log line
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
	p := &Pattern{d: d, opts: o}
	p.subs.Store(&map[subsKey]*sublist.Sublist[*delivery.Subscription]{})
	d.Register(dest.PatternEvents, p, true) // operator-made queues and their state survive restarts
	return p
}

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
// the package doc). A wait for room under PolicyBlock ends with dispatch.ErrCanceled when
// cancel closes or the dispatcher closes. dropped reports a PolicyDrop discard. Errors:
// dispatch.ErrQueueFull, dispatch.ErrQueuePaused, dispatch.ErrCanceled.
func (p *Pattern) Publish(id dest.Identity, m *message.Message, cancel <-chan struct{}) (dropped bool, err error) {
	p.d.Published.Add(1)
	if !p.opts.FanoutMode {
		if explicit := p.queues.Load() > 0 && p.hasQueue(id); !explicit {
			if p.fanout(id, m, cancel) == 0 {
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
// and returns how many received it. A subscription over its connection's outbound limit
// still receives m (DESIGN §9); then the caller — the producer's read goroutine, or a
// fanout-mode queue's consumer — waits until every such connection is back at its low
// watermark or closed, or until cancel or the dispatcher's stop closes. Under
// slow-consumer-policy DROP the message is dropped for such a subscription instead, and
// counted.
func (p *Pattern) fanout(id dest.Identity, m *message.Message, cancel <-chan struct{}) int {
	sl := (*p.subs.Load())[key(id.Group, id.Bare)]
	if sl == nil {
		return 0
	}
	f := fan{p: p, id: id, m: m}
	sl.Match(id.Channel, f.deliver)
	for _, sub := range f.starved {
		f.awaitCredit(sub, cancel)
	}
	if len(f.waits) > 0 {
		p.opts.Flow.Wait(f.waits, cancel, p.d.Stop())
	}
	return f.n
}

// fan is one publication's fan-out state. It stays on the stack; waits is allocated only
// when a subscriber is congested.
type fan struct {
	p        *Pattern
	id       dest.Identity
	m        *message.Message
	n        int
	policy   int8              // 0 unknown, 1 pause producers, 2 drop
	waits    []<-chan struct{} // congested subscribers' resume channels
	lastWait <-chan struct{}
	starved  []*delivery.Subscription // client-ack subscriptions at their prefetch (credit.go)
}

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
	f.write(sub, true)
}

// write writes f.m to sub, recording a congested connection for the producer to wait on.
// With credit, a client-ack subscription at its prefetch is not written: it is dropped
// under slow-consumer-policy DROP, else it is starved (delivered by awaitCredit once it
// has credit).
func (f *fan) write(sub *delivery.Subscription, credit bool) {
	res, congested := sub.Conn.DeliverEvent(sub, f.m, f.policy == 2, credit)
	switch res {
	case delivery.EventNoCredit:
		if f.policy == 2 {
			f.drop(sub, true)
			return
		}
		f.starved = append(f.starved, sub)
		return
	case delivery.EventRefused:
		f.drop(sub, f.policy == 2)
		return
	}
	f.n++
	if congested != nil && congested != f.lastWait {
		f.lastWait = congested
		f.waits = append(f.waits, congested)
	}
}

// drop counts a message not delivered to sub: its connection is closing (or closed as a
// slow consumer), the producer's own wait was canceled, or (byPolicy) it is over its limit
// or at its prefetch under slow-consumer-policy DROP.
func (f *fan) drop(sub *delivery.Subscription, byPolicy bool) {
	sub.Dropped.Add(1)
	f.p.d.EventsDropped.Add(1)
	if !byPolicy {
		return
	}
	f.p.opts.Flow.Dropped.Add(1)
	now := time.Now().UnixNano()
	last := f.p.dropLog.Load()
	if now-last >= int64(dropLogEvery) && f.p.dropLog.CompareAndSwap(last, now) {
		f.p.opts.Logger.Warn("events dropped for a subscriber over its outbound limit (slow-consumer-policy DROP)",
			"destination", f.id.Channel, "group", f.id.Group, "subscription", sub.ID,
			"dropped_total", f.p.opts.Flow.Dropped.Load())
	}
}

// dropLogEvery rate-limits the drop-by-policy log line.
const dropLogEvery = 10 * time.Second

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
