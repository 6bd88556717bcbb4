package admission

import "errors"

var (
	// ErrThrottled is returned by LoginThrottle.Admit when the attempt would have to wait
	// longer than the maximum back-off: it is refused without checking the credentials.
	ErrThrottled = errors.New("admission: too many failed logins")
	// ErrTotalLimit is returned by Conns.Acquire when the broker holds its maximum of
	// connections.
	ErrTotalLimit = errors.New("admission: connection limit reached")
	// ErrAddressLimit is returned by Conns.Acquire when the peer's address holds its maximum
	// of connections.
	ErrAddressLimit = errors.New("admission: connection limit per address reached")
)
