package router

import (
	"github.com/titan-broker/titan/internal/delivery"
	"github.com/titan-broker/titan/internal/dest"
	"github.com/titan-broker/titan/internal/frame"
	"github.com/titan-broker/titan/internal/message"
	"time"
)

// Context is the bag a frame travels the stages in. Stages read what earlier stages recorded
// and record their own outcome; none returns an error.
type Context struct {
	received time.Time // when a frame asking for a receipt was routed (ReceiptLatency)
	// Conn is the connection the frame came from (stamped by the transport).
	Conn *Conn
	// Frame is the frame being routed; valid only while it is routed (clone what you keep).
	Frame *frame.Frame
	// Dest is the resolved destination (SEND, SUBSCRIBE).
	Dest dest.Destination
	// Identity is (group, pattern, channel) of a SEND or SUBSCRIBE once the group stage ran.
	Identity dest.Identity
	// Message is the message built by the message stage (SEND).
	Message *message.Message
	// Receipt is the frame's receipt header ("" when none was asked).
	Receipt string
	// Err is the failure that sends the frame straight to Final; nil on success.
	Err *frame.ProtocolError
	// ReceiptHeaders are added to the RECEIPT (a request's correlation-id).
	ReceiptHeaders []frame.Header
	// ext holds what only some frames need (SUBSCRIBE's subscription, an in-process
	// publication's native headers and outcome), so that a SEND's Context stays small.
	ext *contextExt
	// durable, when set by the store stage, waits for the message's fsync; the rest of the
	// route then runs on the connection's pipeline (see pipeline).
	durable func() error
	// Route is the route the resolver picked.
	Route Route
	// Halt stops the chain without error (the frame was buffered in a transaction, or fully
	// handled); Final still answers.
	Halt bool
	// Replay is set while COMMIT replays a transaction's frames.
	Replay bool
	// disconnect, set by the DISCONNECT route, makes Final close the connection after its
	// answer.
	disconnect bool
	// settle, set by the duplicate stage, ends the claim of the SEND's duplicate id once the
	// SEND is answered: kept when accepted, forgotten when refused (see settleDuplicate).
	settle func(accepted bool)
}

// contextExt is the part of a Context only some routes use.
type contextExt struct {
	// native are headers an in-process publisher sets after ingress mapping (Router.Publish):
	// native metadata no STOMP client can set (DESIGN §6).
	native []frame.Header
	// sub is the subscription the subscription stage built (SUBSCRIBE).
	sub *delivery.Subscription
	// allow, set by the authorization stage on a SUBSCRIBE, filters the subscription's
	// deliveries by concrete channel (see SetAllow).
	allow func(channel string) bool
	// dropped is set by the publish stage of an in-process publication when a DROP
	// address-full policy discarded the message.
	dropped bool
}

// Subscription returns the subscription a SUBSCRIBE route built (nil before the
// subscription stage, and on other routes).
func (c *Context) Subscription() *delivery.Subscription {
	if c.ext == nil {
		return nil
	}
	return c.ext.sub
}

// SetAllow records, on a SUBSCRIBE, a filter the subscription asks per delivered message:
// a message whose concrete channel allow refuses is skipped (an authorization stage uses it
// so that a wildcard subscription receives only the channels its user may consume). Set it
// before the subscription stage runs (Options.Authorize runs right after the group stage).
func (c *Context) SetAllow(allow func(channel string) bool) {
	if c.ext == nil {
		c.ext = &contextExt{}
	}
	c.ext.allow = allow
}

// Allow returns the delivery filter SetAllow recorded (nil for none).
func (c *Context) Allow() func(channel string) bool {
	if c.ext == nil {
		return nil
	}
	return c.ext.allow
}

// Native returns the native headers of an in-process publication (nil for STOMP frames).
func (c *Context) Native() []frame.Header {
	if c.ext == nil {
		return nil
	}
	return c.ext.native
}

// fail records a protocol error on c (fatal: the connection closes after the ERROR).
func (c *Context) fail(reason, detail string) { c.failWith(reason, detail, nil) }

// failWith is fail with the sentinel err the failure came from (ProtocolError.Err), so that
// in-process publishers can tell outcomes apart with errors.Is.
func (c *Context) failWith(reason, detail string, err error) {
	if c.Err == nil {
		c.Err = &frame.ProtocolError{Reason: reason, Detail: detail, ReceiptID: c.Receipt, Fatal: true, Err: err}
	}
}

// settleDuplicate ends c's duplicate-id claim, if any, once c is answered: accepted when
// c ended without error.
func (c *Context) settleDuplicate() {
	if c.settle != nil {
		c.settle(c.Err == nil)
		c.settle = nil
	}
}
