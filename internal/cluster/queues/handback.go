package queues

import (
	"context"
	"sync"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/titan-broker/titan/internal/cluster"
	"github.com/titan-broker/titan/internal/cluster/pull"
)

// Hand-back (issue 27: a rolling restart reorders nothing on a connection). A node that
// stops used to close its clients first and return what it held afterwards: the client
// reconnected to another node, whose pull got the queue's newer messages, while the
// stopping node's open pull request (up to fetchWait) went on taking messages it could
// no longer deliver, and its NAKs (after one trip record each) came last. About 5% of a
// rolling restart's messages reached the next consumer behind newer ones of their
// producer. A single node puts a leaving consumer's unacknowledged messages back at the
// head of the queue, in order; the cluster does the same at a step-down, before any
// client is closed:
//
//  1. HandBack marks the adapter handing back: no subscription is added, and every pull
//     loop ends once the pull under way ended (a pull request cannot be withdrawn: a
//     message JetStream sends to a request whose inbox is gone stays pending until the
//     ack wait). Until then the loop goes on delivering to its clients, which are still
//     connected, so delivery does not pause.
//  2. Each consumer then NAKs, in stream order, what it pulled and handed to no client
//     (each trip recorded first, undelivered.go) and what its clients have not
//     acknowledged. JetStream queues NAKed messages for redelivery in NAK order, ahead of
//     any newer message, and no pull request of this node is left to take them back.
//  3. The first NAK is a request, so the others are sent only once the new consumer
//     leader's interest in the acknowledgement subjects has reached this node (a NAK sent
//     before is dropped silently); the last NAK is a request too: the consumer leader
//     answers once it processed every NAK before it (one ack queue per consumer), so the
//     messages are queued for redelivery before the client is closed and can subscribe on
//     another node.
//
// A client's ACK of a message already handed back still acknowledges it (JetStream takes
// the ack of a pending message whatever delivery it names); its NACK or detach NAKs it no
// more, as another node may hold it by then.

// maxRecording bounds how many undelivered trips one give-back records at once.
const maxRecording = 16

// HandBack stops this node's pulling and hands back every message it pulled and has not
// had acknowledged, in stream order per queue, before the node's clients are closed (the
// cluster.Node's step-down hook, registered by New). Subscribe answers cluster.ErrClosed
// from now on. It returns once every pull loop handed back, or when ctx ends (a loop still
// pulling then hands back on its own once its pull ended). Idempotent.
func (q *Pattern) HandBack(ctx context.Context) {
	q.mu.Lock()
	if q.closed || q.handingBack.Load() {
		q.mu.Unlock()
		return
	}
	q.handingBack.Store(true)
	cs := make([]*consumer, 0, len(q.consumers))
	for _, c := range q.consumers {
		cs = append(cs, c)
	}
	q.mu.Unlock()
	for _, c := range cs {
		c.Kick() // a loop waiting for credit asks Done again
	}
	for _, c := range cs {
		select {
		case <-c.done:
		case <-ctx.Done():
			q.log.Warn("queue hand-back not finished before the shutdown went on", "queue", c.id.String(), "err", ctx.Err())
			return
		}
	}
}

// handBack is the end of c's loop during a HandBack: held (pulled, handed to no client)
// and every unacknowledged delivery go back in stream order, confirmed by the consumer
// leader.
func (c *consumer) handBack(ctx context.Context, held []jetstream.Msg) {
	c.mu.Lock()
	delivered := make([]jetstream.Msg, 0, len(c.inflight))
	for tag, f := range c.inflight {
		if !f.handed {
			f.handed = true
			c.inflight[tag] = f
			delivered = append(delivered, f.msg)
		}
	}
	c.mu.Unlock()
	c.q.giveBack(ctx, c.loop.Consumer(), held, delivered, true)
}

// giveBack NAKs undelivered (messages this node handed to no client: each trip is recorded
// first, concurrently, so the next delivery-count leaves it out) and delivered (messages
// a client had and did not acknowledge) together in stream order, so JetStream redelivers
// them in that order ahead of newer messages. confirm (cons is their consumer): through
// pull.GiveBack, which sends them once the consumer's leader and its interest are here
// and returns once the leader processed them, or when ctx ends.
func (q *Pattern) giveBack(ctx context.Context, cons jetstream.Consumer, undelivered, delivered []jetstream.Msg, confirm bool) {
	if len(undelivered)+len(delivered) == 0 {
		return
	}
	if len(undelivered) > 0 {
		sem := make(chan struct{}, maxRecording)
		var wg sync.WaitGroup
		for _, jm := range undelivered {
			sem <- struct{}{}
			wg.Go(func() {
				defer func() { <-sem }()
				q.record(ctx, jm) // undelivered.go
			})
		}
		wg.Wait()
	}
	all := append(append(make([]jetstream.Msg, 0, len(undelivered)+len(delivered)), undelivered...), delivered...)
	if !confirm {
		pull.NakInOrder(all)
		return
	}
	if err := pull.GiveBack(ctx, q.js.Conn(), cons, all); err != nil {
		q.log.Warn("queue hand-back not confirmed; its messages may come back after the ack wait", "messages", len(all), "err", err, "ack_wait", cluster.AckWait)
	}
}
