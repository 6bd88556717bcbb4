package delivery

import (
	"log/slog"
	"sync/atomic"
	"time"
)

// EventDrops accounts for the events DeliverEvent did not deliver, the same way for every
// events fan-out (the single node's package event and cluster mode's cluster/events): each
// one in the subscription's Dropped and in Total (titan_events_dropped_total); one dropped
// under slow-consumer-policy DROP (EventDropped) also in ByPolicy
// (titan_events_dropped_by_policy_total) and in a WARN line logged at most every
// DropLogEvery. Nil counters and a nil Logger are skipped. Safe for concurrent use; share
// one per broker so that the log line is rate-limited broker-wide.
type EventDrops struct {
	Total, ByPolicy *atomic.Uint64
	Logger          *slog.Logger

	lastLog atomic.Int64 // unix nanoseconds of the last drop-by-policy line
}

// DropLogEvery rate-limits EventDrops' drop-by-policy log line.
const DropLogEvery = 10 * time.Second

// Note takes r, DeliverEvent's result for sub, and reports whether the event was delivered
// (written or held). An event not delivered is counted (see EventDrops); destination and
// group name it in the log line. Inlined on the delivered path.
func (d *EventDrops) Note(sub *Subscription, r EventResult, destination, group string) bool {
	if r == EventWritten || r == EventHeld {
		return true
	}
	d.count(sub, 1, r == EventDropped, destination, group)
	return false
}

// NoteLost takes r, LoseEvents' result for n events meant for sub, and counts all n as
// not delivered (see EventDrops), by policy when r is EventDropped.
func (d *EventDrops) NoteLost(sub *Subscription, r EventResult, n uint64, destination, group string) {
	d.count(sub, n, r == EventDropped, destination, group)
}

// count is Note's path for n events not delivered: their connection is closing (or was
// closed as a slow consumer, EventRefused and EventOverflow), or (byPolicy) it is over its
// limit or at its prefetch under slow-consumer-policy DROP.
func (d *EventDrops) count(sub *Subscription, n uint64, byPolicy bool, destination, group string) {
	sub.Dropped.Add(n)
	if d.Total != nil {
		d.Total.Add(n)
	}
	if !byPolicy {
		return
	}
	var total uint64
	if d.ByPolicy != nil {
		total = d.ByPolicy.Add(n)
	}
	now := time.Now().UnixNano()
	last := d.lastLog.Load()
	if d.Logger != nil && now-last >= int64(DropLogEvery) && d.lastLog.CompareAndSwap(last, now) {
		d.Logger.Warn("events dropped for a subscriber over its outbound limit (slow-consumer-policy DROP)",
			"destination", destination, "group", group, "subscription", sub.ID, "dropped_total", total)
	}
}
