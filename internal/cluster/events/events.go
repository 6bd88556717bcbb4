// Package events is the events pattern in cluster mode: core NATS carries what crosses
// nodes, nothing is stored.
package events

import (
	"sync"
	"sync/atomic"

	"github.com/nats-io/nats.go"

	"github.com/titan-broker/titan/internal/cluster"
	"github.com/titan-broker/titan/internal/delivery"
	"github.com/titan-broker/titan/internal/dest"
	"github.com/titan-broker/titan/internal/message"
)

// Pattern is the events pattern in cluster mode: a SEND is one core NATS publish on its
// subject (nothing stored, as events retain nothing), and every SUBSCRIBE is one NATS
// subscription on its filter's subject, so fan-out crosses nodes with the same `*`/`>`
// grammar and groups stay separate namespaces (the group is a subject token). Order is
// FIFO per publishing node (NATS orders per connection); see README "Running a cluster".
type Pattern struct {
	nc *nats.Conn

	mu   sync.Mutex // guards subs
	subs map[*delivery.Subscription]*nats.Subscription

	// Published counts SENDs published; Dropped counts deliveries a subscription had no
	// room for; Undecodable counts payloads that were not a Titan message record.
	Published, Dropped, Undecodable atomic.Uint64
}

// New returns the events adapter over n's connection.
func New(n *cluster.Node) *Pattern {
	return &Pattern{nc: n.Conn(), subs: make(map[*delivery.Subscription]*nats.Subscription)}
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

// Subscribe registers sub on its connection and subscribes to its filter's subject. A
// message is delivered when the subscription has credit and its Allow (authorization)
// accepts the concrete channel; otherwise it is counted as dropped or skipped. Errors:
// delivery.ErrDuplicateSubscription, the NATS connection's.
func (e *Pattern) Subscribe(sub *delivery.Subscription) error {
	sub.Owner = e
	if err := sub.Conn.Add(sub); err != nil {
		return err
	}
	bare := sub.Dest.Bare
	e.mu.Lock()
	defer e.mu.Unlock()
	ns, err := e.nc.Subscribe(cluster.Subject(sub.Identity()), func(msg *nats.Msg) {
		m, err := message.Decode(msg.Data)
		if err != nil {
			e.Undecodable.Add(1)
			return
		}
		if sub.Allow != nil {
			def := dest.PatternEvents
			d, err := dest.Parse(m.Destination, def)
			if err != nil || d.Bare != bare || !sub.Allow(d.Channel) {
				return
			}
		}
		if !sub.HasCredit() || !sub.Conn.Deliver(sub, m, nil, 0, 1) {
			sub.Dropped.Add(1)
			e.Dropped.Add(1)
		}
	})
	if err != nil {
		sub.Conn.Remove(sub)
		return err
	}
	e.subs[sub] = ns
	return nil
}

// Detach implements delivery.Owner: the NATS subscription ends. Events are not
// redelivered.
func (e *Pattern) Detach(sub *delivery.Subscription, _ []delivery.Unacked) {
	e.mu.Lock()
	ns := e.subs[sub]
	delete(e.subs, sub)
	e.mu.Unlock()
	if ns != nil {
		_ = ns.Unsubscribe()
	}
}

// Subscriptions returns the number of local events subscriptions.
func (e *Pattern) Subscriptions() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return len(e.subs)
}
