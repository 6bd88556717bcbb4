package topicsub_test

import (
	"fmt"
	"unsafe"

	"errors"
	"testing"

	"github.com/titan-broker/titan/internal/dest"
	"github.com/titan-broker/titan/internal/dispatch"
	"github.com/titan-broker/titan/internal/pointqueue"
	"github.com/titan-broker/titan/internal/selector"
	"github.com/titan-broker/titan/internal/store/memstore"
	"github.com/titan-broker/titan/internal/topicsub"
)

func newRegistry(t *testing.T, meta topicsub.Meta, max int) (*topicsub.Registry, *dispatch.Dispatcher) {
	t.Helper()
	d := dispatch.New(dispatch.Options{})
	pointqueue.New(d, pointqueue.Options{})
	t.Cleanup(d.Close)
	r := topicsub.New(topicsub.Options{Dispatcher: d, Meta: meta, Max: max})
	if err := r.Load(); err != nil {
		t.Fatal(err)
	}
	return r, d
}

func feeds(r *topicsub.Registry, group, channel string) []dest.Identity {
	return r.Feeds(dest.Identity{Group: group, Pattern: dest.PatternEvents, Channel: channel}, headers{}, nil)
}

// headers is a message as a selector reads it: its headers only.
type headers map[string]string

func (h headers) Header(k string) (string, bool) { v, ok := h[k]; return v, ok }
func (headers) MessageID() string                { return "m" }
func (headers) TimestampMs() int64               { return 0 }
func (headers) Persistent() bool                 { return true }
func (headers) Priority() int                    { return 4 }

