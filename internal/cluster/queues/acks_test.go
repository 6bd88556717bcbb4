package queues

import (
	"context"
	"regexp"
	"testing"
	"time"

	"github.com/titan-broker/titan/internal/cluster/clustertest"
	"github.com/titan-broker/titan/internal/delivery"
	"github.com/titan-broker/titan/internal/dest"
	"github.com/titan-broker/titan/internal/message"
)

var ackHeader = regexp.MustCompile(`\nack:([^\n]+)\n`)

// Receipted ACKs are stored before their RECEIPT (issue 27): once the node's Acks.Sync
// (the router's Syncer, called before an ACK's RECEIPT) returned, the consumer's leader —
// asked from another node — holds no unacknowledged delivery.
func TestAckIsAppliedWhenSyncReturns(t *testing.T) {
	nodes := clustertest.StartNodes(t)
	q := New(nodes[0], nil, nil)
	id := dest.Identity{Group: "acks", Pattern: dest.PatternQueues, Channel: "jobs"}
	const n = 50
	for i := range n {
		m := &message.Message{ID: "ack-" + string(rune('a'+i%26)) + string(rune('a'+i/26)), Group: id.Group, Destination: id.Destination(), Body: []byte("x"), Persistent: true}
		if _, err := q.Publish(id, m, nil); err != nil {
			t.Fatal(err)
		}
	}
	w := &heads{}
	c := (&delivery.Registry{}).NewConn(w)
	sub := &delivery.Subscription{ID: "s", Conn: c, Group: id.Group, Dest: dest.Destination{Pattern: dest.PatternQueues, Channel: "jobs"},
		Ack: delivery.AckClientIndividual, Prefetch: n}
	if err := q.Subscribe(sub); err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= n; i++ {
		key := ackHeader.FindStringSubmatch(w.wait(t, i))
		if key == nil {
			t.Fatal("MESSAGE without an ack header")
		}
		if err := c.Ack(key[1], "", false); err != nil {
			t.Fatal(err)
		}
	}
	if err := nodes[0].Acks().Sync(); err != nil {
		t.Fatal(err)
	}
	p := q.Place(id)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cons, err := nodes[2].JetStream().Consumer(ctx, p.Stream, consumerName(p.Subject))
	if err != nil {
		t.Fatal(err)
	}
	ci, err := cons.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if ci.NumAckPending != 0 || ci.AckFloor.Stream < uint64(n) {
		t.Fatalf("after Sync the consumer has %d unacknowledged, ack floor %d; want 0, %d", ci.NumAckPending, ci.AckFloor.Stream, n)
	}
}
