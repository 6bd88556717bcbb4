package router

import (
	"github.com/titan-broker/titan/internal/dest"
	"github.com/titan-broker/titan/internal/dispatch"
	"github.com/titan-broker/titan/internal/frame"
	"github.com/titan-broker/titan/internal/message"
)

// Context is the bag a frame travels the stages in. Stages read what earlier stages recorded
// and record their own outcome; none returns an error.
type Context struct {
	// Conn is the connection the frame came from (stamped by the transport).
	Conn *Conn
	// Frame is the frame being routed; valid only while it is routed (clone what you keep).
	Frame *frame.Frame
	// Route is the route the resolver picked.
	Route Route
	// Dest is the resolved destination (SEND, SUBSCRIBE).
	Dest dest.Destination
	// Identity is (group, pattern, channel) of a SEND or SUBSCRIBE once the group stage ran.
	Identity dispatch.Identity
	// Message is the message built by the message stage (SEND).
	Message *message.Message
	// Receipt is the frame's receipt header ("" when none was asked).
	Receipt string
	// Err is the failure that sends the frame straight to Final; nil on success.
	Err *frame.ProtocolError
	// Halt stops the chain without error (the frame was buffered in a transaction, or fully
	// handled); Final still answers.
	Halt bool
	// Replay is set while COMMIT replays a transaction's frames.
	Replay bool
	// Allow, when set by the Authorize stage on a SUBSCRIBE, filters the subscription's
	// deliveries by concrete channel (a wildcard subscription receives only what its user may
	// consume; see dispatch.Subscription.Allow).
	Allow func(channel string) bool
	// ReceiptHeaders are added to the RECEIPT (a request's correlation-id).
	ReceiptHeaders []frame.Header
	// durable, when set by the store stage, waits for the message's fsync; the rest of the
	// route then runs on the connection's pipeline (see pipeline).
	durable func() error
}

// fail records a protocol error on c (fatal: the connection closes after the ERROR).
func (c *Context) fail(reason, detail string) {
	if c.Err == nil {
		c.Err = &frame.ProtocolError{Reason: reason, Detail: detail, ReceiptID: c.Receipt, Fatal: true}
	}
}
