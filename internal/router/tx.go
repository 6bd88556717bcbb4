package router

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/titan-broker/titan/internal/dest"
	"github.com/titan-broker/titan/internal/frame"
	"github.com/titan-broker/titan/internal/message"
)

// transaction buffers the SENDs and ACK/NACKs of one open transaction (STOMP 1.2, "BEGIN").
type transaction struct {
	ops   []txOp
	bytes int // message bytes buffered
}

// txOp is one buffered frame, already validated and detached from the read buffer: a SEND
// (msg set), or an ACK or NACK that COMMIT applies with ack.
type txOp struct {
	route    Route
	identity dest.Identity
	msg      *message.Message
	ack      *ackStage // an acknowledgement's stage (its route's effect); nil for a SEND
	key, sub string
}

// txBufferStage diverts a frame carrying a transaction header into its transaction; the frame
// takes effect at COMMIT and is discarded at ABORT. On a SEND route the COMMIT replays the
// route's admit, store and effect segments; on an ACK or NACK route it applies ack.
type txBufferStage struct {
	max      int       // frames per transaction
	maxBytes int       // message bytes per transaction
	ack      *ackStage // the ACK or NACK route's effect; nil on a SEND route
}

func (s txBufferStage) Apply(c *Context) {
	if c.Replay {
		return
	}
	name, ok := c.Frame.Get(frame.HdrTransaction)
	if !ok {
		return
	}
	t := c.Conn.txs[name]
	if t == nil {
		c.fail("unknown transaction", "no open transaction "+frame.Echo(name))
		return
	}
	if len(t.ops) >= s.max {
		c.fail("transaction too large", "a transaction holds at most "+strconv.Itoa(s.max)+" frames")
		return
	}
	if c.Message != nil {
		t.bytes += c.Message.Size()
		if t.bytes > s.maxBytes {
			c.fail("transaction too large", "a transaction holds at most "+strconv.Itoa(s.maxBytes)+" bytes of messages")
			return
		}
	}
	op := txOp{route: c.Route, identity: c.Identity, msg: c.Message, ack: s.ack}
	if s.ack != nil {
		f := c.Frame
		if c.Conn.Client.Version() >= frame.V12 {
			op.key = strings.Clone(f.Value(frame.HdrID))
		} else {
			op.key = strings.Clone(f.Value(frame.HdrMessageID))
			op.sub = strings.Clone(f.Value(frame.HdrSubscription))
		}
		if op.key == "" {
			c.fail("missing id header", f.Command.String()+" requires an id header")
			return
		}
	}
	t.ops = append(t.ops, op)
	c.Halt = true
}

func txName(c *Context) (string, bool) {
	name, ok := c.Frame.Get(frame.HdrTransaction)
	if !ok || name == "" {
		c.fail("missing transaction header", c.Frame.Command.String()+" requires a transaction header")
		return "", false
	}
	return name, true
}

type beginStage struct{ max int }

func (s beginStage) Apply(c *Context) {
	name, ok := txName(c)
	if !ok {
		return
	}
	if c.Conn.txs == nil {
		c.Conn.txs = make(map[string]*transaction)
	}
	if _, dup := c.Conn.txs[name]; dup {
		c.fail("transaction already active", "transaction "+frame.Echo(name)+" is already open")
		return
	}
	if len(c.Conn.txs) >= s.max {
		c.fail("too many transactions", "at most "+strconv.Itoa(s.max)+" open transactions per connection")
		return
	}
	c.Conn.txs[strings.Clone(name)] = &transaction{}
}

// commitStage replays a transaction's frames, in order, through their routes' segments after
// the transaction stage, in three steps: every SEND runs its admit segment (custom,
// response, ...); the
// messages to store are committed as one atomic store batch (Persister.PersistAll: one
// commit, all or none); then, in order, ACK/NACKs take effect and SENDs are published. A
// failure before the batch stores and publishes nothing. A publication refused after it
// (queue full under FAIL, say) stops there: the SENDs before it are published, its message
// and those after it are deleted from the store again, and the COMMIT gets the ERROR.
type commitStage struct{ router *Router }

