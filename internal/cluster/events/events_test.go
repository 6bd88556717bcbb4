package events

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/titan-broker/titan/internal/cluster/clustertest"
	"github.com/titan-broker/titan/internal/delivery"
	"github.com/titan-broker/titan/internal/delivery/deliverytest"
	"github.com/titan-broker/titan/internal/dest"
	"github.com/titan-broker/titan/internal/message"
)

// NATS interest is per node, not per client (issue 28): local subscriptions with the same
// (group, filter) share one NATS subscription, each gets every event published on another
// node, a different filter or group makes its own, and the last one to leave ends it.
func TestEventsInterestPerNode(t *testing.T) {
	nodes := clustertest.StartNodes(t)
	sub, pub := New(nodes[0], Options{}), New(nodes[1], Options{})
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
	e := New(nodes[0], Options{})
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
	sub, pub := New(nodes[0], Options{}), New(nodes[1], Options{})
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

// dropAll is a DropPolicy with slow-consumer-policy DROP on every destination.
type dropAll struct{}

func (dropAll) DropWhenFull(dest.Identity) bool { return true }

// policyCase is one slow-consumer policy under test: the subscribing node's Options with
// its drop counters (titan_events_dropped_total and ..._by_policy_total).
type policyCase struct {
	name                    string
	drop                    bool
	opts                    Options
	eventsDropped, byPolicy *atomic.Uint64
}

// forEachPolicy runs fn as a subtest for slow-consumer-policy CLOSE and DROP, with fresh
// counters; maxBufferBytes is Options.MaxBufferBytes.
func forEachPolicy(t *testing.T, maxBufferBytes int64, fn func(t *testing.T, pc policyCase)) {
	for _, drop := range []bool{false, true} {
		pc := policyCase{name: "close", drop: drop, eventsDropped: &atomic.Uint64{}, byPolicy: &atomic.Uint64{}}
		pc.opts = Options{MaxBufferBytes: maxBufferBytes, Drops: &delivery.EventDrops{Total: pc.eventsDropped, ByPolicy: pc.byPolicy}}
		if drop {
			pc.name, pc.opts.DropPolicy = "drop", dropAll{}
		}
		t.Run(pc.name, func(t *testing.T) { fn(t, pc) })
	}
}

// publishUntilDelivered publishes m through pub every 20 ms until w has a MESSAGE: the
// subscribing node's interest may take a moment to reach the publishing node. It returns
// the number published.
func publishUntilDelivered(t *testing.T, pub *Pattern, id dest.Identity, m *message.Message, w *deliverytest.Buffered, deadline time.Time) int {
	t.Helper()
	n := 0
	for len(w.Bodies()) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("no event reached the subscribing node")
		}
		if _, err := pub.Publish(id, m, nil); err != nil {
			t.Fatal(err)
		}
		n++
		time.Sleep(20 * time.Millisecond)
	}
	return n
}

// checkDropsAgree fails t unless the pattern's, the subscription's and
// titan_events_dropped_total's drop counts are equal.
func checkDropsAgree(t *testing.T, e *Pattern, s *delivery.Subscription, pc policyCase) {
	t.Helper()
	if pc.eventsDropped.Load() != e.Dropped.Load() || s.Dropped.Load() != e.Dropped.Load() {
		t.Errorf("dropped: pattern %d, subscription %d, titan_events_dropped_total %d; want all equal",
			e.Dropped.Load(), s.Dropped.Load(), pc.eventsDropped.Load())
	}
}

