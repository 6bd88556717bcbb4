package frame

import (
	"strconv"
	"strings"
)

// Terminator ends every frame Titan writes: the NUL that STOMP requires, then one LF.
//
// STOMP 1.2 ("Augmented BNF": frame = command EOL *(header EOL) EOL *OCTET NULL *(EOL))
// allows any number of EOLs after the NUL; ActiveMQ writes exactly this, and some parsers
// need it: PHP's PECL stomp reads the two octets after a content-length body and fails the
// read unless they are NUL and LF (or the NUL is the last octet it read), so with several
// frames in one read it loses every frame after the first. Peers skip the LF like a
// heart-beat.
const Terminator = "\x00\n"

// AppendTerminator appends Terminator to dst.
func AppendTerminator(dst []byte) []byte { return append(dst, Terminator...) }

// AppendFrame appends the wire form of f, as spoken at version v, to dst and returns the
// extended slice. The frame ends with Terminator (NUL, LF).
//
// Headers are written in order and escaped per v (never for CONNECT, STOMP or CONNECTED). A
// header that v cannot represent (see Representable) is left out rather than corrupting the
// frame; dropped counts them. AppendFrame adds no header of its own: callers that want
// content-length set it. It does not allocate when dst has room.
func AppendFrame(dst []byte, f *Frame, v Version) (out []byte, dropped int) {
	dst = append(dst, f.Command.String()...)
	dst = append(dst, '\n')
	raw := f.Command == CmdConnect || f.Command == CmdStomp || f.Command == CmdConnected
	for i := range f.Headers {
		var ok bool
		if dst, ok = AppendHeader(dst, f.Headers[i].Key, f.Headers[i].Value, v, raw); !ok {
			dropped++
		}
	}
	dst = append(dst, '\n')
	dst = append(dst, f.Body...)
	return AppendTerminator(dst), dropped
}

// AppendHeader appends "key:value\n" escaped for version v (unescaped when raw is set, as for
// CONNECT/CONNECTED). ok is false, and dst is returned unchanged, when v cannot represent the
// header (see Representable).
func AppendHeader(dst []byte, key, value string, v Version, raw bool) (out []byte, ok bool) {
	if !Representable(key, value, v, raw) {
		return dst, false
	}
	if raw || v == V10 {
		dst = append(dst, key...)
		dst = append(dst, ':')
		dst = append(dst, value...)
		return append(dst, '\n'), true
	}
	dst = appendEscaped(dst, key, v)
	dst = append(dst, ':')
	dst = appendEscaped(dst, value, v)
	return append(dst, '\n'), true
}

// AppendContentLength appends "content-length:n\n".
func AppendContentLength(dst []byte, n int) []byte {
	dst = append(dst, HdrContentLength...)
	dst = append(dst, ':')
	dst = strconv.AppendInt(dst, int64(n), 10)
	return append(dst, '\n')
}

// Representable reports whether a header can be written at version v without corrupting the
// frame: no version can carry a NUL; STOMP 1.0 (and unescaped CONNECT/CONNECTED frames) cannot carry CR or LF anywhere nor
// a colon in a name; 1.1 cannot carry CR (it has no \r escape); 1.2 can carry anything.
// Names must not be empty.
func Representable(key, value string, v Version, raw bool) bool {
	if key == "" || strings.IndexByte(key, 0) >= 0 || strings.IndexByte(value, 0) >= 0 {
		return false // a NUL ends the frame at every version
	}
	if raw || v == V10 {
		for i := 0; i < len(key); i++ {
			if c := key[i]; c == ':' || c == '\n' || c == '\r' {
				return false
			}
		}
		for i := 0; i < len(value); i++ {
			if c := value[i]; c == '\n' || c == '\r' {
				return false
			}
		}
		return true
	}
	if v == V11 {
		for i := 0; i < len(key); i++ {
			if key[i] == '\r' {
				return false
			}
		}
		for i := 0; i < len(value); i++ {
			if value[i] == '\r' {
				return false
			}
		}
	}
	return true
}

// escapable marks the octets STOMP 1.1/1.2 escape in header names and values.
var escapable = [256]bool{'\r': true, '\n': true, ':': true, '\\': true}

// appendEscaped appends s escaped for v, copying the runs between escapable octets whole.
// Callers have checked Representable, so a CR only reaches here at 1.2.
func appendEscaped(dst []byte, s string, v Version) []byte {
	start := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !escapable[c] {
			continue
		}
		dst = append(dst, s[start:i]...)
		start = i + 1
		switch c {
		case '\r':
			if v >= V12 {
				dst = append(dst, '\\', 'r')
			}
		case '\n':
			dst = append(dst, '\\', 'n')
		case ':':
			dst = append(dst, '\\', 'c')
		default: // '\\'
			dst = append(dst, '\\', '\\')
		}
	}
	return append(dst, s[start:]...)
}
