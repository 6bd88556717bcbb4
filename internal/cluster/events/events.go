// Package events is the events pattern in cluster mode: core NATS carries what crosses
// nodes, nothing is stored.
package events

import (
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/titan-broker/titan/internal/cluster"
	"github.com/titan-broker/titan/internal/delivery"
	"github.com/titan-broker/titan/internal/dest"
	"github.com/titan-broker/titan/internal/message"
)

// Pattern is the events pattern in cluster mode: a SEND is one core NATS publish on its
// subject (nothing stored, as events retain nothing). Interest is per node, not per client
// (issue 28), as the single node's sublist: the first local SUBSCRIBE to a (group, filter)
// makes one NATS subscription on the filter's subject, every later one with the same filter
// joins it, and each message that subscription receives is decoded once and fanned out to
// the local subscriptions; the last one to leave ends it. So fan-out crosses nodes with
// the same `*`/`>` grammar, groups stay separate namespaces (the group is a subject
// token), and a node pays one NATS subscription (and one nats.go goroutine) per distinct
// filter, whatever its number of subscribers. Order is FIFO per publishing node (NATS
// orders per connection); see README "Running a cluster".
type Pattern struct {
	nc   *nats.Conn
	node *cluster.Node
	opts Options

	mu       sync.Mutex                           // guards interest and subs
	interest map[string]*interest                 // by subject; guarded by mu
	subs     map[*delivery.Subscription]*interest // guarded by mu

	// Published counts SENDs published; Dropped counts deliveries not made (a connection
	// closing or closed as a slow consumer, or slow-consumer-policy DROP); Undecodable counts
	// payloads that were not a Titan message record.
	Published, Dropped, Undecodable atomic.Uint64
	// Interests counts the NATS subscriptions this node holds for events (one per
	// distinct (group, filter) subscribed here).
	Interests atomic.Int64
}

// interest is this node's NATS subscription on one subject and the local subscriptions it
// fans out to.
type interest struct {
	subject string
	ns      *nats.Subscription
	unhook  func() // ends the node's OnSlowConsumer registration of ns
	// lossy is set once nats.go reported ns a slow consumer (it dropped messages at its
	// pending limits); from then on every fan-out compares ns.Dropped with lost.
	lossy  atomic.Bool
	lostMu sync.Mutex // guards lost: noteLost runs on the NATS callback's goroutine and on nats.go's error handler's
	lost   uint64     // ns.Dropped already accounted to the local subscriptions
	// local is the fan-out list, replaced whole (copy on write, under Pattern.mu) so the
	// NATS callback reads it without a lock.
	local atomic.Pointer[[]*delivery.Subscription]
}

// Options is how a node treats a subscriber that cannot take an event now: the single
// node's rules (package event, delivery.DeliverEvent), because a node cannot pause a
// producer on another node. The zero value is slow-consumer-policy CLOSE everywhere with
// the default bounds, nothing counted beyond Pattern's own counters, nothing logged.
type Options struct {
	// DropPolicy, when set, names the destinations whose slow-consumer-policy is DROP
	// (config.Resolver); nil means none.
	DropPolicy interface{ DropWhenFull(id dest.Identity) bool }
	// SlowConsumerTimeout and MaxBufferBytes are delivery.EventPolicy's SlowAfter and
	// MaxBytes (flow-control.subscriber.slow-consumer-timeout and max-buffer-bytes).
	SlowConsumerTimeout time.Duration
	MaxBufferBytes      int64
	// Drops accounts for the deliveries not made, beyond Pattern.Dropped: the broker passes
	// its single-node events pattern's (titan_events_dropped_total,
	// titan_events_dropped_by_policy_total, the rate-limited log line). nil: nothing beyond
	// the subscriptions' and Pattern's counters.
	Drops *delivery.EventDrops
}

// New returns the events adapter over n's connection.
func New(n *cluster.Node, opts Options) *Pattern {
	if opts.Drops == nil {
		opts.Drops = &delivery.EventDrops{}
	}
	return &Pattern{nc: n.Conn(), node: n, opts: opts, interest: make(map[string]*interest), subs: make(map[*delivery.Subscription]*interest)}
}

