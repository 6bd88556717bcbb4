package frame

import (
	"strconv"
	"strings"
	"unsafe"
)

// Command is a STOMP frame command. The zero value is CmdUnknown.
type Command uint8

// The STOMP 1.2 commands (STOMP 1.2, "Client Frames" and "Server Frames").
const (
	CmdUnknown Command = iota
	CmdConnect
	CmdStomp
	CmdSend
	CmdSubscribe
	CmdUnsubscribe
	CmdAck
	CmdNack
	CmdBegin
	CmdCommit
	CmdAbort
	CmdDisconnect
	CmdConnected
	CmdMessage
	CmdReceipt
	CmdError
	numCommands
)

var commandNames = [numCommands]string{
	"UNKNOWN", "CONNECT", "STOMP", "SEND", "SUBSCRIBE", "UNSUBSCRIBE", "ACK", "NACK",
	"BEGIN", "COMMIT", "ABORT", "DISCONNECT", "CONNECTED", "MESSAGE", "RECEIPT", "ERROR",
}

// String returns the wire name of c ("SEND").
func (c Command) String() string {
	if c < numCommands {
		return commandNames[c]
	}
	return "UNKNOWN"
}

// IsClient reports whether c is a frame a client may send.
func (c Command) IsClient() bool { return c >= CmdConnect && c <= CmdDisconnect }

// parseCommand maps a command line to a Command without allocating.
func parseCommand(b []byte) Command {
	switch string(b) {
	case "SEND":
		return CmdSend
	case "MESSAGE":
		return CmdMessage
	case "ACK":
		return CmdAck
	case "NACK":
		return CmdNack
	case "SUBSCRIBE":
		return CmdSubscribe
	case "UNSUBSCRIBE":
		return CmdUnsubscribe
	case "CONNECT":
		return CmdConnect
	case "STOMP":
		return CmdStomp
	case "BEGIN":
		return CmdBegin
	case "COMMIT":
		return CmdCommit
	case "ABORT":
		return CmdAbort
	case "DISCONNECT":
		return CmdDisconnect
	case "CONNECTED":
		return CmdConnected
	case "RECEIPT":
		return CmdReceipt
	case "ERROR":
		return CmdError
	}
	return CmdUnknown
}

// Version is a negotiated STOMP protocol version.
type Version uint8

// Protocol versions. V10 is what a CONNECT without accept-version means (STOMP 1.2,
// "Protocol Negotiation").
const (
	V10 Version = iota + 1
	V11
	V12
)

// String returns "1.0", "1.1" or "1.2".
func (v Version) String() string {
	switch v {
	case V10:
		return "1.0"
	case V11:
		return "1.1"
	case V12:
		return "1.2"
	}
	return "unknown"
}

// ParseVersion maps "1.0", "1.1", "1.2" to a Version; ok is false otherwise.
func ParseVersion(s string) (v Version, ok bool) {
	switch strings.TrimSpace(s) {
	case "1.0":
		return V10, true
	case "1.1":
		return V11, true
	case "1.2":
		return V12, true
	}
	return 0, false
}

// Header names used by the protocol and by Titan.
const (
	HdrAcceptVersion = "accept-version"
	HdrHost          = "host"
	HdrLogin         = "login"
	HdrPasscode      = "passcode"
	HdrHeartBeat     = "heart-beat"
	HdrVersion       = "version"
	HdrSession       = "session"
	HdrServer        = "server"
	HdrDestination   = "destination"
	HdrContentType   = "content-type"
	HdrContentLength = "content-length"
	HdrReceipt       = "receipt"
	HdrReceiptID     = "receipt-id"
	HdrTransaction   = "transaction"
	HdrID            = "id"
	HdrAck           = "ack"
	HdrSubscription  = "subscription"
	HdrMessageID     = "message-id"
	HdrMessage       = "message"
	HdrCorrelationID = "correlation-id"
	HdrReplyTo       = "reply-to"
	HdrExpires       = "expires"
	HdrPriority      = "priority"
	HdrPersistent    = "persistent"
	HdrRedelivered   = "redelivered"
	HdrGroup         = "group"
	HdrTimeout       = "timeout"
)

// Header is one header entry. Both strings are unescaped.
type Header struct {
	Key   string
	Value string
}

