package events

import (
	"testing"
	"time"

	"github.com/titan-broker/titan/internal/cluster/clustertest"
	"github.com/titan-broker/titan/internal/delivery"
	"github.com/titan-broker/titan/internal/dest"
	"github.com/titan-broker/titan/internal/message"
)

// NATS interest is per node, not per client (issue 28): local subscriptions with the same
// (group, filter) share one NATS subscription, each gets every event published on another
// node, a different filter or group makes its own, and the last one to leave ends it.
func TestEventsInterestPerNode(t *testing.T) {
	nodes := clustertest.StartNodes(t)
	sub, pub := New(nodes[0]), New(nodes[1])
	reg := &delivery.Registry{}
	subscribe := func(id, group, channel string) (*delivery.Subscription, *clustertest.CountingWriter) {
		w := &clustertest.CountingWriter{}
		s := &delivery.Subscription{ID: id, Conn: reg.NewConn(w), Group: group, Dest: dest.Destination{Pattern: dest.PatternEvents, Channel: channel}, Ack: delivery.AckAuto}
		if err := sub.Subscribe(s); err != nil {
			t.Fatal(err)
		}
		return s, w
	}
	const clients = 50
	subs := make([]*delivery.Subscription, clients)
	ws := make([]*clustertest.CountingWriter, clients)
	for i := range clients {
		subs[i], ws[i] = subscribe("s", "g", "prices.*")
	}
	other, wOther := subscribe("o", "g", "prices.eu")
	otherGroup, wGroup := subscribe("h", "h", "prices.*")
	if got := sub.Interests.Load(); got != 3 {
		t.Fatalf("%d NATS subscriptions for 3 distinct (group, filter), want 3", got)
	}
	id := dest.Identity{Group: "g", Pattern: dest.PatternEvents, Channel: "prices.eu"}
	m := &message.Message{ID: "e-1", Group: "g", Destination: "/topic/prices/eu", Body: []byte("x")}
	deadline := time.Now().Add(15 * time.Second)
	for wOther.N.Load() == 0 { // the interest may take a moment to reach the publishing node
		if time.Now().After(deadline) {
			t.Fatal("no event reached the subscribing node")
		}
		if _, err := pub.Publish(id, m, nil); err != nil {
			t.Fatal(err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	sent := wOther.N.Load()
	for i, w := range ws {
		for w.N.Load() < sent && time.Now().Before(deadline) {
			time.Sleep(5 * time.Millisecond)
		}
		if w.N.Load() < sent {
			t.Fatalf("subscription %d of the shared filter got %d events, the prices.eu one %d", i, w.N.Load(), sent)
		}
	}
	if wGroup.N.Load() != 0 {
		t.Fatalf("a subscription of group h got %d events of group g", wGroup.N.Load())
	}
	for _, s := range subs {
		sub.Detach(s, nil)
	}
	if got := sub.Interests.Load(); got != 2 {
		t.Fatalf("%d NATS subscriptions after the shared filter's subscribers left, want 2", got)
	}
	sub.Detach(other, nil)
	sub.Detach(otherGroup, nil)
	if got := sub.Interests.Load(); got != 0 {
		t.Fatalf("%d NATS subscriptions after every subscriber left, want 0", got)
	}
}

// BenchmarkEventsPublish measures one events SEND (a core NATS publish, no subscriber).
func BenchmarkEventsPublish(b *testing.B) {
	nodes := clustertest.StartNodes(b)
	e := New(nodes[0])
	id := dest.Identity{Group: "bench", Pattern: dest.PatternEvents, Channel: "prices.eu"}
	m := &message.Message{ID: "bench-1", Group: "bench", Destination: "/topic/prices/eu", Body: make([]byte, 128)}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := e.Publish(id, m, nil); err != nil {
			b.Fatal(err)
		}
	}
}

// TestEventsHashFilter: a '#' filter (RabbitMQ's and Artemis's zero-or-more wildcard) gets
// across nodes exactly the channels dest.Match gives it, though NATS is subscribed on a
// wider subject (cluster.FilterSubject): "a.#" receives "a" and "a.eu" but not "x.eu" or
// "b"; "#.eu" receives "x.eu" and "a.eu".
func TestEventsHashFilter(t *testing.T) {
	nodes := clustertest.StartNodes(t)
	sub, pub := New(nodes[0]), New(nodes[1])
	reg := &delivery.Registry{}
	subscribe := func(id, channel string) *clustertest.CountingWriter {
		w := &clustertest.CountingWriter{}
		s := &delivery.Subscription{ID: id, Conn: reg.NewConn(w), Group: "g", Dest: dest.Destination{Pattern: dest.PatternEvents, Channel: channel, Wildcard: true}, Ack: delivery.AckAuto}
		if err := sub.Subscribe(s); err != nil {
			t.Fatal(err)
		}
		return w
	}
	aHash, hashEU := subscribe("a", "a.#"), subscribe("e", "#.eu")
	warm, end := subscribe("w", "warm.#"), subscribe("z", "end.#")
	publish := func(channel string) {
		t.Helper()
		id := dest.Identity{Group: "g", Pattern: dest.PatternEvents, Channel: channel}
		m := &message.Message{ID: "e-" + channel, Group: "g", Destination: id.Destination(), Body: []byte("x")}
		if _, err := pub.Publish(id, m, nil); err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.Now().Add(15 * time.Second)
	for warm.N.Load() == 0 { // the interest may take a moment to reach the publishing node
		if time.Now().After(deadline) {
			t.Fatal("no event reached the subscribing node")
		}
		publish("warm")
		time.Sleep(20 * time.Millisecond)
	}
	// Every filter here shares one NATS subscription (t.g.ev.>), delivered in order: once
	// "end.#" has the last message, every earlier one was fanned out to all of them.
	for _, ch := range []string{"a", "x.eu", "b", "a.b.c", "a.eu", "end"} {
		publish(ch)
	}
	for end.N.Load() == 0 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if end.N.Load() != 1 {
		t.Fatal("the last event did not arrive")
	}
	if got := hashEU.N.Load(); got != 2 {
		t.Fatalf("#.eu got %d events, want 2 (x.eu, a.eu)", got)
	}
	if got := aHash.N.Load(); got != 3 {
		t.Fatalf("a.# got %d events, want 3 (a, a.b.c, a.eu)", got)
	}
}
