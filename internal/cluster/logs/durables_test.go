package logs

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/titan-broker/titan/internal/cluster/clustertest"
	"github.com/titan-broker/titan/internal/dest"
	"github.com/titan-broker/titan/internal/dispatch"
)

// A durable-name claimed on one node is refused on another (and on the same node) until it
// is released, and granted when it is released within ClaimWait; the management lists it from any node with its metadata, refuses to delete
// it while claimed, expires it only once offline longer than the idle timeout, and counts
// it against the limit.
func TestDurablesManagedAcrossNodes(t *testing.T) {
	nodes := clustertest.StartNodes(t)
	ps := make([]*Pattern, len(nodes))
	for i, n := range nodes {
		ps[i] = New(n, nil)
		if err := ps[i].ManageDurables(n.Conn(), n.Name(), DurableOptions{Max: 1, Peers: func() int { return len(nodes) }}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(ps[i].Close)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	id := dest.Identity{Group: "default", Pattern: dest.PatternEventsStore, Channel: "orders"}
	p := ps[0].Place(id)
	if err := ps[0].ensureStream(ctx, p); err != nil {
		t.Fatal(err)
	}
	cfg := durableConfig(id, "billing", p.Subject, jetstream.DeliverAllPolicy, 0, nil)

	// Claimed on node 0: refused on node 1 (naming node 0) and on node 0.
	if err := ps[0].claim(ctx, cfg.Durable, "billing"); err != nil {
		t.Fatal(err)
	}
	for i, want := range []string{"on node u0", "on node u0"} {
		err := ps[i].claim(ctx, cfg.Durable, "billing")
		var iu errInUse
		if !errors.As(err, &iu) || iu.where != want || !errors.Is(err, dispatch.ErrDurableSubscriptionInUse) {
			t.Fatalf("claim on node %d: %v, want in use %s", i, err, want)
		}
	}
	if _, err := ps[0].bindDurable(ctx, p.Stream, cfg); err != nil {
		t.Fatal(err)
	}
	// A second subscription is over the limit (1): refused, nothing made.
	other := durableConfig(id, "audit", p.Subject, jetstream.DeliverAllPolicy, 0, nil)
	if _, err := ps[1].bindDurable(ctx, p.Stream, other); !errors.Is(err, dispatch.ErrDurableSubscriptionLimit) {
		t.Fatalf("a second durable subscription at the limit: %v", err)
	}
	list, complete, err := ps[2].Durables(ctx)
	if err != nil || !complete || len(list) != 1 {
		t.Fatalf("Durables on node 2 = %+v, %v, %v; want billing, complete", list, complete, err)
	}
	if d := list[0]; d.Group != "default" || d.Channel != "orders" || d.Name != "billing" || d.Live != 1 {
		t.Fatalf("listed %+v, want default/orders billing live 1", d)
	}
	if err := ps[2].DeleteDurable(ctx, id, "billing"); !errors.Is(err, dispatch.ErrDurableSubscriptionInUse) {
		t.Fatalf("DeleteDurable while claimed: %v", err)
	}
	if gone, err := ps[0].ExpireDurables(ctx, time.Millisecond, time.Now().Add(time.Hour)); err != nil || len(gone) != 0 {
		t.Fatalf("ExpireDurables while claimed = %+v, %v; want none", gone, err)
	}

	// Released and marked offline: not expired before the idle timeout, expired after it.
	ps[0].release(cfg.Durable)
	ps[0].markOffline(p.Stream, cfg.Durable)
	if gone, err := ps[1].ExpireDurables(ctx, time.Hour, time.Now()); err != nil || len(gone) != 0 {
		t.Fatalf("ExpireDurables within the idle timeout = %+v, %v; want none", gone, err)
	}
	// A claim waits (ClaimWait) for a reader that ends meanwhile: node 2 holds it, node 1
	// asks, node 2 releases it.
	if err := ps[2].claim(ctx, cfg.Durable, "billing"); err != nil {
		t.Fatal(err)
	}
	released := make(chan struct{})
	go func() {
		defer close(released)
		time.Sleep(ClaimWait / 4)
		ps[2].release(cfg.Durable)
	}()
	if err := ps[1].claim(ctx, cfg.Durable, "billing"); err != nil {
		t.Fatalf("claim on node 1 while node 2 releases it: %v", err)
	}
	<-released
	ps[1].release(cfg.Durable)
	gone, err := ps[1].ExpireDurables(ctx, time.Minute, time.Now().Add(2*time.Minute))
	if err != nil || len(gone) != 1 || gone[0].Name != "billing" {
		t.Fatalf("ExpireDurables after the idle timeout = %+v, %v; want billing", gone, err)
	}
	if n, err := ps[0].DurableCount(ctx); err != nil || n != 0 {
		t.Fatalf("DurableCount after the expiry = %d, %v", n, err)
	}
	if err := ps[0].DeleteDurable(ctx, id, "billing"); !errors.Is(err, dispatch.ErrNoDurableSubscription) {
		t.Fatalf("DeleteDurable of an expired subscription: %v", err)
	}
}

func TestIsLogStream(t *testing.T) {
	for name, want := range map[string]bool{
		"TITAN_default_ES": true, "TITAN_a_ES_0123abcd": true, "TITAN_default_Q": false,
		"TITAN_a_ES_x": false, "OTHER_ES": false, "TITAN_DURABLE_TOPICS": false,
		"TITAN_default_ES_P3": true, "TITAN_a_ES_0123abcd_P11": true, "TITAN_default_Q_P3": false, "TITAN_a_ES_x_P1": false,
	} {
		if got := isLogStream(name); got != want {
			t.Errorf("isLogStream(%q) = %v, want %v", name, got, want)
		}
	}
}