// A topic subscriber on a cluster node that reads nothing is treated as on a single node
// (delivery.DeliverEvent), never dropped without a word: under slow-consumer-policy CLOSE
// (the default) its connection keeps taking events past its high watermark up to
// max-buffer-bytes, then is closed as a slow consumer with an ERROR; under DROP what it has
// no room for is dropped, counted (titan_events_dropped_total and
// titan_events_dropped_by_policy_total) and logged. Before, a delivery the connection
// refused was dropped and counted only in a counter nothing read.
func TestSlowEventsSubscriberAsOnSingleNode(t *testing.T) {
	nodes := clustertest.StartNodes(t)
	forEachPolicy(t, 16<<10, func(t *testing.T, tc policyCase) {
		sub, pub := New(nodes[0], tc.opts), New(nodes[1], Options{})
		w := &deliverytest.Buffered{Limit: 4 << 10} // a client that reads nothing
		s := &delivery.Subscription{ID: "s", Conn: (&delivery.Registry{}).NewConn(w), Group: "g",
			Dest: dest.Destination{Pattern: dest.PatternEvents, Channel: "slow." + tc.name}, Ack: delivery.AckAuto}
		if err := sub.Subscribe(s); err != nil {
			t.Fatal(err)
		}
		defer sub.Detach(s, nil)
		id := dest.Identity{Group: "g", Pattern: dest.PatternEvents, Channel: "slow." + tc.name}
		m := &message.Message{ID: "e-1", Group: "g", Destination: "/topic/slow/" + tc.name, Body: make([]byte, 1000)}
		deadline := time.Now().Add(15 * time.Second)
		publishUntilDelivered(t, pub, id, m, w, deadline)
		const sends = 100 // 100 KB: past the high watermark (4 KiB) and max-buffer-bytes (16 KiB)
		for range sends {
			if _, err := pub.Publish(id, m, nil); err != nil {
				t.Fatal(err)
			}
		}
		for time.Now().Before(deadline) && uint64(len(w.Bodies()))+sub.Dropped.Load() < sends {
			time.Sleep(10 * time.Millisecond)
		}
		written, slow := len(w.Bodies()), strings.Join(w.SlowCloses(), "; ")
		byPolicy := tc.byPolicy
		t.Logf("written %d, dropped %d (by policy %d), slow-consumer ERROR %q", written, sub.Dropped.Load(), byPolicy.Load(), slow)
		checkDropsAgree(t, sub, s, tc)
		if tc.drop {
			if slow != "" || byPolicy.Load() == 0 || byPolicy.Load() != sub.Dropped.Load() {
				t.Errorf("DROP: %d dropped, %d by policy, closed %q; want drops, all by policy, no close",
					sub.Dropped.Load(), byPolicy.Load(), slow)
			}
			if written == 0 || w.QueuedBytes() > 4<<10 {
				t.Errorf("DROP: %d written (%d bytes queued); want the connection filled to its high watermark and no further", written, w.QueuedBytes())
			}
			return
		}
		if !strings.Contains(slow, "max-buffer-bytes") || byPolicy.Load() != 0 {
			t.Errorf("CLOSE: slow-consumer ERROR %q, %d dropped by policy; want the connection closed as a slow consumer, none by policy", slow, byPolicy.Load())
		}
		if q := w.QueuedBytes(); q <= 4<<10 || q > 16<<10 {
			t.Errorf("CLOSE: %d bytes queued before the close; want past the 4 KiB high watermark, within the 16 KiB bound", q)
		}
	})
}

// A client-ack topic subscriber at its prefetch on a cluster node gets every event, in
// order, as it acknowledges: what it has no credit for is held, as on a single node. Before,
// those events were dropped: with prefetch-count 2, a client acknowledging each MESSAGE got
// 3 of 20 events through a real cluster node.
func TestClientAckEventsSubscriberHeldAtPrefetch(t *testing.T) {
	nodes := clustertest.StartNodes(t)
	var eventsDropped atomic.Uint64
	sub, pub := New(nodes[0], Options{SlowConsumerTimeout: time.Minute, Drops: &delivery.EventDrops{Total: &eventsDropped}}),
		New(nodes[1], Options{})
	reg := &delivery.Registry{}
	newSub := func(id string, w delivery.Writer, ack delivery.AckMode) *delivery.Subscription {
		t.Helper()
		s := &delivery.Subscription{ID: id, Conn: reg.NewConn(w), Group: "g",
			Dest: dest.Destination{Pattern: dest.PatternEvents, Channel: "acked"}, Ack: ack, Prefetch: 2}
		if err := sub.Subscribe(s); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { sub.Detach(s, nil) })
		return s
	}
	id := dest.Identity{Group: "g", Pattern: dest.PatternEvents, Channel: "acked"}
	send := func(body string) {
		t.Helper()
		m := &message.Message{ID: "e-" + body, Group: "g", Destination: "/topic/acked", Body: []byte(body)}
		if _, err := pub.Publish(id, m, nil); err != nil {
			t.Fatal(err)
		}
	}
	// An auto-ack watcher makes the node's interest and shows when it reached the
	// publishing node; the client-ack subscription then joins that interest.
	watch := &deliverytest.Buffered{}
	newSub("watch", watch, delivery.AckAuto)
	deadline := time.Now().Add(15 * time.Second)
	for len(watch.Bodies()) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("no event reached the subscribing node")
		}
		send("probe")
		time.Sleep(20 * time.Millisecond)
	}
	w := &deliverytest.Buffered{}
	s := newSub("s", w, delivery.AckClientIndividual)
	const n = 20
	for i := range n {
		send(strconv.Itoa(i))
	}
	// Before any ACK: two written (the prefetch), the other 18 held, none dropped.
	for s.HeldCount()+len(w.Bodies()) < n && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if held, written := s.HeldCount(), len(w.Bodies()); held != n-2 || written != 2 {
		t.Fatalf("before any ACK: %d held, %d written; want %d held, 2 written", held, written, n-2)
	}
	var want []string
	for i := range n {
		want = append(want, strconv.Itoa(i))
	}
	for time.Now().Before(deadline) && len(w.Bodies()) < n {
		key, ok := s.OldestPending()
		if !ok {
			time.Sleep(time.Millisecond) // the next event is on its way
			continue
		}
		if err := s.Conn.Ack(key, s.ID, false); err != nil {
			t.Fatal(err)
		}
	}
	if got := w.Bodies(); !slices.Equal(got, want) || eventsDropped.Load() != 0 || sub.Dropped.Load() != 0 {
		t.Fatalf("got %q (dropped %d, held %d); want 0 to %d in order, none dropped", got, sub.Dropped.Load(), s.HeldCount(), n-1)
	}
}

