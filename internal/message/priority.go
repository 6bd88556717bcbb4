package message

import "github.com/titan-broker/titan/internal/frame"

// Priority bounds and default (JMS 2.0 §3.4.10; Artemis and ActiveMQ take the STOMP
// priority header as the JMS priority).
const (
	// MinPriority is the lowest priority.
	MinPriority = 0
	// MaxPriority is the highest priority.
	MaxPriority = 9
	// DefaultPriority is the priority of a message without a priority header.
	DefaultPriority = 4
)

// ParsePriority reads a priority header value: a decimal number from 0 to 9 (leading zeros
// allowed, no sign or blanks). ok is false for anything else. It allocates nothing.
func ParsePriority(v string) (p uint8, ok bool) {
	if v == "" || len(v) > 8 {
		return 0, false
	}
	n := 0
	for i := 0; i < len(v); i++ {
		c := v[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int(c-'0')
	}
	if n > MaxPriority {
		return 0, false
	}
	return uint8(n), true
}

// Priority returns the message's priority from its priority header, DefaultPriority when it
// has none (or, for a message the SEND path did not check, an invalid one). It scans the
// headers; callers that need it often keep the result.
func (m *Message) Priority() uint8 {
	if v, ok := m.Header(frame.HdrPriority); ok {
		if p, ok := ParsePriority(v); ok {
			return p
		}
	}
	return DefaultPriority
}