func (s commitStage) Apply(c *Context) {
	name, ok := txName(c)
	if !ok {
		return
	}
	t := c.Conn.txs[name]
	if t == nil {
		c.fail("unknown transaction", "no open transaction "+frame.Echo(name))
		return
	}
	delete(c.Conn.txs, name)
	r := s.router
	if !s.authorized(c, t) {
		return // the transaction is aborted: nothing was stored or published
	}
	ctxs := make([]Context, len(t.ops))
	posts := make([]segment, len(t.ops)) // where each SEND's route resumes after the batch
	stored := make([]bool, len(t.ops))
	// settleFrom ends the duplicate-id claims of ctxs[i:] as refused (none was answered).
	settleFrom := func(i int) {
		for j := i; j < len(ctxs); j++ {
			if ctxs[j].settle != nil {
				ctxs[j].settle(false)
				ctxs[j].settle = nil
			}
		}
	}
	acks := false
	var ids []dest.Identity
	var msgs []*message.Message
	var batch batchedSends // SENDs committed by Options.Batch (cluster mode)
	for i, op := range t.ops {
		posts[i] = segEnd
		if op.ack != nil {
			acks = true
			continue
		}
		// Every SEND route: the message was built and validated at SEND time.
		rc := Context{Conn: c.Conn, Frame: c.Frame, Route: op.route, Identity: op.identity, Message: op.msg, Receipt: c.Receipt, Replay: true}
		rc.Dest.Pattern = op.identity.Pattern
		rt := &r.table[op.route][op.identity.Pattern]
		r.run(&rc, rt, segAdmit, segStore)
		ctxs[i] = rc
		if rc.Err != nil {
			c.Err = rc.Err
			settleFrom(0)
			return
		}
		if rc.Halt {
			continue // answered without effect (a duplicate id): nothing to store or publish
		}
		if batch.take(r.opts.Batch, rc.Identity, rc.Message) {
			continue // published with the others by PublishBatch, below
		}
		posts[i] = segStore
		if st := rt.store; st != nil && st.store != nil && (rc.Message.Persistent || st.always) {
			posts[i] = segEffect // stored below, with the others
			stored[i] = true
			ids = append(ids, rc.Identity)
			msgs = append(msgs, rc.Message)
		}
	}
	if len(msgs) > 0 {
		if err := r.opts.Store.PersistAll(ids, msgs); err != nil {
			c.failWith(storeRefusal(err), "the broker could not store the transaction's messages; none was accepted", fmt.Errorf("%w: %w", ErrNotStored, err))
			settleFrom(0)
			return
		}
	}
	if !batch.commit(c, r.opts.Batch) {
		settleFrom(0)
		return
	}
	for i, op := range t.ops {
		rc := &ctxs[i]
		if op.ack != nil {
			*rc = Context{Conn: c.Conn, Frame: c.Frame, Route: op.route, Receipt: c.Receipt, Replay: true}
			op.ack.apply(rc, op.key, op.sub)
		} else if !rc.Halt {
			r.run(rc, &r.table[op.route][op.identity.Pattern], posts[i], segEnd)
		}
		rc.settleDuplicate() // each replayed SEND is answered by the COMMIT
		if rc.Err != nil {
			c.Err = rc.Err
			for j := i + 1; j < len(t.ops); j++ {
				if stored[j] {
					r.opts.Store.Forget(ctxs[j].Identity, ctxs[j].Message)
				}
			}
			settleFrom(i + 1)
			return
		}
	}
	if acks && c.Receipt != "" {
		syncAcks(c, r.opts.Store) // the COMMIT's RECEIPT covers its acknowledgements
	}
}

// authorized runs Options.Authorize again, at COMMIT, for every SEND the transaction holds:
// a users-file reload between the SEND and the COMMIT that withdrew the right (or removed
// the user) aborts the whole transaction with the stage's ERROR (issue #29: revocation
// bites). It reports whether the COMMIT may go on.
func (s commitStage) authorized(c *Context, t *transaction) bool {
	for _, op := range t.ops {
		if op.ack == nil && !s.router.authorizeSend(c, op.identity) {
			return false
		}
	}
	return true
}

// authorizeSend runs Options.Authorize for a SEND of c's connection to id — a frame the
// broker makes for it (a transaction's SEND at COMMIT, the answer to a request's reply-to) —
// and copies a refusal into c. It reports whether the SEND may go on (true without an
// Authorize stage).
func (r *Router) authorizeSend(c *Context, id dest.Identity) bool {
	auth := r.opts.Authorize
	if auth == nil {
		return true
	}
	send := frame.Frame{Command: frame.CmdSend}
	rc := Context{Conn: c.Conn, Frame: &send, Route: c.Route, Identity: id, Receipt: c.Receipt, Replay: c.Replay}
	rc.Dest.Pattern = id.Pattern
	auth.Apply(&rc)
	if rc.Err != nil {
		c.Err = rc.Err
		return false
	}
	return true
}

type abortStage struct{}

func (abortStage) Apply(c *Context) {
	name, ok := txName(c)
	if !ok {
		return
	}
	if _, ok := c.Conn.txs[name]; !ok {
		c.fail("unknown transaction", "no open transaction "+frame.Echo(name))
		return
	}
	delete(c.Conn.txs, name)
}
