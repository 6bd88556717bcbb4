package status

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/nats-io/nats.go"
)

// CountersSubject is the core NATS subject a node asks every node on for its message
// counters (issue 27: the console showed one node's dead-letter count). The answer is the
// JSON of a Counters.
const CountersSubject = "titan.status.counters"

// Counters are one node's message counters since it started, or their sum over the nodes
// that answered (GatherCounters).
type Counters struct {
	// Node names the answering node ("" in a sum).
	Node string `json:"node,omitempty"`
	// DeadLettered counts messages the node moved to a dead-letter queue.
	DeadLettered uint64 `json:"deadLettered"`
}

// ServeCounters answers other nodes' counter requests on nc with read's counters (read is
// called on the subscription's goroutine and must be safe for that). Stop it with the
// returned subscription's Unsubscribe. Errors: the subscription's.
func ServeCounters(nc *nats.Conn, node string, read func() Counters) (*nats.Subscription, error) {
	sub, err := nc.Subscribe(CountersSubject, func(m *nats.Msg) {
		if m.Reply == "" {
			return
		}
		c := read()
		c.Node = node
		if data, err := json.Marshal(c); err == nil {
			_ = m.Respond(data)
		}
	})
	if err != nil {
		return nil, fmt.Errorf("cluster: serving counters: %w", err)
	}
	return sub, nil
}

// GatherCounters asks every node on nc (this one included) for its counters and returns
// their sum and the nodes that answered, once peers nodes answered or ctx ended (the sum
// is then that of the nodes that did: a node that is down counts nothing). Errors: the
// request's publication.
func GatherCounters(ctx context.Context, nc *nats.Conn, peers int) (sum Counters, answered []string, err error) {
	inbox := nats.NewInbox()
	sub, err := nc.SubscribeSync(inbox)
	if err != nil {
		return sum, nil, err
	}
	defer func() { _ = sub.Unsubscribe() }()
	if err := nc.PublishRequest(CountersSubject, inbox, nil); err != nil {
		return sum, nil, err
	}
	seen := map[string]bool{}
	for len(seen) < max(peers, 1) {
		m, err := sub.NextMsgWithContext(ctx)
		if err != nil {
			break
		}
		var c Counters
		if json.Unmarshal(m.Data, &c) != nil || seen[c.Node] {
			continue
		}
		seen[c.Node] = true
		answered = append(answered, c.Node)
		sum.DeadLettered += c.DeadLettered
	}
	return sum, answered, nil
}
