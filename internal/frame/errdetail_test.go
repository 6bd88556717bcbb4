package frame

import (
	"bytes"
	"strings"
	"testing"
	"testing/iotest"
)

// TestProtocolErrorDetails checks that every protocol error the parser reports says, in its
// Detail (the ERROR body), which command, header or limit was at fault and the rule it
// broke, while Reason (the message header) stays the short sentinel text.
func TestProtocolErrorDetails(t *testing.T) {
	long := strings.Repeat("v", 40)
	for _, c := range []struct {
		name string
		in   string
		v    Version
		lim  Limits
		err  error
		want []string // substrings of Detail
	}{
		{"unknown command", "FROBNICATE\nreceipt:r\n\n\x00", V12, Limits{}, ErrUnknownCommand,
			[]string{`command "FROBNICATE"`, "is not a STOMP command", "SEND"}},
		{"lower-case command", "send\n\n\x00", V12, Limits{}, ErrUnknownCommand,
			[]string{`command "send"`, "upper case"}},
		{"header without colon", "SEND\nnocolon\n\n\x00", V12, Limits{}, ErrMalformedHeader,
			[]string{`header line "nocolon"`, "no colon", "name:value"}},
		{"header with empty name", "SEND\n:value\n\n\x00", V12, Limits{}, ErrMalformedHeader,
			[]string{`header line ":value"`, "empty name"}},
		{"NUL in a header", "SEND\ninj:x\x00ERROR\n\nbody\x00", V12, Limits{}, ErrMalformedHeader,
			[]string{`header line "inj:x\x00ERROR"`, "NUL"}},
		{"undefined escape in a value", "SEND\nnote:tab\\there\n\n\x00", V12, Limits{}, ErrBadEscape,
			[]string{`header "note"`, `"\\t"`, "STOMP 1.2 does not define", `\r, \n, \c and \\`}},
		{"undefined escape in a name", "SEND\nk\\x:v\n\n\x00", V12, Limits{}, ErrBadEscape,
			[]string{`header name "k\\x"`, `"\\x"`}},
		{"\\r at 1.1", "SEND\nk:a\\rb\n\n\x00", V11, Limits{}, ErrBadEscape,
			[]string{`header "k"`, `"\\r"`, "STOMP 1.1 does not define", `\n, \c and \\`}},
		{"backslash at the end", "SEND\nk:ab\\\n\n\x00", V12, Limits{}, ErrBadEscape,
			[]string{`header "k"`, `has "\\"`}},
		{"bad content-length", "SEND\ncontent-length:0x10\n\n\x00", V12, Limits{}, ErrBadContentLength,
			[]string{`content-length "0x10"`, "non-negative decimal"}},
		{"missing NUL", "SEND\ncontent-length:3\n\nabcd\x00", V12, Limits{}, ErrMissingNUL,
			[]string{"content-length is 3", `"d"`, "not the NUL"}},
		{"bare CR in a header", "SEND\nk:a\rb\n\n\x00", V12, Limits{}, ErrBareCR,
			[]string{`header line "k:a\rb"`, "CR not followed by LF"}},
		{"bare CR in the command", "SE\rND\n\n\x00", V12, Limits{}, ErrBareCR,
			[]string{`command line "SE\rND"`}},
		{"bare CR between frames", "\rX", V12, Limits{}, ErrBareCR,
			[]string{"between frames"}},
		{"header line too long", "SEND\nk:" + long + "\n\n\x00", V12, tinyLimits, ErrHeaderLineTooLong,
			[]string{`header line "k:vvvvvvvvvvvvvvv"`, "longer than 16 octets", "max-header-length"}},
		{"command line too long", strings.Repeat("S", 40) + "\n\n\x00", V12, tinyLimits, ErrHeaderLineTooLong,
			[]string{`command line "SSSSSSSSSSSSSSSSS"`, "longer than 16 octets"}},
		{"too many headers", "SEND\na:1\nb:2\nc:3\n\n\x00", V12, tinyLimits, ErrTooManyHeaders,
			[]string{"more than 2 headers", "max-headers"}},
		{"header section too large", "SEND\n" + strings.Repeat("k:v\n", 20), V12, Limits{MaxHeaderLineBytes: 16, MaxHeaderBytes: 48}, ErrHeaderSectionTooLarge,
			[]string{"exceed 48 octets", "max-headers-bytes"}},
		{"content-length over the limit", "SEND\ncontent-length:9\n\n123456789\x00", V12, tinyLimits, ErrBodyTooLarge,
			[]string{"content-length 9", "8 octets", "max-body-length"}},
		{"body over the limit", "SEND\n\n123456789\x00", V12, tinyLimits, ErrBodyTooLarge,
			[]string{"exceeds 8 octets", "max-body-length"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			for _, r := range []func() *bytes.Reader{func() *bytes.Reader { return bytes.NewReader([]byte(c.in)) }} {
				p := NewParser(iotest.OneByteReader(r()), c.lim)
				p.SetVersion(c.v)
				_, err := p.ReadFrame()
				requireErrorIs(t, err, c.err)
				pe, _ := IsProtocolError(err)
				requireEqual(t, pe.Reason, strings.TrimPrefix(c.err.Error(), "frame: "))
				for _, w := range c.want {
					if !strings.Contains(pe.Detail, w) {
						t.Errorf("detail %q does not contain %q", pe.Detail, w)
					}
				}
				checkSanitized(t, pe.Detail)
			}
		})
	}
}

