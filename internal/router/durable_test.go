package router

import (
	"testing"

	"github.com/titan-broker/titan/internal/delivery"
	"github.com/titan-broker/titan/internal/dest"
	"github.com/titan-broker/titan/internal/frame"
	"github.com/titan-broker/titan/internal/selector"
)

// fakeTopics records what reached the DurableTopics port.
type fakeTopics struct{ attached, deleted []string }

func (f *fakeTopics) AttachDurable(group, owner, name string, filter dest.Destination, _ *selector.Selector) (dest.Identity, error) {
	f.attached = append(f.attached, owner+"/"+name+"@"+filter.Channel)
	return dest.Identity{Group: group, Pattern: dest.PatternQueues, Channel: "$durable." + name}, nil
}
func (f *fakeTopics) DeleteDurable(group, owner, name string) error {
	f.deleted = append(f.deleted, owner+"/"+name)
	return nil
}
func (f *fakeTopics) Feeds(_ dest.Identity, _ selector.Message, dst []dest.Identity) []dest.Identity {
	return dst
}

// allowStage stands for the authorization stage of a broker with security configured: it
// filters every events subscription's deliveries per channel.
type allowStage struct{}

func (allowStage) Apply(c *Context) { c.SetAllow(func(string) bool { return true }) }

// TestDurableTopicStage: each dialect's durable SUBSCRIBE reaches the port with its key and
// is attached as a queue subscription; an authorized wildcard one is refused (its queue would
// be fed without the per-channel check); without the port (cluster mode) it is an ERROR.
func TestDurableTopicStage(t *testing.T) {
	topics := &fakeTopics{}
	subs := &recordingSubscriber{}
	e := &fakeEngine{}
	r := New(Ports{Deliveries: e, Events: e, Queues: patternOf{e, subs}, DurableTopics: topics}, Options{Authorize: allowStage{}})
	cl := &fakeClient{v: frame.V12}
	c := r.Open(cl)
	c.ClientID = "app"
	r.Handle(c, fr(frame.CmdSubscribe, "", "destination", "/topic/a", "id", "s1", "durable", "true"))
	r.Handle(c, fr(frame.CmdSubscribe, "", "destination", "/topic/a", "id", "s2", "activemq.subscriptionName", "n2"))
	r.Handle(c, fr(frame.CmdSubscribe, "", "destination", "/topic/b", "id", "s3", "durable-subscription-name", "n3"))
	if len(cl.errs) != 0 {
		t.Fatalf("errors %+v", cl.errs)
	}
	want := []string{"/s1@a", "app/n2@a", "app/n3@b"}
	if len(topics.attached) != 3 || topics.attached[0] != want[0] || topics.attached[1] != want[1] || topics.attached[2] != want[2] {
		t.Fatalf("attached %v, want %v", topics.attached, want)
	}
	if len(subs.subs) != 3 || subs.subs[0].Dest.Pattern != dest.PatternQueues || subs.subs[0].Dest.Channel != "$durable.s1" {
		t.Fatalf("queue subscriptions %+v", subs.subs)
	}
	r.Handle(c, fr(frame.CmdSubscribe, "", "destination", "/topic/a/>", "id", "s4", "durable", "true"))
	if len(cl.errs) != 1 || cl.errs[0].Reason != "access refused" {
		t.Fatalf("wildcard durable under authorization: errs %+v", cl.errs)
	}

	r2, _, c2, cl2 := newTest(Options{})
	r2.Handle(c2, fr(frame.CmdSubscribe, "", "destination", "/topic/a", "id", "s1", "durable", "true"))
	if len(cl2.errs) != 1 || cl2.errs[0].Reason != "durable subscriptions unavailable" {
		t.Fatalf("without the port: errs %+v", cl2.errs)
	}
}

// recordingSubscriber records the subscriptions handed to it.
type recordingSubscriber struct{ subs []*delivery.Subscription }

func (s *recordingSubscriber) Subscribe(sub *delivery.Subscription) error {
	s.subs = append(s.subs, sub)
	return nil
}

// patternOf is a Pattern publishing through one fake and subscribing through another.
type patternOf struct {
	Publisher
	Subscriber
}

// TestDeleteDurableInvalidGroup: an UNSUBSCRIBE that deletes a durable subscription in a
// group whose name is invalid is refused ("invalid group", as a SUBSCRIBE with it would be)
// instead of deleting the default group's subscription of that name.
func TestDeleteDurableInvalidGroup(t *testing.T) {
	topics := &fakeTopics{}
	e := &fakeEngine{}
	r := New(Ports{Deliveries: e, Events: e, Queues: e, DurableTopics: topics}, Options{})
	cl := &fakeClient{v: frame.V12}
	c := r.Open(cl)
	r.Handle(c, fr(frame.CmdUnsubscribe, "", "id", "s1", "durable", "true", "group", "no spaces"))
	if len(cl.errs) != 1 || cl.errs[0].Reason != "invalid group" || len(topics.deleted) != 0 {
		t.Fatalf("errs %+v, deleted %v", cl.errs, topics.deleted)
	}
	r.Handle(c, fr(frame.CmdUnsubscribe, "", "id", "s1", "durable", "true", "group", "eu"))
	if len(topics.deleted) != 1 {
		t.Fatalf("valid group: deleted %v", topics.deleted)
	}
}
