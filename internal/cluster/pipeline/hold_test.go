package pipeline

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/titan-broker/titan/internal/cluster"
	"github.com/titan-broker/titan/internal/cluster/clustertest"
	"github.com/titan-broker/titan/internal/cluster/logs"
	"github.com/titan-broker/titan/internal/cluster/queues"
	"github.com/titan-broker/titan/internal/dest"
)

// noHolds is a node that publishes nothing: it holds nothing and answers at once.
type noHolds struct{}

func (noHolds) Hold(context.Context, []string) func() { return func() {} }

// A graceful step-down of a stream's leader while another node pipelines SENDs to it (a
// rolling restart): the stepping-down node has every node hold its publishes to the
// stream until the new leader is elected (cluster/holds.go), so nothing is in flight to
// the old leader at the hand-over: no publish is dropped there and retried (without the
// holds, TITAN_TEST_NO_HOLDS=1, three runs retried 116, 177 and 246 of them, each of which
// can be stored after a later one), and the stream holds every SEND once, in SEND order.
// A few retries are allowed: the first publish after a hold is sent alone and may find
// the new leader's interest not yet arrived.
func TestStepDownHoldsPublishesInOrder(t *testing.T) {
	nodes := clustertest.StartNodes(t)
	id := dest.Identity{Group: "pipe", Pattern: dest.PatternQueues, Channel: "jobs"}
	pl, leader, producer := leaderAndProducer(t, nodes, id)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	q := queues.New(nodes[producer], nil, nil)
	p, err := NewPersister(nodes[producer], q, logs.New(nodes[producer], nil), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if os.Getenv("TITAN_TEST_NO_HOLDS") == "" {
		for i, n := range nodes {
			var h cluster.PublishHolder = noHolds{}
			if i == producer {
				h = p
			}
			if err := n.ServePublishHolds(h); err != nil {
				t.Fatal(err)
			}
		}
	}
	const n = 3000
	stepped := make(chan error, 1)
	sendWithFault(t, p, id, n, func() {
		go func() {
			_, err := nodes[leader].StepDown(ctx)
			stepped <- err
		}()
	})
	if err := <-stepped; err != nil {
		t.Logf("step-down: %v", err)
	}
	bodies := streamBodies(t, nodes[producer], pl)
	t.Logf("retried %d, reordered %d", p.Retried.Load(), p.Reordered.Load())
	checkStoredOnce(t, bodies, n, p)
	if r := p.Retried.Load(); r >= 10 {
		t.Errorf("%d publishes retried: publishes were in flight to the leader as it handed over", r)
	}
	for i, b := range bodies {
		if b != fmt.Sprint(i) {
			t.Fatalf("stream position %d holds SEND %s: not in SEND order (%d reordered)", i, b, p.Reordered.Load())
		}
	}
}
