package durables

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/titan-broker/titan/internal/cluster"
	"github.com/titan-broker/titan/internal/cluster/clustertest"
	"github.com/titan-broker/titan/internal/dest"
	"github.com/titan-broker/titan/internal/dispatch"
	"github.com/titan-broker/titan/internal/selector"
	"github.com/titan-broker/titan/internal/topicsub"
)

// fakeQueues records the queues the registry makes and drops.
type fakeQueues struct {
	mu      sync.Mutex
	created []dest.Identity
	dropped []dest.Identity
}

func (f *fakeQueues) CreateQueue(_ context.Context, id dest.Identity) (bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.created = append(f.created, id)
	return true, nil
}

func (f *fakeQueues) DropQueue(_ context.Context, id dest.Identity) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.dropped = append(f.dropped, id)
	return nil
}

// msg is a selector.Message with headers.
type msg map[string]string

func (m msg) Header(k string) (string, bool) { v, ok := m[k]; return v, ok }
func (msg) MessageID() string                { return "id" }
func (msg) TimestampMs() int64               { return 0 }
func (msg) Persistent() bool                 { return true }
func (msg) Priority() int                    { return 4 }

func topic(ch string) dest.Destination {
	return dest.Destination{Pattern: dest.PatternEvents, Channel: ch}
}

func topicID(ch string) dest.Identity { return dest.IdentityOf(dest.DefaultGroup, topic(ch)) }

// startAll starts a Registry on each node.
func startAll(t *testing.T, nodes []*cluster.Node, o Options) ([]*Registry, *fakeQueues) {
	t.Helper()
	q := &fakeQueues{}
	regs := make([]*Registry, len(nodes))
	for i, n := range nodes {
		o := o
		o.Peers = func() int { return len(n.Server().ActivePeers()) }
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		r, err := Start(ctx, n, q, o)
		cancel()
		if err != nil {
			t.Fatalf("node %d: %v", i, err)
		}
		regs[i] = r
		t.Cleanup(r.Stop)
	}
	return regs, q
}

// TestChangesAreAppliedOnEveryNodeBeforeTheyAreAnswered: a subscription made on one node
// feeds the topic SENDs of every other node as soon as AttachDurable returns (the RECEIPT
// follows it), and once DeleteDurable returns no node feeds it any more.
func TestChangesAreAppliedOnEveryNodeBeforeTheyAreAnswered(t *testing.T) {
	nodes := clustertest.StartNodes(t)
	regs, q := startAll(t, nodes, Options{})
	for i := range 10 {
		name := string(rune('a' + i))
		made := regs[i%3]
		qid, err := made.AttachDurable(dest.DefaultGroup, "", name, topic("orders."+name), nil)
		if err != nil {
			t.Fatal(err)
		}
		if want := topicsub.QueueOf(topicsub.Key{Group: dest.DefaultGroup, Name: name}); qid != want {
			t.Fatalf("queue %v, want %v", qid, want)
		}
		for j, r := range regs {
			if got := r.Feeds(topicID("orders."+name), msg{}, nil); len(got) != 1 || got[0] != qid {
				t.Fatalf("subscription %s made on node %d: node %d feeds %v right after, want [%v]", name, i%3, j, got, qid)
			}
		}
		if err := regs[(i+1)%3].DeleteDurable(dest.DefaultGroup, "", name); err != nil {
			t.Fatal(err)
		}
		for j, r := range regs {
			if got := r.Feeds(topicID("orders."+name), msg{}, nil); len(got) != 0 {
				t.Fatalf("subscription %s deleted: node %d still feeds %v", name, j, got)
			}
		}
	}
	if len(q.created) != 10 || len(q.dropped) != 10 {
		t.Fatalf("queues made %d, dropped %d; want 10 each", len(q.created), len(q.dropped))
	}
	if err := regs[0].DeleteDurable(dest.DefaultGroup, "", "a"); !errors.Is(err, dispatch.ErrNoDurableSubscription) {
		t.Fatalf("deleting an unknown subscription: %v", err)
	}
}

// TestWildcardsSelectorsLimitAndReload: a wildcard filter feeds the channels it matches, a
// selector decides which messages enter, the limit refuses one more, a subscription moved
// to another topic drops its queue, and a node started later loads every subscription.
func TestWildcardsSelectorsLimitAndReload(t *testing.T) {
	nodes := clustertest.StartNodes(t)
	regs, q := startAll(t, nodes, Options{Max: 2})
	sel, err := selector.Compile("color = 'red'")
	if err != nil {
		t.Fatal(err)
	}
	wild := dest.Destination{Pattern: dest.PatternEvents, Channel: "orders.*", Wildcard: true}
	reds, err := regs[0].AttachDurable(dest.DefaultGroup, "app", "reds", wild, sel)
	if err != nil {
		t.Fatal(err)
	}
	all, err := regs[1].AttachDurable(dest.DefaultGroup, "", "all", topic("orders.eu"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := regs[2].AttachDurable(dest.DefaultGroup, "", "third", topic("x"), nil); !errors.Is(err, dispatch.ErrDurableSubscriptionLimit) {
		t.Fatalf("a third subscription over max 2: %v", err)
	}
	if again, err := regs[2].AttachDurable(dest.DefaultGroup, "app", "reds", wild, sel); err != nil || again != reds {
		t.Fatalf("attaching an existing subscription: %v %v", again, err)
	}
	check := func(r *Registry, ch, color string, want ...dest.Identity) {
		t.Helper()
		got := r.Feeds(topicID(ch), msg{"color": color}, nil)
		if len(got) != len(want) {
			t.Fatalf("%s color %s feeds %v, want %v", ch, color, got, want)
		}
		for i := range got {
			if got[i] != want[i] && (len(got) != 2 || got[1-i] != want[i]) {
				t.Fatalf("%s color %s feeds %v, want %v", ch, color, got, want)
			}
		}
	}
	check(regs[2], "orders.us", "red", reds)
	check(regs[2], "orders.us", "blue")
	check(regs[2], "orders.eu", "red", reds, all)
	check(regs[2], "orders.eu.x", "red")

	// Moved to another topic: its queue (and what it held) is dropped, the new filter feeds.
	if _, err := regs[1].AttachDurable(dest.DefaultGroup, "", "all", topic("invoices"), nil); err != nil {
		t.Fatal(err)
	}
	q.mu.Lock()
	dropped := append([]dest.Identity(nil), q.dropped...)
	q.mu.Unlock()
	if len(dropped) != 1 || dropped[0] != all {
		t.Fatalf("dropped %v, want [%v]", dropped, all)
	}
	check(regs[0], "orders.eu", "blue")
	check(regs[0], "invoices", "blue", all)

	// A registry started afresh loads what the bucket holds.
	regs[2].Stop()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r, err := Start(ctx, nodes[2], q, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Stop()
	if r.Count() != 2 || !r.Has(dest.DefaultGroup, "app", "reds") || r.Has(dest.DefaultGroup, "", "reds") {
		t.Fatalf("reloaded %d subscriptions (want 2), or Has is wrong", r.Count())
	}
	check(r, "orders.us", "red", reds)
	check(r, "invoices", "red", all)
}