// Publish sends m to id's subject. It never blocks on subscribers (no cluster-wide
// back-pressure exists for core NATS); dropped is always false. Errors: the NATS
// connection's (closed, payload too large).
func (e *Pattern) Publish(id dest.Identity, m *message.Message, _ <-chan struct{}) (dropped bool, err error) {
	if err := e.nc.Publish(cluster.Subject(id), message.Encode(nil, m)); err != nil {
		return false, err
	}
	e.Published.Add(1)
	return false, nil
}

// HonoursSelectors implements router.Selecting: a subscription's selector filters what
// the node delivers to it.
func (e *Pattern) HonoursSelectors() bool { return true }

// Subscribe registers sub on its connection and adds it to this node's interest in its
// filter's subject (made by the first local subscription to it). A message is delivered
// when the subscription has credit and its Allow (authorization) accepts the concrete
// channel; otherwise it is counted as dropped or skipped. Errors:
// delivery.ErrDuplicateSubscription, the NATS connection's.
func (e *Pattern) Subscribe(sub *delivery.Subscription) error {
	sub.Owner = e
	if err := sub.Conn.Add(sub); err != nil {
		return err
	}
	subject, _ := cluster.FilterSubject(sub.Identity())
	e.mu.Lock()
	defer e.mu.Unlock()
	in := e.interest[subject]
	if in == nil {
		in = &interest{subject: subject}
		in.local.Store(&[]*delivery.Subscription{})
		ns, err := e.nc.Subscribe(subject, func(msg *nats.Msg) { e.fanOut(in, msg) })
		if err == nil && pendingLimits != [2]int{nats.DefaultSubPendingMsgsLimit, nats.DefaultSubPendingBytesLimit} {
			err = ns.SetPendingLimits(pendingLimits[0], pendingLimits[1])
		}
		if err != nil {
			if ns != nil {
				_ = ns.Unsubscribe()
			}
			sub.Conn.Remove(sub)
			return err
		}
		in.ns = ns
		in.unhook = e.node.OnSlowConsumer(ns, func() {
			in.lossy.Store(true)
			// Now too: the drops may end a burst, with no event after them to account them.
			// If a tally is running (the fan-out's, so in.lossy was already set), the events
			// that filled the queue when these were dropped (the pending limit) are still to
			// be fanned out, each tallying after it: skip rather than wait (reports can come
			// at every drop).
			if in.lostMu.TryLock() {
				e.noteLostLocked(in, *in.local.Load())
				in.lostMu.Unlock()
			}
		})
		e.interest[subject] = in
		e.Interests.Add(1)
	}
	old := *in.local.Load()
	next := make([]*delivery.Subscription, len(old), len(old)+1)
	copy(next, old)
	next = append(next, sub)
	in.local.Store(&next)
	e.subs[sub] = in
	return nil
}

// fanOut delivers one message of in's subject to its local subscriptions (the NATS
// subscription's goroutine).
func (e *Pattern) fanOut(in *interest, msg *nats.Msg) {
	local := *in.local.Load()
	if len(local) == 0 {
		return
	}
	if in.lossy.Load() {
		e.noteLost(in, local)
	}
	m, err := message.Decode(msg.Data)
	if err != nil {
		e.Undecodable.Add(1)
		return
	}
	var d dest.Destination
	parsed, bad := false, false
	var pol delivery.EventPolicy // m's slow-consumer policy, looked up for its first subscriber
	looked := false
	for _, sub := range local {
		// A '#' filter's subject is wider than the filter (cluster.FilterSubject): its
		// channels are checked here.
		hash := sub.Dest.Wildcard && hasHash(sub.Dest.Channel)
		if sub.Allow != nil || hash {
			if !parsed {
				d, err = dest.Parse(m.Destination, dest.PatternEvents)
				parsed, bad = true, err != nil
			}
			if bad || d.Bare != sub.Dest.Bare {
				continue
			}
			if hash && !dest.Match(sub.Dest.Channel, d.Channel) {
				continue
			}
			if sub.Allow != nil && !sub.Allow(d.Channel) {
				continue
			}
		}
		if !sub.Selects(m) {
			continue // not selected by its JMS selector: skipped, not dropped
		}
		if !looked {
			pol, looked = delivery.EventPolicy{Drop: e.dropWhenFull(m), MaxBytes: e.opts.MaxBufferBytes, SlowAfter: e.opts.SlowConsumerTimeout}, true
		}
		if !e.opts.Drops.Note(sub, sub.Conn.DeliverEvent(sub, m, pol), m.Destination, m.Group) {
			e.Dropped.Add(1)
		}
	}
}

