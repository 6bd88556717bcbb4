package event

import (
	"fmt"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/titan-broker/titan/internal/address"
	"github.com/titan-broker/titan/internal/delivery"
	"github.com/titan-broker/titan/internal/delivery/deliverytest"
	"github.com/titan-broker/titan/internal/dest"
	"github.com/titan-broker/titan/internal/dispatch"
	"github.com/titan-broker/titan/internal/message"
)

func mustDest(t *testing.T, raw string) dest.Destination {
	t.Helper()
	d, err := dest.ParseFilter(raw, dest.PatternEvents)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func subscribe(t *testing.T, p *Pattern, w delivery.Writer, filter string, ack delivery.AckMode, prefetch int) *delivery.Subscription {
	t.Helper()
	sub := &delivery.Subscription{ID: "s", Conn: delivery.NewConn(w, nil), Group: "default", Dest: mustDest(t, filter), Ack: ack, Prefetch: prefetch}
	if err := p.Subscribe(sub); err != nil {
		t.Fatal(err)
	}
	return sub
}

func msg(body string) *message.Message {
	return message.Pack(&message.Parts{IDPrefix: "t", Group: "default", Destination: []byte("/topic/x"), Body: []byte(body)})
}

func identity(t *testing.T, raw string) dest.Identity {
	return dest.IdentityOf("default", mustDest(t, raw))
}

func publish(t *testing.T, p *Pattern, id dest.Identity, body string) {
	t.Helper()
	if _, err := p.Publish(id, msg(body), nil); err != nil {
		t.Fatal(err)
	}
}

type dropAll struct{}

func (dropAll) DropWhenFull(dest.Identity) bool { return true }

// TestSlowSubscriberIsolated is issue 30's rule at the pattern: one subscriber that reads
// nothing does not hold up the producer or the other subscriber. Publish returns for every
// message (nothing waits), the reading subscriber gets every message in order, and the
// stalled one is closed as a slow consumer once its buffer bound is reached; what it did not
// get is counted as dropped.
func TestSlowSubscriberIsolated(t *testing.T) {
	d := dispatch.New(dispatch.Options{})
	defer d.Close()
	p := New(d, Options{MaxBufferBytes: 64 << 10})
	id := identity(t, "/topic/x")
	stalled := &deliverytest.Buffered{Limit: 16 << 10}
	healthy := &deliverytest.Buffered{Limit: 16 << 10}
	subscribe(t, p, stalled, "/topic/x", delivery.AckAuto, 0)
	subscribe(t, p, healthy, "/topic/x", delivery.AckAuto, 0)
	body := strings.Repeat("b", 1024)
	const n = 1000
	var want []string
	for i := range n {
		b := fmt.Sprintf("%04d%s", i, body)
		want = append(want, b)
		publish(t, p, id, b)
		healthy.Drain() // the healthy client reads as fast as it is written to
	}
	if got := healthy.Bodies(); strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("healthy subscriber got %d of %d messages (or out of order)", len(got), n)
	}
	if len(stalled.SlowCloses()) != 1 {
		t.Fatalf("stalled subscriber: %d slow-consumer closes, want 1", len(stalled.SlowCloses()))
	}
	got := len(stalled.Bodies())
	if got == 0 || got >= n {
		t.Fatalf("stalled subscriber got %d messages, want some (its buffer) and not all", got)
	}
	if dropped := d.EventsDropped.Load(); dropped != uint64(n-got) {
		t.Fatalf("dropped %d, want the %d the stalled subscriber did not get", dropped, n-got)
	}
	if p.opts.Flow.Dropped.Load() != 0 {
		t.Fatal("drops counted as by policy under CLOSE")
	}
}