// TestEventsLostByALaggingNodeAreNotSilent: when a node falls behind the cluster, nats.go
// drops events at its subscription's pending limits (here lowered to 8 messages, with a
// fan-out slowed down by 2 ms per event). A subscriber under slow-consumer-policy CLOSE is
// closed as a slow consumer, told how many events it missed; under DROP the loss is
// counted, by policy. Either way the subscription's, the pattern's and
// titan_events_dropped_total's counts agree, and every event sent is either delivered or
// counted.
func TestEventsLostByALaggingNodeAreNotSilent(t *testing.T) {
	old := pendingLimits
	pendingLimits = [2]int{8, 1 << 20}
	defer func() { pendingLimits = old }()
	nodes := clustertest.StartNodes(t)
	forEachPolicy(t, 0, func(t *testing.T, tc policyCase) {
		sub, pub := New(nodes[0], tc.opts), New(nodes[1], Options{})
		w := &deliverytest.Buffered{}
		var slowDown atomic.Bool
		s := &delivery.Subscription{ID: "s", Conn: (&delivery.Registry{}).NewConn(w), Group: "g",
			Dest: dest.Destination{Pattern: dest.PatternEvents, Channel: "lag." + tc.name}, Ack: delivery.AckAuto,
			Allow: func(string) bool {
				if slowDown.Load() {
					time.Sleep(2 * time.Millisecond) // the node is busy: its fan-out falls behind
				}
				return true
			}}
		if err := sub.Subscribe(s); err != nil {
			t.Fatal(err)
		}
		defer sub.Detach(s, nil)
		id := dest.Identity{Group: "g", Pattern: dest.PatternEvents, Channel: "lag." + tc.name}
		m := &message.Message{ID: "e-1", Group: "g", Destination: "/topic/lag/" + tc.name, Body: []byte("event")}
		deadline := time.Now().Add(15 * time.Second)
		probes := publishUntilDelivered(t, pub, id, m, w, deadline)
		time.Sleep(100 * time.Millisecond) // the probes still on their way arrive
		dropped0 := sub.Dropped.Load()
		slowDown.Store(true)
		const sends = 400
		burst := &message.Message{ID: "e-2", Group: "g", Destination: m.Destination, Body: []byte("burst")}
		for range sends {
			if _, err := pub.Publish(id, burst, nil); err != nil {
				t.Fatal(err)
			}
		}
		// A probe still on its way (it precedes the burst) is written, or under CLOSE may
		// be refused after the close and counted: so every burst event is written or
		// counted once written + dropped reach sends, and they reach at most sends + probes.
		burstWritten := func() (n uint64) {
			for _, b := range w.Bodies() {
				if b == "burst" {
					n++
				}
			}
			return n
		}
		for time.Now().Before(deadline) && burstWritten()+sub.Dropped.Load()-dropped0 < sends {
			time.Sleep(10 * time.Millisecond)
		}
		time.Sleep(50 * time.Millisecond) // nothing more may come
		written, slow := burstWritten(), strings.Join(w.SlowCloses(), "; ")
		dropped, byPolicy := sub.Dropped.Load()-dropped0, tc.byPolicy
		t.Logf("%d probes; of %d sent: written %d, dropped %d (by policy %d); slow-consumer ERROR %q",
			probes, sends, written, dropped, byPolicy.Load(), slow)
		if written+dropped < sends || written+dropped > sends+uint64(probes) {
			t.Errorf("%d written + %d dropped, want %d (up to %d with late probes refused): an event neither delivered nor counted, or counted twice",
				written, dropped, sends, sends+probes)
		}
		if dropped == 0 {
			t.Fatal("no event counted dropped: the node did not fall behind its pending limits, or its NATS drops went uncounted")
		}
		checkDropsAgree(t, sub, s, tc)
		if tc.drop {
			if slow != "" || byPolicy.Load() != dropped {
				t.Errorf("DROP: %d dropped, %d by policy, closed %q; want every drop counted by policy, no close", dropped, byPolicy.Load(), slow)
			}
			return
		}
		if !strings.Contains(slow, "fell behind the cluster") || byPolicy.Load() != 0 {
			t.Errorf("CLOSE: slow-consumer ERROR %q, %d dropped by policy; want the connection closed as a slow consumer for the events it missed, none by policy", slow, byPolicy.Load())
		}
		var missed uint64
		if _, err := fmt.Sscanf(slow, "%d events for /topic/lag/close were dropped", &missed); err != nil || missed == 0 || missed > dropped {
			t.Errorf("CLOSE: slow-consumer ERROR %q; want it to name the destination and how many events it missed (1 to %d)", slow, dropped)
		}
	})
}
