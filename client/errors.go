package client

import (
	"errors"
	"fmt"
	"strings"
)

var (
	// ErrClosed is returned by calls on a Client after Close, or after a connection loss
	// that reconnecting could not repair (then wrapped with the last cause).
	ErrClosed = errors.New("client: closed")
	// ErrConnectionLost is returned (wrapped with the cause) when the connection ends while a
	// call waits for its RECEIPT or its response: the broker may or may not have accepted the
	// frame, so the caller decides whether to send again.
	ErrConnectionLost = errors.New("client: connection lost")
	// ErrStaleMessage is returned by Message.Ack and Message.Nack when the connection that
	// delivered the message has gone; the broker redelivers such a message (queues).
	ErrStaleMessage = errors.New("client: message belongs to a closed connection")
	// ErrUnsubscribed is returned by Subscription.Unsubscribe when it was already called.
	ErrUnsubscribed = errors.New("client: subscription already ended")
)

// ServerError is an ERROR frame the broker sent (STOMP 1.2, "ERROR"). After an ERROR the
// broker closes the connection.
type ServerError struct {
	// Message is the ERROR's message header, a short description ("invalid destination").
	Message string
	// Body is the ERROR's body, often the detail or the offending frame; may be empty.
	Body string
	// ReceiptID is the receipt the ERROR answers, when it answers one.
	ReceiptID string
}

// Error returns "broker sent ERROR: <message>", with the body's first line when it adds
// something.
func (e *ServerError) Error() string {
	s := "broker sent ERROR: " + e.Message
	if b := strings.TrimSpace(e.Body); b != "" && b != e.Message {
		s += " (" + firstLine(b) + ")"
	}
	return s
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}

// ConnectError is returned by Dial (and reported while reconnecting) when a connection
// cannot be set up. It names the address used and the step that failed; Err is the cause.
type ConnectError struct {
	// Addr is the host:port dialled.
	Addr string
	// Step is what failed: "dial", "tls handshake", "CONNECT".
	Step string
	// Hint, when set, is what the operator most likely has to change.
	Hint string
	// Err is the cause (a *net.OpError, a tls error, a *ServerError, ...).
	Err error
}

// Error returns "cannot connect to <addr>: <step>: <cause> (<hint>)".
func (e *ConnectError) Error() string {
	s := fmt.Sprintf("cannot connect to %s: %s: %v", e.Addr, e.Step, e.Err)
	if e.Hint != "" {
		s += " (" + e.Hint + ")"
	}
	return s
}

// Unwrap returns the cause, for errors.Is and errors.As.
func (e *ConnectError) Unwrap() error { return e.Err }

// RequestError is returned by Client.Request when the broker answers a request with
// executed:false (no responder, timeout) or the responder reports an error.
type RequestError struct {
	// Reason is the response's error header ("timeout", "no responder", or the responder's).
	Reason string
	// Response is the response message itself.
	Response *Message
}

// Error returns "client: request failed: <reason>".
func (e *RequestError) Error() string { return "client: request failed: " + e.Reason }
