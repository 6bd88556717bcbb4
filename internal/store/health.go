package store

import (
	"errors"
	"syscall"
	"time"
)

// State is a store's condition, as reported by Store.Health.
type State int

// The states of a store, from best to worst.
const (
	// StateOK: reads and writes work.
	StateOK State = iota
	// StateDegraded: writes still commit, but the store's background work fails (for
	// example a memtable flush or a compaction on a full disk), so it will soon be Down if
	// nothing changes. Health.Cause says why.
	StateDegraded
	// StateDown: writes are refused with an error wrapping ErrUnavailable (or ErrCorrupt),
	// because a write could not be committed. Reads may keep working. A store whose cause
	// is a file-system error retries in the background, with backoff, and returns to
	// StateOK on its own once writes succeed again; one whose cause is ErrCorrupt stays
	// down.
	StateDown
)

// String returns "ok", "degraded" or "down".
func (s State) String() string {
	switch s {
	case StateOK:
		return "ok"
	case StateDegraded:
		return "degraded"
	case StateDown:
		return "down"
	}
	return "unknown"
}

// Health is a snapshot of a store's condition, returned by Store.Health.
type Health struct {
	// State is the current state.
	State State
	// Cause is the error that put the store in State; nil when State is StateOK. Reason
	// gives its short form for an ERROR frame or a health answer.
	Cause error
	// Since is when the store entered State (Open's time for a store that never changed).
	Since time.Time
	// Changes counts the state changes since Open (a monotonic counter for metrics).
	Changes uint64
	// Recoveries counts the returns to StateOK from StateDown since Open.
	Recoveries uint64
	// Changed is closed when the state next changes (a notification: wait on it, then call
	// Health again). nil for a store whose state never changes.
	Changed <-chan struct{}
}

// ErrUnavailable is returned (wrapped in an *UnavailableError) by writes that a store in
// StateDown refuses, and by any call made while the store reopens itself. Test with
// errors.Is.
var ErrUnavailable = errors.New("store unavailable")

// UnavailableError is the error of a refused write: the store is down because of Cause.
// Its text is "store unavailable: " followed by Reason(Cause), for example
// "store unavailable: no space left on device", short enough for an ERROR frame's message
// header.
type UnavailableError struct {
	// Cause is the failure that took the store down (a file-system error, usually wrapping
	// a syscall.Errno).
	Cause error
}

// Error is "store unavailable: <reason>" (ErrUnavailable and Reason of Cause).
func (e *UnavailableError) Error() string {
	return ErrUnavailable.Error() + ": " + Reason(e.Cause)
}

// Refusal returns the text a client reads for a write this error refused (Describe): the
// router's Refusal port, so the SEND's ERROR says "store unavailable: <reason>".
func (e *UnavailableError) Refusal() string { return Describe(e) }

// Unwrap returns ErrUnavailable and the cause, so errors.Is matches both.
func (e *UnavailableError) Unwrap() []error { return []error{ErrUnavailable, e.Cause} }

// Reason returns the short, operator-readable reason of a store error: the operating
// system's text for a file-system error ("no space left on device", "read-only file
// system"), "corrupt data" for ErrCorrupt, and the error's own text otherwise. It returns
// "" for nil.
func Reason(err error) string {
	if err == nil {
		return ""
	}
	var ue *UnavailableError
	if errors.As(err, &ue) && ue.Cause != nil {
		return Reason(ue.Cause)
	}
	var errno syscall.Errno
	if errors.As(err, &errno) {
		return errno.Error()
	}
	if errors.Is(err, ErrCorrupt) {
		return "corrupt data"
	}
	return err.Error()
}

// Describe returns the short text a client should read for a failed write (the message
// header of the SEND's ERROR frame): "store unavailable: no space left on device" for a
// store that is down, "store unavailable: corrupt data" for corruption, and
// "message not stored" for anything else (including nil).
func Describe(err error) string {
	switch {
	case errors.Is(err, ErrUnavailable):
		return ErrUnavailable.Error() + ": " + Reason(err)
	case errors.Is(err, ErrCorrupt):
		return ErrUnavailable.Error() + ": corrupt data"
	}
	return "message not stored"
}
