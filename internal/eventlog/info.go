package eventlog

import (
	"math"
	"sort"

	"github.com/titan-broker/titan/internal/dest"
)

// ReaderInfo is one live events-store subscription as operators see it.
type ReaderInfo struct {
	// Identity is the log read.
	Identity dest.Identity
	// Session is the subscriber's connection (session id); Subscription its subscription id.
	Session, Subscription string
	// DurableName is the durable-name header ("" for a non-durable subscription).
	DurableName string
	// Delivered is the last sequence delivered; Position the last one acknowledged and saved
	// (durable subscriptions; otherwise the last delivered).
	Delivered, Position uint64
	// Pending counts delivered, unacknowledged sequences.
	Pending int
}

// Readers returns the live readers, sorted by log, then session and subscription id. Safe for
// concurrent use.
func (p *Pattern) Readers() []ReaderInfo {
	p.mu.Lock()
	all := make([]*reader, 0, len(p.readers))
	for _, ls := range p.readers {
		all = append(all, ls)
	}
	p.mu.Unlock()
	out := make([]ReaderInfo, 0, len(all))
	for _, ls := range all {
		ls.mu.Lock()
		ri := ReaderInfo{
			Identity: ls.id, Subscription: ls.sub.ID, DurableName: ls.sub.DurableName,
			Delivered: ls.lastDelivered, Position: ls.lastDelivered, Pending: len(ls.pending),
		}
		if ls.key != "" && ls.saved != math.MaxUint64 { // saved is from-1: wraps when from is 0
			ri.Position = ls.saved
		}
		if ls.key != "" && ls.saved == math.MaxUint64 {
			ri.Position = 0
		}
		ls.mu.Unlock()
		if w, ok := ls.sub.Conn.Writer().(interface{ ID() string }); ok {
			ri.Session = w.ID()
		}
		out = append(out, ri)
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.Identity.Destination() != b.Identity.Destination() {
			return a.Identity.Destination() < b.Identity.Destination()
		}
		if a.Session != b.Session {
			return a.Session < b.Session
		}
		return a.Subscription < b.Subscription
	})
	return out
}