// TestRegistry: attach makes a stored subscription and its queue; feeds follow filters
// (wildcards, groups); the limit refuses a new one only; delete forgets it; a restart (Load
// on the same store) brings back every subscription and its queue.
func TestRegistry(t *testing.T) {
	st := memstore.New()
	r, d := newRegistry(t, st, 3)
	orders := dest.Destination{Pattern: dest.PatternEvents, Channel: "orders.>", Wildcard: true}
	q1, created, err := r.Attach(topicsub.Key{Group: "default", Owner: "app.1", Name: "billing/eu"}, orders)
	if err != nil || !created {
		t.Fatalf("attach: %v created %v", err, created)
	}
	if q1.Channel != "$durable.app%2E1.billing%2Feu" || q1.Pattern != dest.PatternQueues {
		t.Fatalf("queue %+v", q1)
	}
	if _, ok := d.Lookup(q1); !ok {
		t.Fatal("no queue made")
	}
	q2, _, err := r.Attach(topicsub.Key{Group: "default", Name: "sub-1"}, dest.Destination{Pattern: dest.PatternEvents, Channel: "orders.eu"})
	if err != nil {
		t.Fatal(err)
	}
	if _, created, _ := r.Attach(topicsub.Key{Group: "default", Name: "sub-1"}, dest.Destination{Pattern: dest.PatternEvents, Channel: "orders.eu"}); created {
		t.Fatal("re-attaching created a new subscription")
	}
	if got := feeds(r, "default", "orders.eu"); len(got) != 2 {
		t.Fatalf("orders.eu feeds %v, want both", got)
	}
	if got := feeds(r, "default", "orders.us"); len(got) != 1 || got[0] != q1 {
		t.Fatalf("orders.us feeds %v, want %v", got, q1)
	}
	if got := feeds(r, "other", "orders.eu"); len(got) != 0 {
		t.Fatalf("another group feeds %v", got)
	}
	if _, _, err := r.Attach(topicsub.Key{Group: "g2", Name: "x"}, dest.Destination{Pattern: dest.PatternEvents, Channel: "a"}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := r.Attach(topicsub.Key{Group: "g2", Name: "y"}, dest.Destination{Pattern: dest.PatternEvents, Channel: "a"}); !errors.Is(err, dispatch.ErrDurableSubscriptionLimit) {
		t.Fatalf("4th subscription: %v, want the limit", err)
	}
	if err := r.Delete(topicsub.Key{Group: "g2", Name: "x"}); err != nil {
		t.Fatal(err)
	}
	if err := r.Delete(topicsub.Key{Group: "g2", Name: "x"}); !errors.Is(err, dispatch.ErrNoDurableSubscription) {
		t.Fatalf("second delete: %v", err)
	}

	// A restart: a fresh dispatcher and registry over the same store.
	r2, d2 := newRegistry(t, st, 3)
	if r2.Count() != 2 {
		t.Fatalf("after restart %d subscriptions, want 2", r2.Count())
	}
	for _, q := range []dest.Identity{q1, q2} {
		if _, ok := d2.Lookup(q); !ok {
			t.Fatalf("queue %v not made again at start", q)
		}
	}
	if got := feeds(r2, "default", "orders.eu"); len(got) != 2 {
		t.Fatalf("after restart orders.eu feeds %v", got)
	}
	// An operator deletes a subscription's queue: the subscription goes with it.
	if err := d2.Delete(q2, true); err != nil {
		t.Fatal(err)
	}
	if got := feeds(r2, "default", "orders.eu"); len(got) != 1 || r2.Count() != 1 {
		t.Fatalf("after its queue's deletion feeds %v, count %d", got, r2.Count())
	}
	// Moving a subscription to another topic.
	if _, created, err := r2.Attach(topicsub.Key{Group: "default", Owner: "app.1", Name: "billing/eu"}, dest.Destination{Pattern: dest.PatternEvents, Channel: "invoices"}); err != nil || created {
		t.Fatalf("move: %v created %v", err, created)
	}
	if got := feeds(r2, "default", "orders.us"); len(got) != 0 {
		t.Fatalf("moved subscription still fed by its old topic: %v", got)
	}
	if got := feeds(r2, "default", "invoices"); len(got) != 1 {
		t.Fatalf("moved subscription not fed by its new topic: %v", got)
	}
}

// BenchmarkFeedsNone is the cost a topic SEND pays when durable subscriptions exist but
// none matches.
func BenchmarkFeedsNone(b *testing.B) {
	d := dispatch.New(dispatch.Options{})
	pointqueue.New(d, pointqueue.Options{})
	r := topicsub.New(topicsub.Options{Dispatcher: d})
	if _, _, err := r.Attach(topicsub.Key{Group: "default", Name: "s"}, dest.Destination{Pattern: dest.PatternEvents, Channel: "other"}); err != nil {
		b.Fatal(err)
	}
	id := dest.Identity{Group: "default", Pattern: dest.PatternEvents, Channel: "orders.eu"}
	var m selector.Message = headers{}
	b.ReportAllocs()
	for b.Loop() {
		if r.Feeds(id, m, nil) != nil {
			b.Fatal("fed")
		}
	}
}

// TestAttachCopiesKey: the key a SUBSCRIBE names may point into a read buffer that is then
// reused; the registry keeps its own copy.
func TestAttachCopiesKey(t *testing.T) {
	r, _ := newRegistry(t, nil, 0)
	buf := []byte("client-1 sub-1")
	k := topicsub.Key{Group: "default", Owner: unsafeString(buf[:8]), Name: unsafeString(buf[9:])}
	if _, _, err := r.Attach(k, dest.Destination{Pattern: dest.PatternEvents, Channel: "a"}); err != nil {
		t.Fatal(err)
	}
	copy(buf, "XXXXXXXXXXXXXX")
	if err := r.Delete(topicsub.Key{Group: "default", Owner: "client-1", Name: "sub-1"}); err != nil {
		t.Fatalf("delete after the buffer was reused: %v", err)
	}
}

func unsafeString(b []byte) string { return unsafe.String(&b[0], len(b)) }

// TestSelector: a subscription's selector decides which messages Feeds gives its queue to,
// survives a restart (Load compiles it again), and attaching with another selector makes it
// afresh.
func TestSelector(t *testing.T) {
	st := memstore.New()
	r, _ := newRegistry(t, st, 0)
	red, err := selector.Compile("color = 'red'")
	if err != nil {
		t.Fatal(err)
	}
	k := topicsub.Key{Group: "default", Owner: "app", Name: "reds"}
	topic := dest.Destination{Pattern: dest.PatternEvents, Channel: "orders"}
	if _, created, err := r.AttachSelected(k, topic, red); err != nil || !created {
		t.Fatalf("attach: %v created %v", err, created)
	}
	// sels reports which of a red and a blue message the subscription's queue is fed:
	// "color = 'red'" when only the red one, "" when both.
	sels := func(r *topicsub.Registry) []string {
		id := dest.Identity{Group: "default", Pattern: dest.PatternEvents, Channel: "orders"}
		reds := r.Feeds(id, headers{"color": "red"}, nil)
		blues := r.Feeds(id, headers{"color": "blue"}, nil)
		switch {
		case len(reds) == 1 && len(blues) == 0:
			return []string{"color = 'red'"}
		case len(reds) == 1 && len(blues) == 1 && reds[0] == blues[0]:
			return []string{""}
		}
		return []string{fmt.Sprintf("red fed %v, blue fed %v", reds, blues)}
	}
	if got := sels(r); len(got) != 1 || got[0] != "color = 'red'" {
		t.Fatalf("feeds selectors %q", got)
	}
	if l := r.List(); len(l) != 1 || l[0].Selector != "color = 'red'" {
		t.Fatalf("list %+v", l)
	}
	r2, _ := newRegistry(t, st, 0)
	if got := sels(r2); len(got) != 1 || got[0] != "color = 'red'" {
		t.Fatalf("after restart feeds selectors %q", got)
	}
	if _, created, err := r2.AttachSelected(k, topic, red); err != nil || created {
		t.Fatalf("same selector: %v created %v", err, created)
	}
	if _, _, err := r2.AttachSelected(k, topic, nil); err != nil {
		t.Fatal(err)
	}
	if got := sels(r2); len(got) != 1 || got[0] != "" {
		t.Fatalf("after dropping the selector feeds selectors %q", got)
	}
}
