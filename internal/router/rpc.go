package router

import (
	"strconv"
	"strings"
	"time"

	"github.com/titan-broker/titan/internal/dest"
	"github.com/titan-broker/titan/internal/frame"
)

// tempQueueStage scopes /temp-queue/ destinations to their owning connection (RabbitMQ
// temp-queue semantics). A name is qualified by its owner's session id: /temp-queue/replies
// of session S is the queue S.replies, which others reach as /temp-queue/S/replies (the form
// a request's reply-to is rewritten to). Only the owner may SUBSCRIBE to it.
type tempQueueStage struct{ engine Engine }

func (s tempQueueStage) Apply(c *Context) {
	if c.Dest.Pattern != dest.PatternTempQueue {
		return
	}
	own := c.Conn.Client.ID()
	first, _, _ := strings.Cut(c.Dest.Channel, ".")
	switch {
	case first == own:
	case c.Frame.Command == frame.CmdSubscribe && (strings.HasPrefix(first, "titan-") || s.engine.TempOwnerAlive(first)):
		c.fail("access refused", "a temp-queue can only be consumed by the connection that owns it")
		return
	case c.Frame.Command == frame.CmdSend && s.engine.TempOwnerAlive(first):
	default:
		c.Dest.Channel = own + "." + c.Dest.Channel
	}
	c.Dest.Channel = strings.Clone(c.Dest.Channel)
}

// requestStage sends a command or query to one responder (DESIGN §2): reply-to is required
// and rewritten to its canonical (owner-qualified) form; a missing correlation-id is generated
// and returned in the RECEIPT; the timeout header (ms) is bounded by the configured maximum.
type requestStage struct {
	engine Engine
	opts   *Options
}

func (s requestStage) Apply(c *Context) {
	m := c.Message
	raw, ok := m.Header(frame.HdrReplyTo)
	if !ok || raw == "" {
		c.fail("missing reply-to header", "a command or query needs a reply-to destination")
		return
	}
	rd, err := dest.Parse(raw, s.opts.DefaultPattern)
	if err != nil || rd.Pattern == dest.PatternCommands || rd.Pattern == dest.PatternQueries || rd.Pattern == dest.PatternEventsStore {
		c.fail("invalid reply-to", "reply-to must be a topic, queue or temp-queue destination")
		return
	}
	replyGroup := c.Identity.Group
	if rd.Pattern == dest.PatternTempQueue {
		replyGroup = dest.DefaultGroup
		if own := c.Conn.Client.ID(); !strings.HasPrefix(rd.Channel, own+".") && !s.engine.TempOwnerAlive(firstToken(rd.Channel)) {
			rd.Channel = own + "." + rd.Channel
		}
	}
	replyTo := dest.IdentityOf(replyGroup, rd)
	replyTo.Channel = strings.Clone(replyTo.Channel)
	timeout := s.opts.RequestTimeout
	if v, ok := c.Frame.Get(frame.HdrTimeout); ok && v != "" && !c.Replay {
		ms, err := strconv.ParseInt(v, 10, 64)
		if err != nil || ms <= 0 {
			c.fail("invalid timeout header", "timeout is a positive number of milliseconds")
			return
		}
		timeout = min(time.Duration(ms)*time.Millisecond, s.opts.MaxRequestTimeout)
	}
	corr, ok := m.Header(frame.HdrCorrelationID)
	if !ok || corr == "" {
		corr = m.ID
		m.Headers = append(m.Headers, frame.Header{Key: frame.HdrCorrelationID, Value: corr})
	}
	for i := range m.Headers {
		if m.Headers[i].Key == frame.HdrReplyTo {
			m.Headers[i].Value = replyTo.Destination()
		}
	}
	if err := s.engine.Request(c.Identity, m, replyTo, corr, timeout); err != nil {
		c.fail("duplicate correlation-id", "a request with correlation-id "+corr+" is already pending")
		return
	}
	c.ReceiptHeaders = append(c.ReceiptHeaders, frame.Header{Key: frame.HdrCorrelationID, Value: corr})
}

func firstToken(ch string) string {
	f, _, _ := strings.Cut(ch, ".")
	return f
}

// responseStage recognises responses: a SEND with a correlation-id to the reply-to of a
// pending request completes it. A response after its request timed out, or a SEND to a
// temp-queue that no pending request or live owner expects, is dropped and counted (the
// client still gets its RECEIPT: the frame was valid).
type responseStage struct{ engine Engine }

func (s responseStage) Apply(c *Context) {
	corr, _ := c.Message.Header(frame.HdrCorrelationID)
	temp := c.Identity.Pattern == dest.PatternTempQueue
	if corr == "" {
		if temp && !s.engine.TempOwnerAlive(firstToken(c.Identity.Channel)) {
			s.engine.CountDroppedResponse(c.Identity, false)
			c.Halt = true
		}
		return
	}
	pending, late := s.engine.Respond(c.Identity, corr)
	switch {
	case pending:
	case late:
		s.engine.CountDroppedResponse(c.Identity, true)
		c.Halt = true
	case temp: // every message to a temp-queue is a response; this one answers nothing pending
		s.engine.CountDroppedResponse(c.Identity, false)
		c.Halt = true
	}
}
