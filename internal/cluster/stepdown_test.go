package cluster_test

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/titan-broker/titan/internal/cluster"
	"github.com/titan-broker/titan/internal/cluster/clustertest"
)

// StepDown moves a replicated consumer's leadership to another node and leaves it as it
// found it (issue 27): a running consumer, paused only while its leadership moved, runs
// again; an operator's pause keeps its own deadline. Its hand-backs (OnStepDown) run after
// the leaderships moved.
func TestStepDownMovesConsumerAndKeepsPauses(t *testing.T) {
	nodes := clustertest.StartNodes(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	js := nodes[0].JetStream()
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "TITAN_unit_Q", Subjects: []string{"t.unit.q.>"}, Replicas: 3}); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"running", "operator"} {
		if _, err := js.CreateOrUpdateConsumer(ctx, "TITAN_unit_Q", jetstream.ConsumerConfig{Durable: name, AckPolicy: jetstream.AckExplicitPolicy, Replicas: 3}); err != nil {
			t.Fatal(err)
		}
	}
	operatorUntil := time.Now().Add(time.Hour).UTC().Truncate(time.Second)
	if _, err := js.PauseConsumer(ctx, "TITAN_unit_Q", "operator", operatorUntil); err != nil {
		t.Fatal(err)
	}
	info := func(name string) *jetstream.ConsumerInfo {
		t.Helper()
		c, err := js.Consumer(ctx, "TITAN_unit_Q", name)
		if err != nil {
			t.Fatal(err)
		}
		return c.CachedInfo()
	}
	byName := map[string]*cluster.Node{}
	for _, n := range nodes {
		byName[n.Name()] = n
	}
	for _, name := range []string{"running", "operator"} {
		leader := byName[info(name).Cluster.Leader]
		if leader == nil {
			t.Fatalf("consumer %s has no known leader", name)
		}
		waitFor(t, ctx, func() bool { // the meta group answers again (a StepDown before may have moved it)
			ictx, icancel := context.WithTimeout(ctx, time.Second)
			defer icancel()
			_, err := leader.JetStream().AccountInfo(ictx)
			return err == nil
		})
		handedBack := false
		leader.OnStepDown(func(context.Context) { handedBack = true })
		rep, err := leader.StepDown(ctx)
		if err != nil {
			t.Fatalf("StepDown of %s's leader: %v", name, err)
		}
		if !handedBack {
			t.Errorf("StepDown of %s's leader did not run its hand-back", name)
		}
		ci := info(name)
		if name == "running" { // resumed: no deadline left (a pause that expired keeps its own)
			waitFor(t, ctx, func() bool { ci = info(name); return ci.Config.PauseUntil == nil || ci.Config.PauseUntil.IsZero() })
		}
		if ci.Cluster.Leader == leader.Name() {
			t.Errorf("consumer %s still led by %s after its StepDown (%+v)", name, leader.Name(), rep)
		}
		switch name {
		case "running":
			if ci.Config.PauseUntil != nil && !ci.Config.PauseUntil.IsZero() {
				t.Errorf("consumer %s not resumed after the step-down (paused until %v)", name, ci.Config.PauseUntil)
			}
		case "operator":
			if !ci.Paused || ci.Config.PauseUntil == nil || !ci.Config.PauseUntil.Equal(operatorUntil) {
				t.Errorf("operator's pause after the step-down: paused %v until %v, want until %v", ci.Paused, ci.Config.PauseUntil, operatorUntil)
			}
		}
	}
}

// waitFor polls ok every 50 ms until it holds, for at most 10 s.
func waitFor(t *testing.T, ctx context.Context, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !ok() {
		if time.Now().After(deadline) || ctx.Err() != nil {
			t.Fatal("condition not met within 10 s")
		}
		time.Sleep(50 * time.Millisecond)
	}
}
