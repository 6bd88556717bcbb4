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

// ackResend is how long an ack may wait for its answer before it is sent again, by Sync or
// by the node's resend timer (the consumer leader may have changed: a leader that steps
// down drops the acks it has queued and not applied, nats-server's consumer.setLeader, and
// a message whose ack is lost comes back after the ack wait as a duplicate); acks are
// idempotent.
const ackResend = 2 * time.Second

// ackForget is how long an unanswered ack is kept before it is forgotten (its consumer was
// deleted, or its message removed by a purge: no answer will come). A Sync covering it gave
// up with ErrAckUnconfirmed long before.
const ackForget = 2 * PublishTimeout

// Acks sends a node's acknowledgements as double acks and tracks their answers (see
// above). The zero value is not usable: Node.Acks. Safe for concurrent use.
//
// Cost (issue 28). Acks are numbered (tokens, in send order) and kept in a queue in that
// order; the queue's head is the oldest unanswered one. An answer marks its entry and pops
// answered entries off the head, so Sync's question "is every ack up to my mark answered?"
// is one comparison with the head, whatever the number of acks in flight; it is woken only
// when the head moves and a Sync is waiting. Nothing is hashed or scanned per ack.
type Acks struct {
	nc     *nats.Conn
	prefix string          // reply subject prefix: <inbox>.<token>
	life   context.Context // the node's Context: Sync gives up when it ends

	mu      sync.Mutex
	cond    *sync.Cond         // on mu: the head moved (an answer arrived) or the resend timer fired
	sub     *nats.Subscription // guarded by mu; made on first use
	next    uint64             // last token given; guarded by mu
	base    uint64             // token of queue[0]; every token below it is answered or forgotten; guarded by mu
	queue   []pendingAck       // acks from base on, in token order (answered ones stay until they reach the head); guarded by mu
	waiters int                // Syncs waiting on cond; guarded by mu
}

type pendingAck struct {
	reply string // the message's ack subject
	body  []byte
	first time.Time // first sent (ackForget counts from it)
	sent  time.Time // last sent (ackResend counts from it)
	done  bool      // answered
}

func newAcks(nc *nats.Conn, life context.Context) *Acks {
	a := &Acks{nc: nc, prefix: nc.NewRespInbox(), life: life, base: 1}
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
func (a *Acks) Ack(jm jetstream.Msg) error { return a.send(jm, ackBody) }

// Term terminates jm (+TERM), asking for JetStream's answer; it does not wait for it.
func (a *Acks) Term(jm jetstream.Msg) error { return a.send(jm, termBody) }

var (
	ackBody  = []byte("+ACK")
	termBody = []byte("+TERM")
)

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
		go a.resendLoop()
	}
	a.next++
	token := a.next
	now := time.Now()
	a.queue = append(a.queue, pendingAck{reply: reply, body: body, first: now, sent: now})
	a.forgetLocked(now)
	a.mu.Unlock()
	return a.nc.PublishRequest(reply, a.replyTo(token), body)
}

// replyTo is the reply subject of token's ack.
func (a *Acks) replyTo(token uint64) string {
	b := make([]byte, 0, len(a.prefix)+21)
	b = append(b, a.prefix...)
	b = append(b, '.')
	return string(strconv.AppendUint(b, token, 10))
}

// forgetLocked pops answered acks, and those unanswered for ackForget (answers lost for
// good: a deleted consumer), off the head of the queue. a.mu held.
func (a *Acks) forgetLocked(now time.Time) {
	for len(a.queue) > 0 && (a.queue[0].done || now.Sub(a.queue[0].first) > ackForget) {
		a.popLocked()
	}
}

// resendDueLocked sends again every unanswered ack up to token mark that was last sent
// ackResend or more ago. a.mu held.
func (a *Acks) resendDueLocked(now time.Time, mark uint64) {
	for i := range a.queue {
		if a.base+uint64(i) > mark {
			break
		}
		if p := &a.queue[i]; !p.done && now.Sub(p.sent) >= ackResend {
			p.sent = now
			_ = a.nc.PublishRequest(p.reply, a.replyTo(a.base+uint64(i)), p.body)
		}
	}
}

// resendLoop resends unanswered acks every ackResend/2 until the node's Context ends, so an
// ack a stepping-down or crashed consumer leader dropped reaches the next leader within
// about ackResend (well within the ack wait), whether or not a receipted ACK waits for it.
// One goroutine per node, started with the answers' subscription; each round walks the
// acks in flight (those sent in the last few milliseconds at most, unless a leader is
// gone).
func (a *Acks) resendLoop() {
	t := time.NewTicker(ackResend / 2)
	defer t.Stop()
	for {
		select {
		case <-a.life.Done():
			return
		case now := <-t.C:
			a.mu.Lock()
			a.forgetLocked(now)
			a.resendDueLocked(now, a.next)
			a.mu.Unlock()
		}
	}
}

// popLocked drops the head of the queue. a.mu held.
func (a *Acks) popLocked() {
	a.queue[0] = pendingAck{}
	a.queue = a.queue[1:]
	a.base++
	if len(a.queue) == 0 {
		a.queue = a.queue[:0:0] // let a drained backing array go
	}
}

// answered is JetStream's answer to one ack.
func (a *Acks) answered(msg *nats.Msg) {
	i := strings.LastIndexByte(msg.Subject, '.')
	token, err := strconv.ParseUint(msg.Subject[i+1:], 10, 64)
	if err != nil {
		return
	}
	a.mu.Lock()
	moved := false
	if token >= a.base && token-a.base < uint64(len(a.queue)) {
		a.queue[token-a.base].done = true
		for len(a.queue) > 0 && a.queue[0].done {
			a.popLocked()
			moved = true
		}
	}
	wake := moved && a.waiters > 0
	a.mu.Unlock()
	if wake {
		a.cond.Broadcast()
	}
}

// Sync returns once every ack this node sent before the call is applied by its consumer's
// leader, resending those unanswered for ackResend. Errors: ErrAckUnconfirmed after
// PublishTimeout, or at once when the node's Context ended.
func (a *Acks) Sync() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	mark := a.next
	if a.base > mark {
		return nil // the common case: nothing unanswered, no timer
	}
	deadline := time.Now().Add(PublishTimeout)
	wake := time.AfterFunc(ackResend, a.cond.Broadcast) // re-check (and resend) periodically
	defer wake.Stop()
	a.waiters++
	defer func() { a.waiters-- }()
	for {
		if a.base > mark {
			return nil
		}
		now := time.Now()
		if now.Sub(a.queue[0].sent) >= ackResend { // the oldest is due: resend every due one up to mark
			a.resendDueLocked(now, mark)
		}
		if now.After(deadline) || a.life.Err() != nil {
			return ErrAckUnconfirmed
		}
		wake.Reset(ackResend)
		a.cond.Wait()
	}
}