// checkSanitized fails for a detail that carries a NUL or another control character, or
// that is long enough to echo more than a bounded prefix of the input.
func checkSanitized(t *testing.T, detail string) {
	t.Helper()
	for _, r := range detail {
		if r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) {
			t.Errorf("detail %q contains control character %U", detail, r)
		}
	}
	if len(detail) > 4*MaxEchoBytes+400 {
		t.Errorf("detail is %d octets: %q", len(detail), detail)
	}
}

// TestErrorDetailEchoIsBounded feeds hostile client input (escape sequences, NULs, bells,
// invalid UTF-8, thousands of octets) to each error that echoes it: the detail repeats at
// most MaxEchoBytes octets of it, escaped.
func TestErrorDetailEchoIsBounded(t *testing.T) {
	hostile := "\x1b[31mEVIL\x00\x07\xff\xfe" + strings.Repeat("A", 5000)
	lim := Limits{MaxHeaderLineBytes: 8000}
	for _, in := range []string{
		hostile + "\n\n\x00",                           // unknown command
		"SEND\n" + hostile + "\n\n\x00",                // header without colon
		"SEND\nk:" + hostile + "\\q\n\n\x00",           // undefined escape (the value is not echoed)
		"SEND\ncontent-length:" + hostile + "\n\n\x00", // bad content-length
		"SEND\n" + strings.Repeat("\x01", 9000) + "\n\n\x00",
	} {
		p := NewParser(strings.NewReader(in), lim)
		_, err := p.ReadFrame()
		pe, ok := IsProtocolError(err)
		if !ok {
			t.Fatalf("%.20q: got %v, want a protocol error", in, err)
		}
		checkSanitized(t, pe.Detail)
		if strings.Contains(pe.Detail, strings.Repeat("A", MaxEchoBytes+1)) {
			t.Errorf("detail echoes more than %d octets: %q", MaxEchoBytes, pe.Detail)
		}
	}
}

func TestEcho(t *testing.T) {
	requireEqual(t, Echo("abc"), `"abc"`)
	requireEqual(t, Echo("a\x00b\n\x1b"), `"a\x00b\n\x1b"`)
	requireEqual(t, Echo(strings.Repeat("x", MaxEchoBytes)), `"`+strings.Repeat("x", MaxEchoBytes)+`"`)
	requireEqual(t, Echo(strings.Repeat("x", MaxEchoBytes+1)), `"`+strings.Repeat("x", MaxEchoBytes)+`"...`)
	// A cut never splits a UTF-8 sequence: "é" is 2 octets straddling the bound.
	s := strings.Repeat("x", MaxEchoBytes-1) + "é" + "tail"
	requireEqual(t, Echo(s), `"`+strings.Repeat("x", MaxEchoBytes-1)+`"...`)
	// Not UTF-8 at all: cut at the bound, every octet escaped.
	requireEqual(t, len(Echo(strings.Repeat("\x80", 100))), 2+4*MaxEchoBytes+3)
}

func TestSanitizeDetail(t *testing.T) {
	clean := `header "k" has "\\t", an escape STOMP 1.2 does not define — é`
	requireEqual(t, SanitizeDetail(clean), clean)
	requireEqual(t, testing.AllocsPerRun(100, func() { _ = SanitizeDetail(clean) }), 0.0)
	requireEqual(t, SanitizeDetail("a\x00b\nc\x1b\x7f\u0085\xffd"), `a\x00b\x0ac\x1b\x7f\xc2\x85\xffd`)
	long := SanitizeDetail(strings.Repeat("x", 3*MaxDetailBytes))
	requireEqual(t, long, strings.Repeat("x", MaxDetailBytes)+"...")
	// An escape is never cut in half by the bound.
	cut := SanitizeDetail(strings.Repeat("x", MaxDetailBytes-2) + "\x00tail")
	requireEqual(t, cut, strings.Repeat("x", MaxDetailBytes-2)+"...")
}
