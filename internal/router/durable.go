package router

import (
	"errors"

	"github.com/titan-broker/titan/internal/delivery"
	"github.com/titan-broker/titan/internal/dest"
	"github.com/titan-broker/titan/internal/message"
)

// Durable topic subscriptions (issue 26; see DurableTopics): the SUBSCRIBE stage that turns
// a durable request into a queue subscription, the SEND stage that feeds the queues of the
// durable subscriptions a topic message matches, and the deletion an UNSUBSCRIBE asks for.

// durableTopicStage runs on the events SUBSCRIBE route after the subscription stage. A
// SUBSCRIBE that asks for a durable subscription (parseDurable) is attached to the
// subscription's queue through the queues pattern, with the ack mode and prefetch it asked
// for, and the route halts (answered by Final); any other SUBSCRIBE goes on to the events
// pattern.
type durableTopicStage struct {
	topics DurableTopics
	queues Subscriber
}

func (s durableTopicStage) Apply(c *Context) {
	req, asked := parseDurable(c, c.Frame, c.Conn.ClientID)
	if !asked || c.Err != nil {
		return
	}
	if s.topics == nil || s.queues == nil {
		c.fail("durable subscriptions unavailable", req.header+" asks for a durable topic subscription, which this server does not keep (cluster mode on an external NATS: see the README's cluster differences)")
		return
	}
	sub := c.Subscription()
	if sub.Allow != nil && sub.Dest.Wildcard {
		// Authorization filters a wildcard subscription per delivered channel; a durable
		// subscription's queue is fed without it, so it could carry channels the user may not
		// consume.
		c.fail("access refused", "a durable subscription with a wildcard is not available when security is configured: subscribe durably to each channel")
		return
	}
	q, err := s.topics.AttachDurable(c.Identity.Group, req.owner, req.name, sub.Dest, sub.Selector)
	if err != nil {
		failDurable(c, err)
		return
	}
	sub.Group = q.Group
	sub.Dest = dest.Destination{Pattern: dest.PatternQueues, Channel: q.Channel}
	sub.Allow = nil // the queue's messages are the topic's, authorized at SUBSCRIBE
	if sub.Selector != nil && !HonoursSelectors(s.queues) {
		// The selector decided what entered the queue (Feeds): its consumer needs none
		// (cluster queues do not filter consumers).
		sub.Selector = nil
	}
	attachStage{port: s.queues}.Apply(c)
	c.Halt = true
}

// failDurable records the ERROR for a durable subscription the port refused.
func failDurable(c *Context, err error) {
	switch {
	case errors.Is(err, ErrDurableSubscriptionLimit):
		c.failWith("durable subscription limit reached", "the broker holds its maximum number of durable subscriptions (max-durable-subscriptions); reuse a name or delete unused ones", err)
	case errors.Is(err, ErrDurableSubscriptionInUse):
		c.failWith("durable subscription in use", "another connection consumes this durable subscription; it cannot be moved to another topic or deleted meanwhile", err)
	case errors.Is(err, ErrNoDurableSubscription):
		c.failWith("unknown durable subscription", "no durable subscription has this name", err)
	default:
		c.failWith(storeRefusal(err), "the durable subscription could not be stored", err)
	}
}

// deleteDurable deletes the durable subscription an UNSUBSCRIBE names in its peer's way
// (RabbitMQ durable:true or persistent:true with the id; ActiveMQ activemq.subscriptionName,
// Artemis durable-subscription-name, with the connection's client-id). handled reports that
// the frame asked for it (the outcome is recorded on c). live reports that the UNSUBSCRIBE
// ended a subscription of this connection: a RabbitMQ UNSUBSCRIBE durable:true of a
// subscription that was not durable is then not an error.
func deleteDurable(c *Context, topics DurableTopics, live bool) (handled bool) {
	req, asked := parseDurable(c, c.Frame, c.Conn.ClientID)
	if !asked || c.Err != nil {
		return asked
	}
	if topics == nil {
		c.fail("durable subscriptions unavailable", req.header+" asks to delete a durable topic subscription, which this server does not keep (cluster mode on an external NATS)")
		return true
	}
	group, ok := FrameGroup(c.Frame)
	if !ok { // not the default group's subscription of that name: refused, as on SUBSCRIBE
		failGroup(c)
		return true
	}
	err := topics.DeleteDurable(group, req.owner, req.name)
	if err == nil || (live && errors.Is(err, ErrNoDurableSubscription)) {
		return true
	}
	failDurable(c, err)
	return true
}

// durableFeedStage runs on the events SEND route before the events are published: each
// durable subscription whose filter matches the destination gets a copy of the message on
// its queue. A persistent message's copies are stored (one group commit for all of them)
// before any is published, so the SEND's RECEIPT means every durable subscription it feeds
// has it on disk. A copy its queue refuses (full under FAIL, paused) fails the SEND; copies
// already published to other subscriptions stay (at-least-once, as after any ERROR).
type durableFeedStage struct {
	topics DurableTopics
	queues Publisher
	store  Persister
}

func (s durableFeedStage) Apply(c *Context) {
	m := c.Message
	queues := s.topics.Feeds(c.Identity, delivery.Selectable(m), nil)
	if len(queues) == 0 {
		return
	}
	copies := make([]*message.Message, len(queues))
	for i := range queues {
		copies[i] = message.Rebuilt(m, m.Headers)
	}
	forget := func(from int) {
		for j := from; j < len(queues); j++ {
			if s.store != nil && copies[j].Sequence != 0 {
				s.store.Forget(queues[j], copies[j])
			}
		}
	}
	if s.store != nil && m.Persistent {
		var err error
		waits := make([]func() error, 0, len(queues))
		for i, q := range queues {
			w, e := s.store.PersistAsync(q, copies[i])
			if e != nil {
				err = e
				break
			}
			waits = append(waits, w)
		}
		for _, w := range waits {
			if e := w(); e != nil && err == nil {
				err = e
			}
		}
		if err != nil {
			forget(0)
			c.failWith(storeRefusal(err), "the broker could not store the message for a durable subscription; it was not accepted", errors.Join(ErrNotStored, err))
			return
		}
	}
	for i, q := range queues {
		if _, err := s.queues.Publish(q, copies[i], c.Conn.Client.Done()); err != nil {
			forget(i)
			failPublish(c, err, "a durable subscription of this topic")
			return
		}
	}
}
