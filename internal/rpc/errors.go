package rpc

import (
	"errors"
	"strconv"
)

// Errors of the request path.
var (
	// ErrDuplicateRequest is returned by Request for a correlation-id already pending on the
	// same reply-to destination.
	ErrDuplicateRequest = errors.New("rpc: correlation-id already pending")
	// ErrTooManyPending is returned (wrapped in a *PendingLimitError naming the limit) by
	// Request when the requesting connection, or the broker, already has its maximum of
	// requests awaiting a response.
	ErrTooManyPending = errors.New("rpc: too many pending requests")
)

// PendingLimitError is the refusal of a request over a bound on pending requests. It wraps
// ErrTooManyPending, and its Refusal gives the ERROR frame's message header and body
// naming the configuration key.
type PendingLimitError struct {
	// Key is the configuration key of the bound (limits.max-pending-requests or
	// limits.max-pending-requests-by-client).
	Key string
	// Max is its value.
	Max int
}

// Error implements error.
func (e *PendingLimitError) Error() string {
	return ErrTooManyPending.Error() + " (" + e.Key + " " + strconv.Itoa(e.Max) + ")"
}

// Unwrap returns ErrTooManyPending.
func (e *PendingLimitError) Unwrap() error { return ErrTooManyPending }

// Refusal returns the ERROR frame's message header and body for the refused request.
func (e *PendingLimitError) Refusal() (message, detail string) {
	who := "the broker has"
	if e.Key == KeyMaxPendingByClient {
		who = "this connection has"
	}
	return "too many pending requests", who + " " + strconv.Itoa(e.Max) + " requests awaiting a response (" + e.Key +
		"); wait for responses or timeouts before sending more"
}

// The configuration keys of the pending-request bounds, as PendingLimitError.Key names them.
const (
	KeyMaxPending         = "limits.max-pending-requests"
	KeyMaxPendingByClient = "limits.max-pending-requests-by-client"
)
