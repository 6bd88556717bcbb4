package cluster

import (
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
)

// A NATS subscription with a callback has its messages buffered by nats.go for that
// callback, up to pending limits (nats.DefaultSubPendingMsgsLimit messages and
// nats.DefaultSubPendingBytesLimit bytes); what arrives beyond them is dropped and counted
// (nats.Subscription.Dropped), and the first drop of each such episode is reported to the
// connection's error handler as nats.ErrSlowConsumer (an episode ends at the next message
// queued, so a subscription that stays behind is reported at nearly every drop). The node
// logs asynchronous errors at Warn — slow-consumer reports at most once per slowLogEvery —
// and hands every slow-consumer report to whoever registered the subscription with
// OnSlowConsumer, so that no message is dropped without a word (the events fan-out: a
// node that falls behind the cluster).

// slowLogEvery rate-limits the node's slow-consumer log line.
const slowLogEvery = 10 * time.Second

// slowHooks maps a *nats.Subscription to its OnSlowConsumer callback, and holds when the
// last slow-consumer line was logged.
type slowHooks struct {
	m       sync.Map
	lastLog atomic.Int64 // unix nanoseconds
}

// OnSlowConsumer registers fn to be called when nats.go reports that s dropped messages at
// its pending limits: at the first drop of each episode (see above; drops within one only
// raise s.Dropped). fn runs on nats.go's error-handler goroutine and must not block. remove
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
	if !errors.Is(err, nats.ErrSlowConsumer) {
		n.log.Warn("cluster: NATS error on a subscription", "subject", s.Subject, "err", err)
		return
	}
	now, last := time.Now().UnixNano(), n.slow.lastLog.Load()
	if now-last >= int64(slowLogEvery) && n.slow.lastLog.CompareAndSwap(last, now) {
		dropped, _ := s.Dropped()
		n.log.Warn("cluster: this node fell behind a NATS subscription, which dropped messages at its pending limits (logged at most every 10 s)",
			"subject", s.Subject, "dropped", dropped, "err", err)
	}
	if fn, ok := n.slow.m.Load(s); ok {
		fn.(func())()
	}
}
