package cluster_test

import (
	"context"
	"encoding/json"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/titan-broker/titan/internal/cluster"
	"github.com/titan-broker/titan/internal/cluster/clustertest"
)

// holder records the holds a node was asked for; its Hold takes delay.
type holder struct {
	delay atomic.Int64 // ns
	mu    sync.Mutex
	held  [][]string
	open  int
	ended chan struct{} // a value per release
}

func (h *holder) Hold(ctx context.Context, streams []string) func() {
	select {
	case <-time.After(time.Duration(h.delay.Load())):
	case <-ctx.Done():
	}
	h.mu.Lock()
	h.held = append(h.held, streams)
	h.open++
	h.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			h.mu.Lock()
			h.open--
			h.mu.Unlock()
			h.ended <- struct{}{}
		})
	}
}

// A stream leader's StepDown has every node hold its publishes to the streams it leads and
// releases every hold once the new leaders are elected; a release that reaches a node
// before its hold is in force (the requester stopped waiting) still ends that hold at once,
// not after the 3 s it would otherwise last.
func TestStepDownHoldsAndReleasesEveryNode(t *testing.T) {
	nodes := clustertest.StartNodes(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	holders := make([]*holder, len(nodes))
	for i, n := range nodes {
		holders[i] = &holder{ended: make(chan struct{}, 16)}
		if err := n.ServePublishHolds(holders[i]); err != nil {
			t.Fatal(err)
		}
	}
	st, err := nodes[0].JetStream().CreateStream(ctx, jetstream.StreamConfig{Name: "TITAN_holds_Q", Subjects: []string{"t.holds.>"}, Replicas: 3})
	if err != nil {
		t.Fatal(err)
	}
	leader := -1
	for i, n := range nodes {
		if n.Name() == st.CachedInfo().Cluster.Leader {
			leader = i
		}
	}
	if leader < 0 {
		t.Fatalf("leader %q not found", st.CachedInfo().Cluster.Leader)
	}
	rep, err := nodes[leader].StepDown(ctx)
	if err != nil {
		t.Logf("step-down: %v", err)
	}
	if len(rep.Streams) != 1 || rep.Streams[0] != "TITAN_holds_Q" {
		t.Fatalf("stepped down from streams %v, want [TITAN_holds_Q]", rep.Streams)
	}
	for i, h := range holders {
		select {
		case <-h.ended:
		case <-time.After(2 * time.Second):
			t.Fatalf("node %d's hold not released within 2 s of the step-down", i)
		}
		h.mu.Lock()
		if len(h.held) != 1 || len(h.held[0]) != 1 || h.held[0][0] != "TITAN_holds_Q" || h.open != 0 {
			t.Errorf("node %d held %v (%d open), want [[TITAN_holds_Q]] released", i, h.held, h.open)
		}
		h.mu.Unlock()
	}

	// A release that overtakes its hold: node 1 takes 500 ms to hold.
	holders[1].delay.Store(int64(500 * time.Millisecond))
	req, _ := json.Marshal(map[string]any{"id": "early", "streams": []string{"TITAN_holds_Q"}})
	nc := nodes[0].Conn()
	if err := nc.PublishRequest(cluster.HoldSubject, nats.NewInbox(), req); err != nil {
		t.Fatal(err)
	}
	rel, _ := json.Marshal(map[string]any{"id": "early"})
	if err := nc.Publish(cluster.ReleaseSubject, rel); err != nil {
		t.Fatal(err)
	}
	select {
	case <-holders[1].ended:
	case <-time.After(2 * time.Second):
		t.Fatal("a hold whose release came first was not ended within 2 s (it would last 3 s)")
	}
}
