package admin

import (
	"errors"
	"net/http"

	"github.com/titan-broker/titan/internal/dest"
	"github.com/titan-broker/titan/internal/dispatch"
)

// Sentinels of this package. Failures that another package already names (an invalid
// destination, a missing or non-empty queue, a full queue) use that package's sentinel.
var (
	// ErrInvalidGroup is returned when a group parameter is not ^[a-zA-Z0-9_-]{1,64}$.
	ErrInvalidGroup = errors.New("admin: invalid group")
	// ErrInvalidParameter is returned for a missing, malformed or out-of-range parameter or
	// request body.
	ErrInvalidParameter = errors.New("admin: invalid parameter")
	// ErrUnsupportedPattern is returned when a destination resolves to a pattern that has no
	// dispatcher queue here (only events and queues have one).
	ErrUnsupportedPattern = errors.New("admin: destination pattern not supported")
	// ErrUnauthorized is returned by the handler when a token is configured and the request
	// does not carry it.
	ErrUnauthorized = errors.New("admin: unauthorized")
	// ErrForbidden is returned by the handler when the authenticated user lacks the
	// permission a request needs (browse to read, manage to change), or when the Host
	// header is not a name of the broker (DNS rebinding).
	ErrForbidden = errors.New("admin: forbidden")
	// ErrTooLarge is returned when a publish request or its body exceeds the limit.
	ErrTooLarge = errors.New("admin: request too large")
	// ErrNotFound is returned by the handler for an unknown path.
	ErrNotFound = errors.New("admin: not found")
	// ErrMethodNotAllowed is returned by the handler for a known path and a wrong method.
	ErrMethodNotAllowed = errors.New("admin: method not allowed")
	// ErrRejected is returned by Publish when a stage of the SEND route (a custom stage, an
	// authorization stage) refused the message; the message says the stage's reason.
	ErrRejected = errors.New("admin: message rejected")
	// ErrNodeUp is returned by RemoveClusterNode (wrapped by a ClusterMembership's
	// RemoveNode) for a node that is up (the answering node, or one still connected).
	ErrNodeUp = errors.New("admin: node is up")
	// ErrNotMember is returned by RemoveClusterNode (wrapped by a ClusterMembership's
	// RemoveNode) when no member of the cluster has that name or peer id.
	ErrNotMember = errors.New("admin: not a member of the cluster")
)

// Error codes carried by *Error and the "code" field of JSON error bodies. They are stable:
// scripts and the CLI switch on them.
const (
	CodeInvalidDestination = "invalid_destination"
	CodeInvalidGroup       = "invalid_group"
	CodeInvalidParameter   = "invalid_parameter"
	CodeUnsupportedPattern = "unsupported_pattern"
	CodeQueueNotFound      = "queue_not_found"
	CodeQueueNotEmpty      = "queue_not_empty"
	CodeQueueFull          = "queue_full"
	CodeNotStored          = "not_stored"
	// CodeStoreUnavailable: the store is down (store.ErrUnavailable); the message says why.
	CodeStoreUnavailable = "store_unavailable"
	// CodeDestinationLimit: the publication would create a destination over max-destinations.
	CodeDestinationLimit = "destination_limit"
	CodeUnauthorized     = "unauthorized"
	CodeForbidden        = "forbidden"
	CodeTooLarge         = "too_large"
	CodeNotFound         = "not_found"
	CodeMethodNotAllowed = "method_not_allowed"
	CodeInternal         = "internal"
	CodeRejected         = "rejected"
	// CodeConnectionNotFound: no open connection has the session id given.
	CodeConnectionNotFound = "connection_not_found"
)

// Error is the error every Admin method returns: a stable Code, a one-line Message for
// people (what went wrong and, where there is one, what to do) and the sentinel it wraps.
// errors.Is(err, dispatch.ErrQueueNotEmpty) and friends work through Unwrap.
type Error struct {
	// Code is one of the Code* constants.
	Code string
	// Message is the human-readable, single-line explanation sent to clients.
	Message string
	// Err is the underlying sentinel (never nil for errors built by this package).
	Err error
}

// Error returns Message.
func (e *Error) Error() string { return e.Message }

// Unwrap returns the sentinel.
func (e *Error) Unwrap() error { return e.Err }

// Status returns the HTTP status for the error's Code: 400 for invalid input, 401, 403 for a
// message a stage of the SEND route rejected, 404, 405, 409 for a non-empty queue, 413, 503
// for a full queue or a message the store refused, 501 for an operation cluster mode does
// not support yet, 500 otherwise.
func (e *Error) Status() int {
	switch e.Code {
	case CodeInvalidDestination, CodeInvalidGroup, CodeInvalidParameter, CodeUnsupportedPattern:
		return http.StatusBadRequest
	case CodeRejected:
		return http.StatusForbidden
	case CodeUnauthorized:
		return http.StatusUnauthorized
	case CodeForbidden:
		return http.StatusForbidden
	case CodeQueueNotFound, CodeNotFound, CodeConnectionNotFound, CodeDurableNotFound, CodeNotMember:
		return http.StatusNotFound
	case CodeMethodNotAllowed:
		return http.StatusMethodNotAllowed
	case CodeQueueNotEmpty, CodeDurableInUse, CodeNodeUp:
		return http.StatusConflict
	case CodeTooLarge:
		return http.StatusRequestEntityTooLarge
	case CodeUnsupportedInCluster:
		return http.StatusNotImplemented
	case CodeQueueFull, CodeNotStored, CodeStoreUnavailable, CodeDestinationLimit:
		return http.StatusServiceUnavailable
	}
	return http.StatusInternalServerError
}

// ErrorResponse is the JSON body of every error answer.
type ErrorResponse struct {
	// Error is the human-readable message.
	Error string `json:"error"`
	// Code is the stable machine-readable code (see the Code* constants).
	Code string `json:"code,omitempty"`
}

func newError(code, msg string, err error) *Error { return &Error{Code: code, Message: msg, Err: err} }

func invalidParam(msg string) *Error { return newError(CodeInvalidParameter, msg, ErrInvalidParameter) }

func errInvalidDestination(err error) *Error {
	// Sanitized: the detail wrapped by dest.Parse never reaches the client (reference 003).
	_ = err
	return newError(CodeInvalidDestination, dest.ErrInvalid.Error(), dest.ErrInvalid)
}

// asError converts any error into an *Error, mapping known sentinels of other packages.
func asError(err error) *Error {
	var ae *Error
	if errors.As(err, &ae) {
		return ae
	}
	switch {
	case errors.Is(err, dest.ErrInvalid):
		return errInvalidDestination(err)
	case errors.Is(err, dispatch.ErrNoQueue):
		return newError(CodeQueueNotFound, "no such queue", err)
	case errors.Is(err, dispatch.ErrQueueNotEmpty):
		return newError(CodeQueueNotEmpty, "queue is not empty; delete with force=true to discard its messages", err)
	case errors.Is(err, dispatch.ErrQueueFull):
		return newError(CodeQueueFull, "queue full; retry later", err)
	case errors.Is(err, dispatch.ErrQueuePaused):
		return newError(CodeQueueFull, "queue paused; retry after it is resumed", err)
	case errors.Is(err, dispatch.ErrNotStored):
		return newError(CodeNotStored, "message not stored: this broker has no store for durable destinations", err)
	}
	return newError(CodeInternal, "internal error", err)
}
