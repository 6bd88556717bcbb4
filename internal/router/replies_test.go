package router

import (
	"testing"

	"github.com/titan-broker/titan/internal/delivery"
	"github.com/titan-broker/titan/internal/dest"
	"github.com/titan-broker/titan/internal/frame"
)

// addingEngine is a fakeEngine whose Subscribe registers the subscription on its
// connection, as every pattern does.
type addingEngine struct{ fakeEngine }

func (e *addingEngine) Subscribe(sub *delivery.Subscription) error { return sub.Conn.Add(sub) }

func newReplyTest(o Options) (*Router, *Conn, *fakeClient) {
	e := &addingEngine{}
	r := New(Ports{Deliveries: &delivery.Registry{}, Events: e, Queues: e, Requests: e, TempQueues: e,
		Destinations: madeDestinations{}}, o)
	cl := &fakeClient{v: frame.V12}
	return r, r.Open(cl), cl
}

// madeDestinations is the Destinations port as the dispatcher is to the router: a
// destination exists once made (no broker-wide bound).
type madeDestinations map[dest.Identity]bool

func (d madeDestinations) Exists(id dest.Identity) bool { return d[id] }

func (d madeDestinations) Ensure(id dest.Identity) (bool, error) {
	if d[id] {
		return false, nil
	}
	d[id] = true
	return true, nil
}

// subscriptionIDs returns the ids of c's subscriptions on the temp-queue channel name of the
// fake client (session "test").
func tempSubscriptionIDs(c *Conn, name string) []string {
	var ids []string
	for _, s := range c.Delivery.Subscriptions() {
		if s.Destination == "/temp-queue/test/"+name || s.Destination == "/temp-queue/"+name {
			ids = append(ids, s.ID)
		}
	}
	return ids
}

func requireTempSubs(t *testing.T, c *Conn, name string, want ...string) {
	t.Helper()
	got := tempSubscriptionIDs(c, name)
	if len(got) != len(want) {
		t.Fatalf("subscriptions on /temp-queue/%s: %v, want %v", name, got, want)
	}
	for i := range got {
		if got[i] != want[i] {
			t.Fatalf("subscriptions on /temp-queue/%s: %v, want %v", name, got, want)
		}
	}
}

// TestReplyToTempQueueSubscribesAutomatically: RabbitMQ's rule — a SEND with
// reply-to:/temp-queue/<name>, on every SEND route that carries a reply-to (queue, topic,
// command), subscribes the sender to its temp-queue with id /temp-queue/<name>, ack auto,
// once however many SENDs name it.
func TestReplyToTempQueueSubscribesAutomatically(t *testing.T) {
	for _, d := range []string{"/queue/work", "/topic/work", "/command/work"} {
		r, c, cl := newReplyTest(Options{})
		for range 3 {
			r.Handle(c, fr(frame.CmdSend, "req", "destination", d, "reply-to", "/temp-queue/answers", "receipt", "r"))
		}
		if len(cl.errs) != 0 {
			t.Fatalf("%s: errors %v", d, cl.errs)
		}
		requireTempSubs(t, c, "answers", "/temp-queue/answers")
		sub, _ := c.Delivery.Subscription("/temp-queue/answers")
		want := dest.Identity{Group: dest.DefaultGroup, Pattern: dest.PatternTempQueue, Channel: "test.answers"}
		if sub.Identity() != want || sub.Ack != delivery.AckAuto {
			t.Fatalf("%s: automatic subscription %+v ack %v, want %+v ack auto", d, sub.Identity(), sub.Ack, want)
		}
	}
}

// TestExplicitTempQueueSubscriptionTakesOver: an explicit SUBSCRIBE of the owner to its
// temp-queue replaces the automatic subscription (one consumer on the connection, so each
// reply is delivered once), a SEND then makes none, and once the explicit one is gone the
// next SEND subscribes automatically again.
func TestExplicitTempQueueSubscriptionTakesOver(t *testing.T) {
	r, c, cl := newReplyTest(Options{})
	send := func() {
		r.Handle(c, fr(frame.CmdSend, "req", "destination", "/queue/work", "reply-to", "/temp-queue/answers"))
	}
	send()
	requireTempSubs(t, c, "answers", "/temp-queue/answers")
	r.Handle(c, fr(frame.CmdSubscribe, "", "destination", "/temp-queue/answers", "id", "mine"))
	requireTempSubs(t, c, "answers", "mine")
	send()
	requireTempSubs(t, c, "answers", "mine")
	r.Handle(c, fr(frame.CmdUnsubscribe, "", "id", "mine"))
	requireTempSubs(t, c, "answers")
	send()
	requireTempSubs(t, c, "answers", "/temp-queue/answers")
	// The explicit subscription may even take the automatic one's id.
	r.Handle(c, fr(frame.CmdSubscribe, "", "destination", "/temp-queue/answers", "id", "/temp-queue/answers", "ack", "client"))
	requireTempSubs(t, c, "answers", "/temp-queue/answers")
	if sub, _ := c.Delivery.Subscription("/temp-queue/answers"); sub.Ack != delivery.AckClient {
		t.Fatalf("the explicit subscription did not replace the automatic one: ack %v", sub.Ack)
	}
	if len(cl.errs) != 0 {
		t.Fatalf("errors %v", cl.errs)
	}
}

// TestAutomaticReplySubscriptionsAreBounded: the automatic subscriptions of one connection
// are bounded by its temp-queue limit; the SEND over it is refused with the limit's ERROR.
// A reply-to naming another connection's temp-queue, or anything but a temp-queue,
// subscribes nothing.
func TestAutomaticReplySubscriptionsAreBounded(t *testing.T) {
	r, c, cl := newReplyTest(Options{MaxTempQueuesPerConnection: 2})
	r.Handle(c, fr(frame.CmdSend, "", "destination", "/queue/w", "reply-to", "/queue/replies"))
	for _, n := range []string{"a", "b", "a"} {
		r.Handle(c, fr(frame.CmdSend, "", "destination", "/queue/w", "reply-to", "/temp-queue/"+n))
	}
	if len(cl.errs) != 0 || c.Delivery.SubscriptionCount() != 2 {
		t.Fatalf("errors %v, %d subscriptions (want 2)", cl.errs, c.Delivery.SubscriptionCount())
	}
	r.Handle(c, fr(frame.CmdSend, "", "destination", "/queue/w", "reply-to", "/temp-queue/c", "receipt", "r9"))
	if len(cl.errs) != 1 || cl.errs[0].Reason != "temp-queue limit reached" || cl.errs[0].ReceiptID != "r9" {
		t.Fatalf("errors %+v, want temp-queue limit reached", cl.errs)
	}
}

// TestInProcessPublicationSubscribesNothing: a publication without a STOMP connection
// (HTTP, embed) has no delivery state to subscribe; its reply-to is still qualified.
func TestInProcessPublicationSubscribesNothing(t *testing.T) {
	r, _, _ := newReplyTest(Options{})
	p, err := r.Publish(Publication{Destination: "/queue/w", Headers: []frame.Header{{Key: "reply-to", Value: "/temp-queue/x"}}})
	if err != nil {
		t.Fatal(err)
	}
	if rt, _ := p.Message.Header("reply-to"); rt != "/temp-queue/"+nativeSession+"/x" {
		t.Fatalf("reply-to %q", rt)
	}
}
