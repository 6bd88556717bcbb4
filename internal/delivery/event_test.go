package delivery

import (
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/titan-broker/titan/internal/delivery/deliverytest"
	"github.com/titan-broker/titan/internal/message"
)

func bodyMessage(body string) *message.Message {
	return message.Pack(&message.Parts{IDPrefix: "t", Group: "default", Destination: []byte("/topic/a"), Body: []byte(body)})
}

func subscribe(t *testing.T, c *Conn, id string, ack AckMode, prefetch int) *Subscription {
	t.Helper()
	sub := &Subscription{ID: id, Conn: c, Ack: ack, Prefetch: prefetch}
	if err := c.Add(sub); err != nil {
		t.Fatal(err)
	}
	return sub
}

// ackOldest acknowledges sub's oldest unacknowledged delivery.
func ackOldest(t *testing.T, sub *Subscription) {
	t.Helper()
	key, ok := sub.OldestPending()
	if !ok {
		t.Fatal("nothing pending to ACK")
	}
	if err := sub.Conn.Ack(key, sub.ID, false); err != nil {
		t.Fatal(err)
	}
}

// TestDeliverEventHeldAtPrefetch checks that client-ack prefetch keeps its meaning without a
// producer waiting: a client-individual subscription at its prefetch is written nothing
// more; its messages are held (EventHeld) and each ACK writes the next one, in order, so
// the unacknowledged count never exceeds the prefetch and nothing is lost.
func TestDeliverEventHeldAtPrefetch(t *testing.T) {
	w := &deliverytest.Buffered{}
	c := NewConn(w, nil)
	sub := subscribe(t, c, "s", AckClientIndividual, 2)
	want := []string{"m0", "m1", "m2", "m3", "m4"}
	for i, b := range want {
		res := c.DeliverEvent(sub, bodyMessage(b), EventPolicy{})
		if wantRes := map[bool]EventResult{true: EventWritten, false: EventHeld}[i < 2]; res != wantRes {
			t.Fatalf("delivery %d: %v, want %v", i, res, wantRes)
		}
	}
	if got := w.Bodies(); len(got) != 2 || sub.HeldCount() != 3 || c.PendingCount() != 2 {
		t.Fatalf("written %v, held %d, pending %d; want 2 written, 3 held, 2 pending", got, sub.HeldCount(), c.PendingCount())
	}
	for range 3 {
		ackOldest(t, sub)
		if n := c.PendingCount(); n != 2 {
			t.Fatalf("after an ACK %d pending, want the prefetch 2", n)
		}
	}
	ackOldest(t, sub)
	ackOldest(t, sub)
	if got := strings.Join(w.Bodies(), " "); got != strings.Join(want, " ") {
		t.Fatalf("written %q, want %q in order", got, strings.Join(want, " "))
	}
	if sub.HeldCount() != 0 || c.heldBytes != 0 || c.PendingCount() != 0 {
		t.Fatalf("held %d (%d bytes), pending %d after every ACK", sub.HeldCount(), c.heldBytes, c.PendingCount())
	}
}

// TestDeliverEventCumulativeAckDrains checks that a cumulative (client) ACK frees all the
// credit it resolves at once and writes as many held messages.
func TestDeliverEventCumulativeAckDrains(t *testing.T) {
	w := &deliverytest.Buffered{}
	c := NewConn(w, nil)
	sub := subscribe(t, c, "s", AckClient, 3)
	for i := range 6 {
		c.DeliverEvent(sub, bodyMessage(string(rune('a'+i))), EventPolicy{})
	}
	keys := make([]string, 0, 3)
	c.mu.Lock()
	for _, d := range sub.pending {
		keys = append(keys, d.key)
	}
	c.mu.Unlock()
	if err := c.Ack(keys[2], "s", false); err != nil { // acknowledges a, b and c
		t.Fatal(err)
	}
	if got := strings.Join(w.Bodies(), ""); got != "abcdef" || sub.HeldCount() != 0 {
		t.Fatalf("written %q, held %d; want abcdef and none", got, sub.HeldCount())
	}
}

