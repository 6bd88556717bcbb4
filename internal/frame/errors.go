package frame

import (
	"errors"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Sentinel errors returned (wrapped in *ProtocolError) by Parser.ReadFrame. Test for them with
// errors.Is. Every one of them leaves the stream unsynchronised, so the connection must close.
var (
	// ErrHeaderLineTooLong is returned when a command or header line exceeds
	// Limits.MaxHeaderLineBytes.
	ErrHeaderLineTooLong = errors.New("frame: header line too long")
	// ErrTooManyHeaders is returned when a frame has more than Limits.MaxHeaders headers.
	ErrTooManyHeaders = errors.New("frame: too many headers")
	// ErrHeaderSectionTooLarge is returned when the command and headers of one frame exceed
	// Limits.MaxHeaderBytes in total.
	ErrHeaderSectionTooLarge = errors.New("frame: headers too large")
	// ErrBodyTooLarge is returned when a body (declared by content-length or read up to the
	// NUL) exceeds Limits.MaxBodyBytes.
	ErrBodyTooLarge = errors.New("frame: body too large")
	// ErrLargeFrameBudget is returned when a frame over 64 KiB would grow its read buffer
	// past the broker-wide budget of such buffers (Limits.LargeFrames).
	ErrLargeFrameBudget = errors.New("frame: large frame memory limit reached")
	// ErrBadContentLength is returned when content-length is not a non-negative decimal.
	ErrBadContentLength = errors.New("frame: invalid content-length")
	// ErrMissingNUL is returned when the octet after a content-length body is not NUL.
	ErrMissingNUL = errors.New("frame: body not terminated by NUL")
	// ErrMalformedHeader is returned for a header line without a colon or with an empty name.
	ErrMalformedHeader = errors.New("frame: malformed header")
	// ErrBadEscape is returned for an escape sequence the negotiated version does not define.
	ErrBadEscape = errors.New("frame: undefined escape sequence")
	// ErrBareCR is returned when a CR is not immediately followed by LF outside a body.
	ErrBareCR = errors.New("frame: CR without LF")
	// ErrUnknownCommand is returned for a command line that names no STOMP command.
	ErrUnknownCommand = errors.New("frame: unknown command")
)

// ProtocolError is a protocol failure to be reported to the peer as an ERROR frame.
//
// Reason is the short text for the ERROR frame's message header: stable, so clients and
// operators can match on it. Detail, the ERROR frame's body, says what was wrong: which
// header or command, and the rule it broke, repeating client input only through Echo.
// ReceiptID, when not empty, is the receipt header of the offending frame and must be echoed
// as receipt-id (STOMP 1.2, "ERROR"). Fatal means the connection closes after the ERROR frame. Err, when set, is the
// sentinel the failure came from.
type ProtocolError struct {
	Reason    string
	Detail    string
	ReceiptID string
	Fatal     bool
	Err       error
}

// Error returns Reason, followed by Detail when set.
func (e *ProtocolError) Error() string {
	if e.Detail != "" {
		return e.Reason + ": " + e.Detail
	}
	return e.Reason
}

// Unwrap returns the sentinel error, if any.
func (e *ProtocolError) Unwrap() error { return e.Err }

// protoErr is the parser's constructor: reason is the sentinel's text without the package
// prefix, detail the ERROR body.
func protoErr(sentinel error, receipt, detail string) *ProtocolError {
	msg := sentinel.Error()
	if len(msg) > 7 && msg[:7] == "frame: " {
		msg = msg[7:]
	}
	return &ProtocolError{Reason: msg, Detail: detail, ReceiptID: receipt, Fatal: true, Err: sentinel}
}

// MaxDetailBytes bounds an ERROR body: SanitizeDetail keeps at most this many octets of a
// detail, then "...".
const MaxDetailBytes = 1024

// SanitizeDetail returns detail fit for an ERROR body whoever wrote it: control characters
// (C0, DEL, C1) and invalid UTF-8 replaced by \xNN escapes, and cut after at most
// MaxDetailBytes octets (never inside an escape), "..." marking the cut. A detail that needs neither is returned as is, without allocating. Details
// should quote client input with Echo; this is the net under every ERROR frame.
func SanitizeDetail(detail string) string {
	clean := len(detail) <= MaxDetailBytes
	for i := 0; clean && i < len(detail); {
		r, n := utf8.DecodeRuneInString(detail[i:])
		clean = !isControl(r) && !(r == utf8.RuneError && n == 1)
		i += n
	}
	if clean {
		return detail
	}
	out := make([]byte, 0, min(len(detail), MaxDetailBytes)+8)
	for i := 0; i < len(detail); {
		r, n := utf8.DecodeRuneInString(detail[i:])
		piece := detail[i : i+n]
		if isControl(r) || (r == utf8.RuneError && n == 1) {
			piece = ""
			for j := i; j < i+n; j++ {
				piece += `\x` + strconv.FormatUint(uint64(detail[j])>>4, 16) + strconv.FormatUint(uint64(detail[j])&15, 16)
			}
		}
		if len(out)+len(piece) > MaxDetailBytes {
			return string(append(out, "..."...))
		}
		out = append(out, piece...)
		i += n
	}
	return string(out)
}

func isControl(r rune) bool { return r < 0x20 || (r >= 0x7f && r < 0xa0) }

// MaxEchoBytes bounds how many octets of client input an ERROR body repeats (see Echo).
const MaxEchoBytes = 64

// Echo renders client input for an ERROR body or a log line: at most MaxEchoBytes octets of
// s (cut before a partial UTF-8 sequence), double-quoted with Go escapes, so a NUL, a control
// character or invalid UTF-8 shows as an escape (\x00, \n, \x1b) and never raw; "..."
// follows when s was longer. The result is at most 4*MaxEchoBytes+5 octets. Safe for
// concurrent use; it allocates, so it is for error paths.
func Echo(s string) string {
	if len(s) <= MaxEchoBytes {
		return strconv.Quote(s)
	}
	cut := MaxEchoBytes
	for i := 0; i < utf8.UTFMax-1 && cut > 0 && !utf8.RuneStart(s[cut]); i++ {
		cut--
	}
	if !utf8.RuneStart(s[cut]) {
		cut = MaxEchoBytes // not UTF-8 at all: cut anywhere, Quote escapes the octets
	}
	return strconv.Quote(s[:cut]) + "..."
}

// EchoLine is Echo for a header line, except that the value of a secret header (passcode,
// STOMP 1.2 CONNECT) is never repeated: "passcode:..." renders as "passcode:" followed by
// "(value not shown)", so a malformed passcode line reaches neither the ERROR nor the log
// (issue #29). The name is matched without case: a malformed line is not a header yet.
func EchoLine(line string) string {
	name, _, ok := strings.Cut(line, ":")
	if ok && strings.EqualFold(strings.TrimSpace(name), HdrPasscode) {
		return Echo(name+":") + " (value not shown)"
	}
	return Echo(line)
}
