package router

import (
	"github.com/titan-broker/titan/internal/dest"
	"github.com/titan-broker/titan/internal/frame"
	"github.com/titan-broker/titan/internal/message"
)

// Publication is one message published in-process (HTTP POST /publish, embed.Publish): the
// SEND a STOMP client would have sent, plus native metadata.
type Publication struct {
	// Destination is written as in a SEND (any prefix or alias, or bare).
	Destination string
	// Group is the destination group ("" is "default").
	Group string
	// Headers are the SEND's headers. Protocol machinery (destination, receipt, transaction,
	// content-length, group, ...) and reserved names (stomp.*, dlq-*, x-titan-metadata) are
	// dropped by ingress mapping, exactly as for a STOMP SEND.
	Headers []frame.Header
	// Native are set after ingress mapping, replacing a header of the same name: the
	// metadata only an in-process publisher may set (reference 003).
	Native []frame.Header
	// Body is the payload; the router keeps its own copy.
	Body []byte
	// Principal is the authenticated user the publication is made as (a monitor API user):
	// an authorization stage checks it as it checks a STOMP SEND of that user. "" publishes
	// as trusted in-process code (the embed API, the monitor's bearer token): the client
	// then reports Trusted() true.
	Principal string
}

// Published is the outcome of an accepted Publication.
type Published struct {
	// Identity is where the message went.
	Identity dest.Identity
	// Message is the message as built by the SEND route (message-id, destination, ...).
	Message *message.Message
	// Dropped is set when the message was accepted but not published: a DROP address-full
	// policy discarded it, or a stage dropped it (Context.Halt).
	Dropped bool
}

// Publish runs p through the SEND route of its destination, with every stage a STOMP SEND
// passes (custom stages included), on a connection of its own: a durable message is
// committed before Publish returns, a BLOCK policy makes it wait up to the block timeout.
// Errors: the *frame.ProtocolError the route ended in (its Err, when set, is the sentinel:
// ErrQueueFull, ErrQueuePaused, ErrNotStored, ...), exactly what a STOMP client
// would have received as ERROR.
func (r *Router) Publish(p Publication) (*Published, error) {
	f := &frame.Frame{Command: frame.CmdSend, Body: p.Body}
	f.Headers = make([]frame.Header, 0, len(p.Headers)+2)
	f.Headers = append(f.Headers, frame.Header{Key: frame.HdrDestination, Value: p.Destination})
	if p.Group != "" {
		f.Headers = append(f.Headers, frame.Header{Key: frame.HdrGroup, Value: p.Group})
	}
	f.Headers = MapIngress(f.Headers, p.Headers) // machinery such as transaction or receipt never applies
	cl := &nativeClient{principal: p.Principal}
	conn := &Conn{Client: cl} // no pipeline: the store stage commits synchronously
	c := Context{Conn: conn, Frame: f, ext: &contextExt{native: p.Native}}
	r.Route(&c)
	if cl.err != nil {
		return nil, cl.err
	}
	return &Published{Identity: c.Identity, Message: c.Message, Dropped: c.ext.dropped || c.Halt}, nil
}

// nativeClient is the connection of an in-process publication: it records the final
// stage's answer and takes no deliveries.
type nativeClient struct {
	err       *frame.ProtocolError
	principal string
}

// Principal is the user the publication is made as ("" for trusted code).
func (n *nativeClient) Principal() string { return n.principal }

// Trusted reports whether the publication comes from trusted code (no principal).
func (n *nativeClient) Trusted() bool { return n.principal == "" }

// nativeSession is the session id of in-process publications (never a client's: those are
// generated with another prefix).
const nativeSession = "titan-native"

func (n *nativeClient) Version() frame.Version               { return frame.V12 }
func (n *nativeClient) WriteMessage(*frame.Buf, []byte) bool { return false }

// WriteEvent refuses: an in-process publisher subscribes to nothing.
func (n *nativeClient) WriteEvent(*frame.Buf, []byte, bool) (bool, <-chan struct{}) {
	return false, nil
}

func (n *nativeClient) QueuedBytes() int64           { return 0 }
func (n *nativeClient) ID() string                   { return nativeSession }
func (n *nativeClient) WriteFrame(*frame.Frame) bool { return true }
func (n *nativeClient) Fail(pe *frame.ProtocolError) { n.err = pe }
func (n *nativeClient) Disconnect()                  {}
func (n *nativeClient) Done() <-chan struct{}        { return nil }

// Deliver publishes m, already built, to id through the publish port of id's SEND route
// only (the broker's own messages: request/response answers). Errors: those of the port;
// ErrNoQueue for a pattern without a publish port.
func (r *Router) Deliver(id dest.Identity, m *message.Message, cancel <-chan struct{}) (dropped bool, err error) {
	if p := r.table[sendRoutes[id.Pattern]][id.Pattern].publisher; p != nil {
		return p.Publish(id, m, cancel)
	}
	return false, ErrNoQueue
}
