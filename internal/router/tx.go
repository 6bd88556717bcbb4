package router

import (
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

// txOp is one buffered frame, already validated and detached from the read buffer.
type txOp struct {
	route    Route
	identity dest.Identity
	msg      *message.Message
	key, sub string
}

// txBufferStage diverts a frame carrying a transaction header into its transaction; the frame
// takes effect at COMMIT and is discarded at ABORT.
type txBufferStage struct {
	max      int // frames per transaction
	maxBytes int // message bytes per transaction
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
	op := txOp{route: c.Route, identity: c.Identity, msg: c.Message}
	if c.Route == RouteAck || c.Route == RouteNack {
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

// commitStage replays a transaction's frames, in order, through their routes' effect stages.
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
	acks := false
	defer func() {
		if acks && c.Err == nil && c.Receipt != "" {
			syncAcks(c, r.opts.Store) // the COMMIT's RECEIPT covers its acknowledgements
		}
	}()
	for _, op := range t.ops {
		rc := Context{Conn: c.Conn, Frame: c.Frame, Route: op.route, Identity: op.identity, Message: op.msg, Receipt: c.Receipt, Replay: true}
		switch op.route {
		case RouteAck, RouteNack:
			acks = true
			ackStage{deliveries: r.ports.Deliveries, nack: op.route == RouteNack}.apply(&rc, op.key, op.sub)
		default: // every SEND route: the message was built and validated at SEND time
			rc.Dest.Pattern = op.identity.Pattern
			r.run(&rc, r.effects[op.route][op.identity.Pattern])
		}
		rc.settleDuplicate() // each replayed SEND is answered by the COMMIT
		if rc.Err != nil {
			c.Err = rc.Err
			return
		}
	}
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