// Frame is one STOMP frame.
//
// Headers keep wire order and duplicates; Get returns the first. A Frame returned by
// Parser.ReadFrame points into the parser's buffer (see package doc); one built by hand or by
// Clone owns its memory. Frames are not safe for concurrent mutation.
type Frame struct {
	Command Command
	Headers []Header
	Body    []byte
}

// Get returns the value of the first header named key and whether it was present
// (STOMP 1.2, "Repeated Header Entries").
func (f *Frame) Get(key string) (string, bool) {
	for i := range f.Headers {
		if f.Headers[i].Key == key {
			return f.Headers[i].Value, true
		}
	}
	return "", false
}

// Value returns the first header named key, or "" when absent.
func (f *Frame) Value(key string) string {
	v, _ := f.Get(key)
	return v
}

// Add appends a header (it does not replace an existing one).
func (f *Frame) Add(key, value string) { f.Headers = append(f.Headers, Header{key, value}) }

// Set replaces the first header named key, or appends it, and removes later duplicates.
func (f *Frame) Set(key, value string) {
	out := f.Headers[:0]
	found := false
	for _, h := range f.Headers {
		if h.Key == key {
			if found {
				continue
			}
			h.Value = value
			found = true
		}
		out = append(out, h)
	}
	f.Headers = out
	if !found {
		f.Headers = append(f.Headers, Header{key, value})
	}
}

// Del removes every header named key.
func (f *Frame) Del(key string) {
	out := f.Headers[:0]
	for _, h := range f.Headers {
		if h.Key != key {
			out = append(out, h)
		}
	}
	f.Headers = out
}

// Clone returns a deep copy of f that shares no memory with it, built with three allocations
// (the Frame, one buffer holding the body and every header string, one header slice). The
// clone's Body and strings share that buffer, so the clone's Body must be treated as
// read-only.
func (f *Frame) Clone() *Frame {
	c := &Frame{}
	f.CloneInto(c)
	return c
}

// CloneInto is Clone into a Frame the caller owns (two allocations: the packed buffer and the
// header slice), for a caller that keeps only the headers and the body.
func (f *Frame) CloneInto(c *Frame) {
	n := len(f.Body)
	for _, h := range f.Headers {
		n += len(h.Key) + len(h.Value)
	}
	*c = Frame{Command: f.Command}
	if n == 0 {
		if f.Body != nil {
			c.Body = []byte{}
		}
		if len(f.Headers) > 0 {
			c.Headers = make([]Header, len(f.Headers))
		}
		return
	}
	buf := make([]byte, n)
	off := copy(buf, f.Body)
	if f.Body != nil {
		c.Body = buf[:off:off]
	}
	s := unsafe.String(&buf[0], n)
	if len(f.Headers) > 0 {
		c.Headers = make([]Header, len(f.Headers))
		for i, h := range f.Headers {
			copy(buf[off:], h.Key)
			c.Headers[i].Key = s[off : off+len(h.Key)]
			off += len(h.Key)
			copy(buf[off:], h.Value)
			c.Headers[i].Value = s[off : off+len(h.Value)]
			off += len(h.Value)
		}
	}
}

// ContentLength returns the content-length header as a byte count; ok is false when the
// header is absent. err is ErrBadContentLength when present but not a non-negative decimal.
func (f *Frame) ContentLength() (n int, ok bool, err error) {
	v, ok := f.Get(HdrContentLength)
	if !ok {
		return 0, false, nil
	}
	n, err = parseContentLength(v)
	return n, true, err
}

func parseContentLength(v string) (int, error) {
	if v == "" || len(v) > 18 {
		return 0, ErrBadContentLength
	}
	n := 0
	for i := 0; i < len(v); i++ {
		c := v[i]
		if c < '0' || c > '9' {
			return 0, ErrBadContentLength
		}
		n = n*10 + int(c-'0')
	}
	return n, nil
}

// String renders f for logs and test failures (not the wire form).
func (f *Frame) String() string {
	var b strings.Builder
	b.WriteString(f.Command.String())
	for _, h := range f.Headers {
		b.WriteString(" ")
		b.WriteString(h.Key)
		b.WriteString(":")
		b.WriteString(strconv.Quote(h.Value))
	}
	b.WriteString(" body=")
	b.WriteString(strconv.Itoa(len(f.Body)))
	b.WriteString("B")
	return b.String()
}