// TestStarvedClientAckSubscribersDoNotHoldProducer is issue 32's "a topic producer waits on
// starved client-ack subscribers one after another": with k client-ack subscribers at their
// prefetch, Publish returns at once (no wait at all), their messages are held, and each
// gets every message, in order, as it acknowledges — prefetch is never exceeded.
func TestStarvedClientAckSubscribersDoNotHoldProducer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d := dispatch.New(dispatch.Options{})
		defer d.Close()
		p := New(d, Options{SlowConsumerTimeout: 30 * time.Second})
		id := identity(t, "/topic/x")
		const k, prefetch, n = 4, 2, 10
		ws := make([]*deliverytest.Buffered, k)
		subs := make([]*delivery.Subscription, k)
		for i := range k {
			ws[i] = &deliverytest.Buffered{}
			subs[i] = subscribe(t, p, ws[i], "/topic/x", delivery.AckClientIndividual, prefetch)
		}
		start := time.Now()
		for i := range n {
			publish(t, p, id, fmt.Sprint(i))
		}
		if el := time.Since(start); el != 0 { // synctest: time moves only when every goroutine waits
			t.Fatalf("the producer waited %v for starved subscribers", el)
		}
		for i, s := range subs {
			if s.HeldCount() != n-prefetch || len(ws[i].Bodies()) != prefetch {
				t.Fatalf("subscriber %d: held %d, written %d; want %d and %d", i, s.HeldCount(), len(ws[i].Bodies()), n-prefetch, prefetch)
			}
		}
		for i, s := range subs {
			for range n {
				key, ok := s.OldestPending()
				if !ok {
					t.Fatalf("subscriber %d: nothing pending", i)
				}
				if err := s.Conn.Ack(key, s.ID, false); err != nil {
					t.Fatal(err)
				}
			}
			if got := strings.Join(ws[i].Bodies(), " "); got != "0 1 2 3 4 5 6 7 8 9" {
				t.Fatalf("subscriber %d got %q", i, got)
			}
		}
		if d.EventsDropped.Load() != 0 || len(ws[0].SlowCloses()) != 0 {
			t.Fatalf("dropped %d, slow closes %d", d.EventsDropped.Load(), len(ws[0].SlowCloses()))
		}
	})
}

// TestStarvedClientAckSubscribersClosedTogether checks that k starved subscribers that
// never acknowledge are all closed as slow consumers after one slow-consumer-timeout — not
// k × timeout — while the producer never waited.
func TestStarvedClientAckSubscribersClosedTogether(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d := dispatch.New(dispatch.Options{})
		defer d.Close()
		const timeout = 30 * time.Second
		p := New(d, Options{SlowConsumerTimeout: timeout})
		id := identity(t, "/topic/x")
		ws := make([]*deliverytest.Buffered, 3)
		for i := range ws {
			ws[i] = &deliverytest.Buffered{}
			subscribe(t, p, ws[i], "/topic/x", delivery.AckClient, 1)
		}
		publish(t, p, id, "a")
		publish(t, p, id, "b") // held for each
		time.Sleep(timeout)
		synctest.Wait()
		for i, w := range ws {
			if len(w.SlowCloses()) != 1 {
				t.Fatalf("subscriber %d: %d slow closes after one timeout, want 1", i, len(w.SlowCloses()))
			}
		}
	})
}

// TestDropPolicyCounts checks slow-consumer-policy DROP: a subscriber over its limit loses
// the message, counted in Flow.Dropped and EventsDropped; the other subscriber gets all.
func TestDropPolicyCounts(t *testing.T) {
	d := dispatch.New(dispatch.Options{})
	defer d.Close()
	p := New(d, Options{DropPolicy: dropAll{}})
	id := identity(t, "/topic/x")
	stalled := &deliverytest.Buffered{Limit: 100}
	healthy := &deliverytest.Buffered{Limit: 100}
	subscribe(t, p, stalled, "/topic/x", delivery.AckAuto, 0)
	subscribe(t, p, healthy, "/topic/x", delivery.AckAuto, 0)
	for i := range 5 {
		publish(t, p, id, strings.Repeat("p", 200)+fmt.Sprint(i))
		healthy.Drain()
	}
	if len(healthy.Bodies()) != 5 || len(stalled.Bodies()) != 1 {
		t.Fatalf("healthy %d, stalled %d; want 5 and 1", len(healthy.Bodies()), len(stalled.Bodies()))
	}
	if p.opts.Flow.Dropped.Load() != 4 || d.EventsDropped.Load() != 4 || len(stalled.SlowCloses()) != 0 {
		t.Fatalf("by policy %d, dropped %d, slow closes %d; want 4, 4, 0", p.opts.Flow.Dropped.Load(), d.EventsDropped.Load(), len(stalled.SlowCloses()))
	}
}