// TestDeliverEventHeldSlowConsumer checks the slow-consumer timer of held messages: a
// subscription that holds messages and acknowledges nothing for SlowAfter is closed as a
// slow consumer (once); one whose ACKs keep writing held messages is not, and the timer
// stops once nothing is held.
func TestDeliverEventHeldSlowConsumer(t *testing.T) {
	pol := EventPolicy{SlowAfter: 30 * time.Second}
	t.Run("never acks", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			w := &deliverytest.Buffered{}
			c := NewConn(w, nil)
			sub := subscribe(t, c, "s", AckClient, 1)
			c.DeliverEvent(sub, bodyMessage("a"), pol)
			if res := c.DeliverEvent(sub, bodyMessage("b"), pol); res != EventHeld {
				t.Fatalf("at the prefetch: %v", res)
			}
			time.Sleep(pol.SlowAfter - time.Second)
			synctest.Wait()
			if len(w.SlowCloses()) != 0 {
				t.Fatal("closed before slow-consumer-timeout")
			}
			time.Sleep(time.Second)
			synctest.Wait()
			if len(w.SlowCloses()) != 1 || !strings.Contains(w.SlowCloses()[0], "prefetch") {
				t.Fatalf("slow closes %v, want one naming the prefetch", w.SlowCloses())
			}
			if res := c.DeliverEvent(sub, bodyMessage("c"), pol); res != EventRefused {
				t.Fatalf("after the slow-consumer close: %v, want EventRefused", res)
			}
			c.Close()
			if sub.Dropped.Load() != 1 || c.heldBytes != 0 {
				t.Fatalf("held message at close: dropped %d, held bytes %d", sub.Dropped.Load(), c.heldBytes)
			}
		})
	})
	t.Run("acks slowly", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			w := &deliverytest.Buffered{}
			c := NewConn(w, nil)
			sub := subscribe(t, c, "s", AckClient, 1)
			for i := range 5 {
				c.DeliverEvent(sub, bodyMessage(string(rune('a'+i))), pol)
			}
			for range 4 { // one ACK every 20 s: each writes a held message
				time.Sleep(20 * time.Second)
				ackOldest(t, sub)
			}
			time.Sleep(5 * time.Minute) // nothing held: no timer runs
			synctest.Wait()
			if len(w.SlowCloses()) != 0 || strings.Join(w.Bodies(), "") != "abcde" {
				t.Fatalf("slow closes %v, written %v", w.SlowCloses(), w.Bodies())
			}
		})
	})
}

// TestDeliverEventOverflow checks the hard bound of a connection's events buffer: past it
// a CLOSE-policy subscriber is closed as a slow consumer at once (EventOverflow, one
// close), counting bytes queued on the writer and held for credit; a single message into
// an empty connection goes through whatever its size.
func TestDeliverEventOverflow(t *testing.T) {
	big := bodyMessage(strings.Repeat("x", 4000))
	pol := EventPolicy{MaxBytes: 10000}
	w := &deliverytest.Buffered{Limit: 2000}
	c := NewConn(w, nil)
	sub := subscribe(t, c, "s", AckAuto, 0)
	if res := c.DeliverEvent(sub, bodyMessage(strings.Repeat("y", 20000)), pol); res != EventWritten {
		t.Fatalf("one message larger than the bound into an empty connection: %v", res)
	}
	w.Drain() // the writer drained it
	for i := range 2 {
		if res := c.DeliverEvent(sub, big, pol); res != EventWritten {
			t.Fatalf("message %d, over the writer's limit but under the bound: %v", i, res)
		}
	}
	if res := c.DeliverEvent(sub, big, pol); res != EventOverflow {
		t.Fatalf("past the bound: %v, want EventOverflow", res)
	}
	if res := c.DeliverEvent(sub, big, pol); res != EventRefused || len(w.SlowCloses()) != 1 {
		t.Fatalf("after the overflow: %v with %d slow closes, want EventRefused and 1", res, len(w.SlowCloses()))
	}

	// Held messages count toward the bound too.
	w2 := &deliverytest.Buffered{}
	c2 := NewConn(w2, nil)
	held := subscribe(t, c2, "h", AckClient, 1)
	results := []EventResult{}
	for range 4 {
		results = append(results, c2.DeliverEvent(held, big, pol))
	}
	if want := []EventResult{EventWritten, EventHeld, EventOverflow, EventRefused}; !equalResults(results, want) {
		t.Fatalf("client-ack subscription filling the bound: %v, want %v", results, want)
	}
}

func equalResults(a, b []EventResult) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestDeliverEventDropPolicy checks slow-consumer-policy DROP: a connection over its limit
// or a subscription at its prefetch gets EventDropped (nothing held, nothing closed).
func TestDeliverEventDropPolicy(t *testing.T) {
	pol := EventPolicy{Drop: true}
	w := &deliverytest.Buffered{Limit: 100}
	c := NewConn(w, nil)
	auto := subscribe(t, c, "a", AckAuto, 0)
	ca := subscribe(t, c, "c", AckClient, 1)
	if res := c.DeliverEvent(auto, bodyMessage(strings.Repeat("z", 200)), pol); res != EventWritten {
		t.Fatalf("first message: %v", res)
	}
	if res := c.DeliverEvent(auto, bodyMessage("more"), pol); res != EventDropped {
		t.Fatalf("over the writer's limit: %v, want EventDropped", res)
	}
	w.Drain()
	c.DeliverEvent(ca, bodyMessage("one"), pol)
	if res := c.DeliverEvent(ca, bodyMessage("two"), pol); res != EventDropped || ca.HeldCount() != 0 {
		t.Fatalf("at the prefetch: %v, held %d; want EventDropped and none held", res, ca.HeldCount())
	}
	if len(w.SlowCloses()) != 0 {
		t.Fatalf("DROP closed the subscriber: %v", w.SlowCloses())
	}
}
