package dest

import "errors"

// ErrInvalid is returned, wrapped with a detail, by Parse and ParseFilter for every
// destination they reject: too long, empty, an empty segment or channel token, a prefix with
// no channel, a control character, a misplaced or forbidden wildcard, a bare destination that
// would be confused with a prefixed one, or a default pattern that may not route bare
// destinations.
//
// Test for it with errors.Is. The wrapped text ("invalid destination: empty segment") is for
// the log only; a client is only ever sent ErrInvalid.Error(), the sanitized text
// "invalid destination" (reference 003, "Destination errors (all sanitized)"). Its text is
// deliberately not prefixed with the package name because it is that wire text.
var ErrInvalid = errors.New("invalid destination")

// ErrUnsupportedExchange is returned, inside an *ExchangeError, by Parse and ParseFilter for
// a RabbitMQ /exchange/<name>/... destination whose exchange is not amq.topic or amq.direct
// (the exchanges Titan maps onto its events pattern; issue 26). Unlike ErrInvalid, the
// client is told which exchange: the ERROR names it.
var ErrUnsupportedExchange = errors.New("dest: unsupported exchange")

// ExchangeError names the exchange of an ErrUnsupportedExchange (at most 64 bytes of it).
type ExchangeError struct {
	// Name is the exchange as the destination spelled it.
	Name string
}

// Error implements error.
func (e *ExchangeError) Error() string { return ErrUnsupportedExchange.Error() + " " + e.Name }

// Unwrap makes errors.Is(err, ErrUnsupportedExchange) hold.
func (e *ExchangeError) Unwrap() error { return ErrUnsupportedExchange }
