package cluster

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Receipted ACKs are stored before their RECEIPT (issue 27). A client ACK settles a
// JetStream message with +ACK, and a plain +ACK is fire-and-forget: its RECEIPT could be
// written before the consumer's leader applied it, so a crash could redeliver a message
// whose ACK the client saw receipted. Acks therefore carry a reply subject (JetStream's
// "double ack": the consumer leader answers once the ack is applied, in a cluster once its
// Raft group committed it), all answered on one subscription of the node, without waiting:
// an ACK without a receipt costs nothing more than before. Sync, called by the router
// before the RECEIPT of an ACK that asked for one, waits until every ack sent so far is
// answered.

// ackResend is how long an ack may wait for its answer before Sync sends it again (the
// consumer leader may have changed); acks are idempotent.
const ackResend = 2 * time.Second

// pruneEvery is how many acks are sent between two sweeps of answers that never came.
const pruneEvery = 4096

// Acks sends a node's acknowledgements as double acks and tracks their answers (see
// above). The zero value is not usable: Node.Acks. Safe for concurrent use.
type Acks struct {
	nc     *nats.Conn
	prefix string          // reply subject prefix: <inbox>.<token>
	life   context.Context // the node's Context: Sync gives up when it ends

	mu      sync.Mutex
	cond    *sync.Cond            // on mu: an answer arrived
	sub     *nats.Subscription    // guarded by mu; made on first use
	next    uint64                // last token given; guarded by mu
	pending map[uint64]pendingAck // unanswered acks by token; guarded by mu
}

type pendingAck struct {
	reply string // the message's ack subject
	body  []byte
	sent  time.Time
}

func newAcks(nc *nats.Conn, life context.Context) *Acks {
	a := &Acks{nc: nc, prefix: nc.NewRespInbox(), pending: make(map[uint64]pendingAck), life: life}
	a.cond = sync.NewCond(&a.mu)
	context.AfterFunc(life, func() {
		a.mu.Lock()
		a.cond.Broadcast() // Sync gives up
		a.mu.Unlock()
	})
	return a
}

// Acks returns the node's acknowledgement tracker.
func (n *Node) Acks() *Acks { return n.acks }

// Ack acknowledges jm (+ACK), asking for JetStream's answer; it does not wait for it.
func (a *Acks) Ack(jm jetstream.Msg) error { return a.send(jm, []byte("+ACK")) }

// Term terminates jm (+TERM), asking for JetStream's answer; it does not wait for it.
func (a *Acks) Term(jm jetstream.Msg) error { return a.send(jm, []byte("+TERM")) }

func (a *Acks) send(jm jetstream.Msg, body []byte) error {
	reply := jm.Reply()
	if reply == "" {
		return jetstream.ErrMsgNoReply
	}
	a.mu.Lock()
	if a.sub == nil {
		sub, err := a.nc.Subscribe(a.prefix+".*", a.answered)
		if err != nil {
			a.mu.Unlock()
			return err
		}
		a.sub = sub
	}
	a.next++
	token := a.next
	now := time.Now()
	a.pending[token] = pendingAck{reply: reply, body: body, sent: now}
	if token%pruneEvery == 0 { // answers lost for good (a deleted consumer) are forgotten
		for t, p := range a.pending {
			if now.Sub(p.sent) > 2*PublishTimeout {
				delete(a.pending, t)
			}
		}
	}
	a.mu.Unlock()
	return a.nc.PublishRequest(reply, a.prefix+"."+strconv.FormatUint(token, 10), body)
}

// answered is JetStream's answer to one ack.
func (a *Acks) answered(msg *nats.Msg) {
	i := strings.LastIndexByte(msg.Subject, '.')
	token, err := strconv.ParseUint(msg.Subject[i+1:], 10, 64)
	if err != nil {
		return
	}
	a.mu.Lock()
	delete(a.pending, token)
	a.mu.Unlock()
	a.cond.Broadcast()
}

// Sync returns once every ack this node sent before the call is applied by its consumer's
// leader, resending those unanswered for ackResend. Errors: ErrAckUnconfirmed after
// PublishTimeout, or at once when the node's Context ended.
func (a *Acks) Sync() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	mark := a.next
	deadline := time.Now().Add(PublishTimeout)
	wake := time.AfterFunc(ackResend, a.cond.Broadcast) // re-check (and resend) periodically
	defer wake.Stop()
	for {
		waiting := false
		now := time.Now()
		for token, p := range a.pending {
			if token > mark {
				continue
			}
			waiting = true
			if now.Sub(p.sent) >= ackResend {
				p.sent = now
				a.pending[token] = p
				_ = a.nc.PublishRequest(p.reply, a.prefix+"."+strconv.FormatUint(token, 10), p.body)
			}
		}
		if !waiting {
			return nil
		}
		if now.After(deadline) || a.life.Err() != nil {
			return ErrAckUnconfirmed
		}
		wake.Reset(ackResend)
		a.cond.Wait()
	}
}