// pendingLimits are the pending limits (messages, bytes) of the node's NATS subscriptions
// for events: nats.go's defaults. Tests lower them.
var pendingLimits = [2]int{nats.DefaultSubPendingMsgsLimit, nats.DefaultSubPendingBytesLimit}

// noteLost accounts for the events nats.go dropped for in's subscription since the last
// call (its pending limits were reached: this node fell behind the cluster, see
// cluster.Node.OnSlowConsumer). Called by the fan-out for every event once the subscription
// was reported slow, and by the report itself (its handler may run after the last event of
// a burst was fanned out); safe for concurrent use, never blocks beyond in.lostMu.
//
// Those events were never seen, so each local subscription takes them all as its own, even
// one whose selector would have skipped them:
//   - under slow-consumer-policy DROP they are counted dropped by policy;
//   - under CLOSE its connection is closed as a slow consumer with an ERROR naming how many
//     it missed (delivery.LoseEvents).
//
// The policy is looked up for the subscription's destination; for a wildcard subscription,
// for its filter as written, so it is DROP only when a setting matching the filter itself
// says DROP (the lost events' channels are unknown: when in doubt, the subscriber is told).
// Events queued before the first drop are still delivered before the close. Until the first
// report sets in.lossy, the fan-out does not look, so events after the gap may be written
// before the ERROR when the report lags behind the fan-out of everything queued before the
// gap (with nats.go's default limits, 512 Ki events).
func (e *Pattern) noteLost(in *interest, local []*delivery.Subscription) {
	in.lostMu.Lock()
	e.noteLostLocked(in, local)
	in.lostMu.Unlock()
}

// noteLostLocked is noteLost with in.lostMu held.
func (e *Pattern) noteLostLocked(in *interest, local []*delivery.Subscription) {
	dropped, err := in.ns.Dropped()
	if err != nil || uint64(dropped) <= in.lost {
		return
	}
	n := uint64(dropped) - in.lost
	in.lost = uint64(dropped)
	for _, sub := range local {
		where := sub.Dest.String()
		pol := delivery.EventPolicy{Drop: e.opts.DropPolicy != nil && e.opts.DropPolicy.DropWhenFull(sub.Identity())}
		detail := strconv.FormatUint(n, 10) + " events for " + where +
			" were dropped before delivery: this node fell behind the cluster (its NATS subscription's pending limits)"
		e.opts.Drops.NoteLost(sub, sub.Conn.LoseEvents(sub, pol, detail), n, where, sub.Group)
		e.Dropped.Add(n)
	}
}

// dropWhenFull reports whether m's destination has slow-consumer-policy DROP
// (Options.DropPolicy).
func (e *Pattern) dropWhenFull(m *message.Message) bool {
	if e.opts.DropPolicy == nil {
		return false
	}
	d, err := dest.Parse(m.Destination, dest.PatternEvents)
	return err == nil && e.opts.DropPolicy.DropWhenFull(dest.Identity{Group: m.Group, Pattern: dest.PatternEvents, Channel: d.Channel, Bare: d.Bare})
}

// Detach implements delivery.Owner: sub leaves its interest; the last one to leave ends
// the NATS subscription. Events are not redelivered.
func (e *Pattern) Detach(sub *delivery.Subscription, _ []delivery.Unacked) {
	e.mu.Lock()
	in := e.subs[sub]
	delete(e.subs, sub)
	var end *nats.Subscription
	if in != nil {
		old := *in.local.Load()
		next := make([]*delivery.Subscription, 0, len(old))
		for _, s := range old {
			if s != sub {
				next = append(next, s)
			}
		}
		in.local.Store(&next)
		if len(next) == 0 {
			delete(e.interest, in.subject)
			e.Interests.Add(-1)
			end = in.ns
			in.unhook()
		}
	}
	e.mu.Unlock()
	if end != nil {
		_ = end.Unsubscribe()
	}
}

// Subscriptions returns the number of local events subscriptions.
func (e *Pattern) Subscriptions() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return len(e.subs)
}

// hasHash reports whether filter has a '#' token.
func hasHash(filter string) bool {
	for tok := range strings.SplitSeq(filter, ".") {
		if tok == "#" {
			return true
		}
	}
	return false
}
