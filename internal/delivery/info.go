package delivery

import "sort"

// SubscriptionInfo is one subscription as operators see it (monitor API, console).
type SubscriptionInfo struct {
	// ID is the subscription id header.
	ID string
	// Group is the destination group.
	Group string
	// Destination is the canonical destination or (events) wildcard filter.
	Destination string
	// Pattern is the destination's pattern name ("events", "queues", ...).
	Pattern string
	// Ack is the ack mode (auto, client, client-individual).
	Ack string
	// Prefetch bounds unacknowledged deliveries in client ack modes.
	Prefetch int
	// Pending counts deliveries not yet acknowledged.
	Pending int
	// DurableName is the events-store durable-name ("" for none).
	DurableName string
	// Selector is the JMS selector the subscription filters with ("" for none).
	Selector string
	// Delivered counts MESSAGE frames written; Dropped counts events not delivered because
	// the subscription or connection was full.
	Delivered, Dropped uint64
}

// Subscriptions returns the connection's subscriptions, sorted by id. Safe for concurrent use.
func (c *Conn) Subscriptions() []SubscriptionInfo {
	c.mu.Lock()
	out := make([]SubscriptionInfo, 0, len(c.subs))
	for _, s := range c.subs {
		out = append(out, SubscriptionInfo{
			ID: s.ID, Group: s.Group, Destination: s.Dest.String(), Pattern: s.Dest.Pattern.String(),
			Ack: s.Ack.String(), Prefetch: s.Prefetch, Pending: len(s.pending) + s.acking,
			DurableName: s.DurableName, Delivered: s.Delivered.Load(), Dropped: s.Dropped.Load(),
		})
		if s.Selector != nil {
			out[len(out)-1].Selector = s.Selector.String()
		}
	}
	c.mu.Unlock()
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}
