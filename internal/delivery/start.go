package delivery

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// StartKind says where an events-store subscription starts.
type StartKind uint8

// Start kinds (start-position header values).
const (
	StartNew   StartKind = iota // only messages appended after the SUBSCRIBE (default)
	StartFirst                  // from the first message held
	StartLast                   // from the last message (it is delivered)
	StartSeq                    // from a sequence number
	StartTime                   // from the first message accepted at or after a time
)

// StartPosition is a parsed start-position header.
type StartPosition struct {
	Kind StartKind
	Seq  uint64
	Time time.Time
}

// ErrBadStartPosition is returned by ParseStartPosition for an unreadable value.
var ErrBadStartPosition = errors.New("delivery: invalid start-position")

// ParseStartPosition parses a start-position header: "new" (or ""), "first", "last", a
// sequence number, "time:<RFC 3339>" or "delta:<Go duration>" (relative to now).
func ParseStartPosition(s string, now time.Time) (StartPosition, error) {
	switch {
	case s == "" || s == "new":
		return StartPosition{Kind: StartNew}, nil
	case s == "first":
		return StartPosition{Kind: StartFirst}, nil
	case s == "last":
		return StartPosition{Kind: StartLast}, nil
	case strings.HasPrefix(s, "time:"):
		t, err := time.Parse(time.RFC3339Nano, s[5:])
		if err != nil {
			return StartPosition{}, fmt.Errorf("%w: %v", ErrBadStartPosition, err)
		}
		return StartPosition{Kind: StartTime, Time: t}, nil
	case strings.HasPrefix(s, "delta:"):
		d, err := time.ParseDuration(s[6:])
		if err != nil || d < 0 {
			return StartPosition{}, fmt.Errorf("%w: delta needs a non-negative Go duration like 5m", ErrBadStartPosition)
		}
		return StartPosition{Kind: StartTime, Time: now.Add(-d)}, nil
	}
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil || n == 0 {
		return StartPosition{}, fmt.Errorf("%w: %q", ErrBadStartPosition, s)
	}
	return StartPosition{Kind: StartSeq, Seq: n}, nil
}
