package router

import (
	"errors"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/titan-broker/titan/internal/delivery"
	"github.com/titan-broker/titan/internal/dest"
	"github.com/titan-broker/titan/internal/frame"
	"github.com/titan-broker/titan/internal/message"
)

// tempQueueStage scopes /temp-queue/ destinations to their owning connection (RabbitMQ
// temp-queue semantics). A name is qualified by its owner's session id: /temp-queue/replies
// of session S is the queue S.replies, which others reach as /temp-queue/S/replies (the form
// a request's reply-to is rewritten to). Only the owner may SUBSCRIBE to it.
type tempQueueStage struct {
	requests  Requests
	subscribe bool // on the SUBSCRIBE route
}

func (s tempQueueStage) Apply(c *Context) {
	own := c.Conn.Client.ID()
	first, _, _ := strings.Cut(c.Dest.Channel, ".")
	switch {
	case first == own:
	case s.subscribe && (strings.HasPrefix(first, "titan-") || s.requests.TempOwnerAlive(first)):
		c.fail("access refused", "a temp-queue can only be consumed by the connection that owns it")
		return
	case !s.subscribe && s.requests.TempOwnerAlive(first):
	default:
		c.Dest.Channel = own + "." + c.Dest.Channel
	}
	c.Dest.Channel = strings.Clone(c.Dest.Channel)
}

// requestStage sends a command or query to one responder (DESIGN §2): reply-to is required
// and rewritten to its canonical (owner-qualified) form; a missing correlation-id is generated
// and returned in the RECEIPT; the timeout header (ms) is bounded by the configured maximum.
type requestStage struct{ router *Router }

func (s requestStage) Apply(c *Context) {
	m := c.Message
	raw, ok := m.Header(frame.HdrReplyTo)
	if !ok || raw == "" {
		c.fail("missing reply-to header", "a command or query needs a reply-to destination")
		return
	}
	replyTo, ok := s.router.replyTo(c, raw)
	if !ok {
		c.fail("invalid reply-to", "reply-to must be a topic, queue or temp-queue destination")
		return
	}
	// The broker writes to reply-to on the requester's behalf (the responder's answer, or its
	// own executed:false): the requester must be allowed to SEND there, and to create it
	// when it does not exist (issue #29: no confused deputy).
	if !s.router.authorizeSend(c, replyTo) {
		return
	}
	opts := &s.router.opts
	// The answer makes the reply-to queue: it is admitted like a SEND's destination.
	if port := s.router.ports.Destinations; port != nil && (replyTo.Pattern == dest.PatternQueues || replyTo.Pattern == dest.PatternTempQueue) {
		if !admitDestination(c, port, opts, replyTo, replyTo.Pattern == dest.PatternTempQueue) {
			return
		}
	}
	if !s.router.autoReplySubscription(c, replyTo) { // RabbitMQ's reply subscription (replies.go)
		return
	}
	timeout := opts.RequestTimeout
	if v, ok := c.Frame.Get(frame.HdrTimeout); ok && v != "" && !c.Replay {
		ms, err := strconv.ParseInt(v, 10, 64)
		if err != nil || ms <= 0 {
			c.fail("invalid timeout header", "timeout is a positive number of milliseconds")
			return
		}
		timeout = min(time.Duration(ms)*time.Millisecond, opts.MaxRequestTimeout)
	}
	corr, ok := m.Header(frame.HdrCorrelationID)
	headers := slices.Clone(m.Headers)
	if !ok || corr == "" {
		corr = m.ID
		headers = append(headers, frame.Header{Key: frame.HdrCorrelationID, Value: corr})
	}
	for i := range headers {
		if headers[i].Key == frame.HdrReplyTo {
			headers[i].Value = replyTo.Destination()
		}
	}
	m = message.Rebuilt(m, headers) // a message is immutable once built (its tail is encoded)
	c.Message = m
	var requester *delivery.Conn
	if c.Conn != nil {
		requester = c.Conn.Delivery
	}
	if err := s.router.ports.Requests.Request(c.Identity, m, replyTo, corr, timeout, requester); err != nil {
		if errors.Is(err, ErrCanceled) {
			c.failWith("server shutting down", "the request was not accepted", err)
			return
		}
		var refusal interface {
			Refusal() (message, detail string)
		}
		if errors.As(err, &refusal) { // a bound on pending requests, named
			msg, detail := refusal.Refusal()
			c.failWith(msg, detail, err)
			return
		}
		c.fail("duplicate correlation-id", "a request with correlation-id "+frame.Echo(corr)+" is already pending")
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
// client still gets its RECEIPT: the frame was valid). temp is set on the temp-queue route,
// where every message is a response.
type responseStage struct {
	requests Requests // nil: no request/response on this router
	temp     bool
}

func (s responseStage) Apply(c *Context) {
	if s.requests == nil {
		return
	}
	corr, _ := c.Message.Header(frame.HdrCorrelationID)
	temp := s.temp
	if corr == "" {
		if temp && !s.requests.TempOwnerAlive(firstToken(c.Identity.Channel)) {
			s.requests.CountDroppedResponse(c.Identity, false)
			c.Halt = true
		}
		return
	}
	pending, late := s.requests.Respond(c.Identity, corr)
	switch {
	case pending:
	case late:
		s.requests.CountDroppedResponse(c.Identity, true)
		c.Halt = true
	case temp: // every message to a temp-queue is a response; this one answers nothing pending
		s.requests.CountDroppedResponse(c.Identity, false)
		c.Halt = true
	}
}

// replyToStage qualifies a SEND's reply-to that names one of the sender's own temp-queues
// (/temp-queue/x) with its owner (/temp-queue/<session>/x), on every SEND route but
// commands and queries (requestStage does it there), so that a responder on another
// connection that sends to the reply-to it was given reaches the requester's temp-queue
// rather than its own (RabbitMQ rewrites such a reply-to to a /reply-queue/ the requester
// owns). A reply-to that is already qualified, or names anything else, is kept as sent.
// A SEND without reply-to costs one header lookup.
type replyToStage struct{ router *Router }

func (s replyToStage) Apply(c *Context) {
	m := c.Message
	raw, ok := m.Header(frame.HdrReplyTo)
	if !ok || c.Conn == nil || c.Conn.Client == nil {
		return
	}
	rd, err := dest.Parse(raw, s.router.opts.DefaultPattern)
	if err != nil || rd.Pattern != dest.PatternTempQueue {
		return
	}
	id, ok := s.router.replyTo(c, raw)
	if !ok || !s.router.autoReplySubscription(c, id) {
		return
	}
	qualified := id.Destination()
	if qualified == raw {
		return
	}
	headers := slices.Clone(m.Headers)
	for i := range headers {
		if headers[i].Key == frame.HdrReplyTo {
			headers[i].Value = qualified
		}
	}
	c.Message = message.Rebuilt(m, headers) // a message is immutable once built
}
