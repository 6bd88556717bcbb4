package router

import (
	"errors"

	"github.com/titan-broker/titan/internal/delivery"
	"github.com/titan-broker/titan/internal/dest"
	"github.com/titan-broker/titan/internal/frame"
)

// RabbitMQ's automatic reply subscription (issue 26; RabbitMQ STOMP guide, "Temp Queue
// Destinations"): a SEND whose reply-to names one of the sender's own temp-queues
// (/temp-queue/<name>) subscribes the sender to it, so that a RabbitMQ application that never
// SUBSCRIBEs to its reply queue still receives the replies. As in RabbitMQ the subscription's
// id is "/temp-queue/<name>" (the reply-to as the sender wrote it) and it acknowledges
// automatically. Unlike RabbitMQ, Titan also lets the owner SUBSCRIBE to its temp-queue
// explicitly: an explicit subscription takes the queue over from the automatic one (each
// reply is delivered once, to the explicit subscription), and a SEND finding one makes no
// automatic subscription. Automatic subscriptions are bounded by the temp-queue limit of the
// connection (MaxTempQueuesPerConnection) and end with the connection.

// autoReplySubscription makes sure the connection of c consumes its own temp-queue id (a
// SEND's reply-to, owner-qualified): it does nothing when the connection already consumes it
// (automatically or explicitly), or when c comes from no STOMP connection (an in-process
// publication has no delivery state). Otherwise it admits the temp-queue (created and
// counted against the connection's temp-queue limit) and subscribes the connection with id
// "/temp-queue/<name>", ack auto. It reports false after failing c: "temp-queue limit
// reached", "duplicate subscription id" (the connection uses that id for another
// subscription), or the refusal to create the queue. Read goroutine only.
func (r *Router) autoReplySubscription(c *Context, id dest.Identity) bool {
	conn := c.Conn
	port := r.ports.TempQueues
	if conn == nil || conn.Delivery == nil || port == nil || id.Pattern != dest.PatternTempQueue ||
		firstToken(id.Channel) != conn.Client.ID() {
		return true
	}
	if s, ok := conn.replies[id.Channel]; ok {
		if cur, live := conn.Delivery.Subscription(s.ID); live && cur == s {
			return true
		}
		delete(conn.replies, id.Channel) // unsubscribed by the client since
	}
	if conn.Delivery.Subscribed(id) {
		return true // an explicit SUBSCRIBE of the owner consumes it
	}
	// Bounded by the temp-queue limit: each automatic subscription is on a temp-queue of
	// the connection's own, which admitDestination counts once when it is made.
	if d := r.ports.Destinations; d != nil && !admitDestination(c, d, &r.opts, id, true) {
		return false
	}
	sub := &delivery.Subscription{
		ID: id.OwnerDestination(), Conn: conn.Delivery, Group: id.Group,
		Dest: dest.Destination{Pattern: dest.PatternTempQueue, Channel: id.Channel},
		Ack:  delivery.AckAuto, Prefetch: r.opts.DefaultPrefetch,
	}
	switch err := port.Subscribe(sub); {
	case err == nil:
	case errors.Is(err, delivery.ErrDuplicateSubscription):
		c.failWith("duplicate subscription id", "reply-to "+frame.Echo(sub.ID)+" subscribes this connection to its temp-queue with id "+
			frame.Echo(sub.ID)+", which another of its subscriptions uses", err)
		return false
	default:
		c.failWith("subscribe failed", "the connection could not be subscribed to its reply-to temp-queue", err)
		return false
	}
	if conn.replies == nil {
		conn.replies = make(map[string]*delivery.Subscription)
	}
	conn.replies[id.Channel] = sub
	return true
}

// explicitReplyStage runs on the temp-queue SUBSCRIBE route before the subscription is
// attached: an explicit SUBSCRIBE of the owner to a temp-queue its connection consumes
// through an automatic reply subscription ends that one first, so that the queue has one
// consumer on the connection and each reply is delivered once, to the subscription the
// client chose.
type explicitReplyStage struct{ deliveries Deliveries }

func (s explicitReplyStage) Apply(c *Context) {
	conn := c.Conn
	sub, ok := conn.replies[c.Identity.Channel]
	if !ok {
		return
	}
	delete(conn.replies, c.Identity.Channel)
	if cur, live := conn.Delivery.Subscription(sub.ID); live && cur == sub {
		_ = s.deliveries.Unsubscribe(conn.Delivery, sub.ID) // ack auto: nothing to redeliver
	}
}
