package router

import (
	"time"

	"github.com/titan-broker/titan/internal/dest"
	"github.com/titan-broker/titan/internal/dispatch"
	"github.com/titan-broker/titan/internal/frame"
	"github.com/titan-broker/titan/internal/message"
)

// Client is the port to one client connection (implemented by session.Session). Every method
// is safe for concurrent use and never blocks on the socket.
type Client interface {
	dispatch.Writer
	// ID is the session id.
	ID() string
	// WriteFrame queues a control frame (RECEIPT, ERROR).
	WriteFrame(f *frame.Frame) bool
	// Fail sends pe as an ERROR frame and, when pe.Fatal, closes after it is written.
	Fail(pe *frame.ProtocolError)
	// Disconnect closes after everything queued is written.
	Disconnect()
	// Done is closed when the connection has closed.
	Done() <-chan struct{}
}

// Engine is the port to the messaging core (implemented by *dispatch.Engine).
type Engine interface {
	NewConn(w dispatch.Writer) *dispatch.Conn
	// PublishUntil publishes m; a wait for room ends with dispatch.ErrCanceled when cancel
	// closes (the producer's connection closed).
	PublishUntil(id dest.Identity, m *message.Message, cancel <-chan struct{}) (dropped bool, err error)
	Subscribe(sub *dispatch.Subscription) error
	Unsubscribe(c *dispatch.Conn, id string) error
	Ack(c *dispatch.Conn, key, subID string, nack bool) error
	CloseConn(c *dispatch.Conn)
	// Request/response (commands, queries, temp-queues).
	Request(id dest.Identity, m *message.Message, replyTo dest.Identity, corr string, timeout time.Duration) error
	Respond(replyTo dest.Identity, corr string) (pending, late bool)
	CountDroppedResponse(replyTo dest.Identity, late bool)
	SetTempOwner(session string, c *dispatch.Conn)
	TempOwnerAlive(session string) bool
	DropTempQueues(session string)
}

// Clock is the time source (injectable for tests).
type Clock func() time.Time

// Persister is the durable-acceptance port (implemented by *durable.Log). Persist commits m
// (fsync'd) and sets m.Sequence before m is shared; Forget deletes a persisted message whose
// admission was then refused.
//
// PersistAsync is Persist split in two: it orders m into the store and sets m.Sequence, and
// wait (called exactly once) returns once m is fsync'd, so a connection's consecutive SENDs
// share fsyncs.
type Persister interface {
	Persist(id dest.Identity, m *message.Message) error
	PersistAsync(id dest.Identity, m *message.Message) (wait func() error, err error)
	Forget(id dest.Identity, m *message.Message)
}
