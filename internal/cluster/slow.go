package cluster

import (
	"errors"
	"sync"

	"github.com/nats-io/nats.go"
)

// A NATS subscription with a callback has its messages buffered by nats.go for that
// callback, up to pending limits (nats.DefaultSubPendingMsgsLimit messages and
// nats.DefaultSubPendingBytesLimit bytes); what arrives beyond them is dropped and counted
// (nats.Subscription.Dropped), and the first drop of each such episode is reported to the
// connection's error handler as nats.ErrSlowConsumer. The node logs every asynchronous error
// at Warn and hands slow-consumer reports to whoever registered the subscription with
// OnSlowConsumer, so that no message is dropped without a word (the events fan-out: a
// node that falls behind the cluster).

// slowHooks maps a *nats.Subscription to its OnSlowConsumer callback.
type slowHooks struct{ m sync.Map }

// OnSlowConsumer registers fn to be called when nats.go reports that s dropped messages at
// its pending limits (once per episode: until s catches up, later drops only raise
// s.Dropped). fn runs on nats.go's error-handler goroutine and must not block. remove
// unregisters it; call it before or after s is unsubscribed. Safe for concurrent use.
func (n *Node) OnSlowConsumer(s *nats.Subscription, fn func()) (remove func()) {
	n.slow.m.Store(s, fn)
	return func() { n.slow.m.Delete(s) }
}

// asyncError is the node connection's nats.ErrorHandler.
func (n *Node) asyncError(_ *nats.Conn, s *nats.Subscription, err error) {
	if s == nil {
		n.log.Warn("cluster: NATS error", "err", err)
		return
	}
	dropped, _ := s.Dropped()
	n.log.Warn("cluster: NATS error on a subscription", "subject", s.Subject, "dropped", dropped, "err", err)
	if !errors.Is(err, nats.ErrSlowConsumer) {
		return
	}
	if fn, ok := n.slow.m.Load(s); ok {
		fn.(func())()
	}
}
