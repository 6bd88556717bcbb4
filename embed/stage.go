package embed

import (
	"github.com/titan-broker/titan/internal/frame"
	"github.com/titan-broker/titan/internal/router"
)

// Stage is custom logic on the SEND path. Apply runs once for every message published — by a
// STOMP SEND (for a SEND inside a transaction: when the COMMIT replays it), by the monitor
// API's POST /publish and by Broker.Publish, which all run the same route — after the
// destination and group were resolved and the message was built, and before it is handed
// to its pattern (dispatcher queue, subscriptions, log, responder). With fanout-mode this is exactly reference 000's slot
// between the route stage and the fan-out stage.
//
// Apply is called concurrently from every connection's read goroutine, so it must be safe
// for concurrent use; and it runs inline on the connection's read path, so it must be quick
// and must never block (hand slow work to a bounded queue of your own). A panic in Apply is
// recovered and answered with an ERROR to that client only. It records its outcome on the
// Send (Reject, Drop) rather than returning an error.
type Stage interface {
	Apply(s *Send)
}

// StageFunc adapts a function to Stage.
type StageFunc func(s *Send)

// Apply calls f(s).
func (f StageFunc) Apply(s *Send) { f(s) }

// Header is one message header.
type Header struct {
	// Key is the header name.
	Key string
	// Value is the header value, unescaped.
	Value string
}

// Send is the message a Stage sees. It is valid only during Apply: do not keep it, or any
// slice it returns, afterwards.
type Send struct {
	c *router.Context
}

// Group returns the destination group ("default" when the SEND named none).
func (s *Send) Group() string { return s.c.Identity.Group }

// Destination returns the canonical destination ("/queue/orders", "/topic/prices", or a bare
// "/orders").
func (s *Send) Destination() string { return s.c.Identity.Destination() }

// Pattern returns the messaging pattern: "events", "queues", "events-store", "commands",
// "queries" or "temp-queue".
func (s *Send) Pattern() string { return s.c.Identity.Pattern.String() }

// MessageID returns the broker-assigned message-id subscribers will see.
func (s *Send) MessageID() string { return s.c.Message.ID }

// Header returns the first message header named key (after ingress mapping: protocol
// machinery such as destination or receipt is not a message header).
func (s *Send) Header(key string) (string, bool) { return s.c.Message.Header(key) }

// Headers returns a copy of the message headers, in order.
func (s *Send) Headers() []Header {
	hs := s.c.Message.Headers
	out := make([]Header, len(hs))
	for i, h := range hs {
		out[i] = Header{Key: h.Key, Value: h.Value}
	}
	return out
}

// Body returns the message body. It is shared with every subscriber: read it, never modify
// it.
func (s *Send) Body() []byte { return s.c.Message.Body }

// Reject refuses the message: it is not published, the client gets an ERROR frame whose
// message header is reason (with receipt-id when it asked for a receipt) and, as STOMP
// requires after an ERROR, its connection is closed. Later stages do not run.
func (s *Send) Reject(reason string) {
	if s.c.Err == nil {
		s.c.Err = &frame.ProtocolError{Reason: reason, ReceiptID: s.c.Receipt, Fatal: true}
	}
}

// Drop discards the message silently: it is not published, later stages do not run, and a
// requested RECEIPT is still sent.
func (s *Send) Drop() { s.c.Halt = true }

// adaptStage turns a Stage into a router stage.
func adaptStage(st Stage) router.Stage {
	return router.StageFunc(func(c *router.Context) {
		if c.Message == nil {
			return
		}
		st.Apply(&Send{c: c})
	})
}