// TestFanoutFilters checks the per-subscription step of the fan-out: wildcard filters
// select by channel, Allow refuses a concrete channel without counting a drop, and a
// message with no matching subscription counts as published to none.
func TestFanoutFilters(t *testing.T) {
	d := dispatch.New(dispatch.Options{})
	defer d.Close()
	p := New(d, Options{})
	star, gt, denied := &deliverytest.Buffered{}, &deliverytest.Buffered{}, &deliverytest.Buffered{}
	subscribe(t, p, star, "/topic/orders/*", delivery.AckAuto, 0)
	subscribe(t, p, gt, "/topic/orders/>", delivery.AckAuto, 0)
	ds := subscribe(t, p, denied, "/topic/orders/>", delivery.AckAuto, 0)
	ds.Allow = func(channel string) bool { return channel != "orders.eu" }
	publish(t, p, identity(t, "/topic/orders/eu"), "eu")
	publish(t, p, identity(t, "/topic/orders/eu/x"), "eu-x")
	publish(t, p, identity(t, "/topic/other"), "none")
	if g := strings.Join(star.Bodies(), " "); g != "eu" {
		t.Fatalf("orders/* got %q", g)
	}
	if g := strings.Join(gt.Bodies(), " "); g != "eu eu-x" {
		t.Fatalf("orders/> got %q", g)
	}
	if g := strings.Join(denied.Bodies(), " "); g != "eu-x" {
		t.Fatalf("Allow-filtered subscription got %q", g)
	}
	if d.EventsDropped.Load() != 0 || d.EventsNoSub.Load() != 1 {
		t.Fatalf("dropped %d, no-subscriber %d; want 0 and 1", d.EventsDropped.Load(), d.EventsNoSub.Load())
	}
}

// TestFanoutModeQueueIsolated checks the fanout-mode path: the destination's hand-off
// queue and its consumer deliver to a reading subscriber although another one is stalled
// (the consumer never waits for it either).
func TestFanoutModeQueueIsolated(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d := dispatch.New(dispatch.Options{})
		p := New(d, Options{FanoutMode: true, MaxBufferBytes: 8 << 10, ConsumerLinger: time.Second})
		id := identity(t, "/topic/x")
		if _, _, err := d.Create(id, address.Settings{Capacity: 4}); err != nil {
			t.Fatal(err)
		}
		stalled, healthy := &deliverytest.Buffered{Limit: 2 << 10}, &deliverytest.Buffered{Limit: 2 << 10}
		subscribe(t, p, stalled, "/topic/x", delivery.AckAuto, 0)
		subscribe(t, p, healthy, "/topic/x", delivery.AckAuto, 0)
		const n = 50
		for i := range n {
			publish(t, p, id, fmt.Sprintf("%02d%s", i, strings.Repeat("q", 500)))
			synctest.Wait()
			healthy.Drain()
		}
		synctest.Wait()
		if len(healthy.Bodies()) != n || len(stalled.SlowCloses()) != 1 {
			t.Fatalf("healthy got %d of %d, stalled slow closes %d", len(healthy.Bodies()), n, len(stalled.SlowCloses()))
		}
		d.Close()
		time.Sleep(2 * time.Second) // the consumer's linger ends
		synctest.Wait()
	})
}
