package broker_test

import (
	"errors"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/titan-broker/titan/internal/admin"
	"github.com/titan-broker/titan/internal/brokertest"
	"github.com/titan-broker/titan/internal/frame"
	"github.com/titan-broker/titan/internal/testwait"
)

// TestDurableSubscriptionRegistry: the durable subscription limit refuses a new name (and
// only a new name), concurrent SUBSCRIBEs never create more than the limit, offline ones are
// listed and deleted, and a live one cannot be deleted.
func TestDurableSubscriptionRegistry(t *testing.T) {
	cfg := brokertest.DefaultTestConfig()
	cfg.Limits.MaxDurableSubscriptions = 4
	b := brokertest.Run(t, cfg)
	addr := b.Addrs()[0]
	a := b.Admin()

	// Eight connections race for four names' worth of room with distinct names.
	var wg sync.WaitGroup
	results := make([]string, 8)
	for i := range results {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := brokertest.Connect(t, addr)
			c.SendFrame("SUBSCRIBE", "", "destination:/events-store/reg", "id:s", "durable-name:n"+strconv.Itoa(i), "receipt:r")
			f, err := c.Read(5 * time.Second)
			if err != nil {
				results[i] = err.Error()
				return
			}
			results[i] = "ERROR:" + f.Value("message")
			if f.Command == frame.CmdReceipt {
				results[i] = "RECEIPT:"
			}
			_ = c.Conn.Close() // the subscription goes offline
		}()
	}
	wg.Wait()
	ok, refused := 0, 0
	for _, r := range results {
		switch r {
		case "RECEIPT:":
			ok++
		case "ERROR:durable subscription limit reached":
			refused++
		default:
			t.Errorf("answer %q", r)
		}
	}
	if ok != 4 || refused != 4 {
		t.Fatalf("%d created, %d refused; want 4 and 4 (%v)", ok, refused, results)
	}
	var list *admin.DurableSubscriptionList
	testwait.Eventually(t, 5*time.Second, "4 durable subscriptions offline", func() bool {
		var err error
		list, err = a.DurableSubscriptions(admin.QueueRef{})
		if err != nil {
			t.Fatal(err)
		}
		offline := 0
		for _, d := range list.Subscriptions {
			if d.Live == 0 {
				offline++
			}
		}
		return offline == 4
	})
	name := list.Subscriptions[0].Name

	// Resuming an existing name at the limit is not a creation.
	c := brokertest.Connect(t, addr)
	c.SendFrame("SUBSCRIBE", "", "destination:/events-store/reg", "id:s", "durable-name:"+name, "receipt:r")
	c.Expect(frame.CmdReceipt, "receipt-id:r")
	ref := admin.QueueRef{Destination: "/events-store/reg"}
	var ae *admin.Error
	if _, err := a.DeleteDurableSubscription(ref, name); !errors.As(err, &ae) || ae.Code != admin.CodeDurableInUse {
		t.Fatalf("deleting a live durable subscription: %v, want %s", err, admin.CodeDurableInUse)
	}
	other := list.Subscriptions[1].Name
	if _, err := a.DeleteDurableSubscription(ref, other); err != nil {
		t.Fatal(err)
	}
	if _, err := a.DeleteDurableSubscription(ref, other); !errors.As(err, &ae) || ae.Code != admin.CodeDurableNotFound {
		t.Fatalf("deleting it again: %v, want %s", err, admin.CodeDurableNotFound)
	}
	// Room for exactly one more.
	c2 := brokertest.Connect(t, addr)
	c2.SendFrame("SUBSCRIBE", "", "destination:/events-store/reg", "id:a", "durable-name:fresh", "receipt:a")
	c2.Expect(frame.CmdReceipt, "receipt-id:a")
	c2.SendFrame("SUBSCRIBE", "", "destination:/events-store/reg", "id:b", "durable-name:fresh2", "receipt:b")
	c2.Expect(frame.CmdError, "message:durable subscription limit reached", "receipt-id:b")
}

// TestEventsPrefetchHoldsMessages: a client-individual topic subscriber with prefetch-count 1
// receives every event, one per ACK; the producer on another connection is never paused
// (every RECEIPT arrives before the first ACK) and nothing is dropped: the events beyond the
// prefetch are held for the subscriber (issue 30, 32).
func TestEventsPrefetchHoldsMessages(t *testing.T) {
	b := brokertest.Run(t, brokertest.DefaultTestConfig())
	addr := b.Addrs()[0]
	sub := brokertest.Connect(t, addr)
	sub.SendFrame("SUBSCRIBE", "", "destination:/topic/credit", "id:s", "ack:client-individual", "prefetch-count:1", "receipt:s")
	sub.Expect(frame.CmdReceipt, "receipt-id:s")
	prod := brokertest.Connect(t, addr)
	const n = 5
	for i := range n {
		prod.SendFrame("SEND", "e"+strconv.Itoa(i), "destination:/topic/credit", "receipt:"+strconv.Itoa(i))
	}
	for i := range n { // before any ACK: the producer did not wait for the subscriber
		prod.Expect(frame.CmdReceipt, "receipt-id:"+strconv.Itoa(i))
	}
	for i := range n {
		m := sub.Expect(frame.CmdMessage, "subscription:s")
		if string(m.Body) != "e"+strconv.Itoa(i) {
			t.Fatalf("message %d: body %q", i, m.Body)
		}
		if i < n-1 {
			sub.ExpectQuiet() // held at the prefetch until the ACK; the next Expect checks the order
		}
		sub.SendFrame("ACK", "", "id:"+m.Value("ack"))
	}
	if d := b.Dispatcher().EventsDropped.Load(); d != 0 {
		t.Fatalf("%d events dropped", d)
	}
	if p := b.FlowStats().Pauses.Load(); p != 0 {
		t.Fatalf("producer pauses = %d, want 0", p)
	}
}
