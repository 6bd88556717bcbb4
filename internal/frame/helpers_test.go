package frame

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"testing"
	"testing/iotest"
)

func requireNoError(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("unexpected error: %v", err)
	}
}

func requireEqual[T comparable](t testing.TB, got, want T) {
	t.Helper()
	if got != want {
		t.Fatalf("got %#v, want %#v", got, want)
	}
}

func requireErrorIs(t testing.TB, err, target error) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Fatalf("got error %v, want %v", err, target)
	}
}

// fr builds a frame from a command, a body and key/value pairs.
func fr(cmd Command, body string, kv ...string) *Frame {
	f := &Frame{Command: cmd, Body: []byte(body)}
	for i := 0; i+1 < len(kv); i += 2 {
		f.Add(kv[i], kv[i+1])
	}
	return f
}

func framesEqual(a, b *Frame) bool {
	return a.Command == b.Command && slices.Equal(a.Headers, b.Headers) && bytes.Equal(a.Body, b.Body)
}

// sentinels lists every error ReadFrame may return, for errKind.
var sentinels = []error{
	ErrHeaderLineTooLong, ErrTooManyHeaders, ErrHeaderSectionTooLarge, ErrBodyTooLarge,
	ErrBadContentLength, ErrMissingNUL, ErrMalformedHeader, ErrBadEscape, ErrBareCR,
	ErrUnknownCommand, io.ErrUnexpectedEOF, io.EOF,
}

// errKind names the sentinel err wraps, plus the ProtocolError fields that must not depend
// on how the input was split.
func errKind(err error) string {
	if err == nil {
		return "<nil>"
	}
	kind := "other: " + err.Error()
	for _, s := range sentinels {
		if errors.Is(err, s) {
			kind = s.Error()
			break
		}
	}
	if pe, ok := IsProtocolError(err); ok {
		kind += fmt.Sprintf(" (fatal=%v receipt-id=%q detail=%q)", pe.Fatal, pe.ReceiptID, pe.Detail)
	}
	return kind
}

// outcome is everything a parser returned for one stream: the frames (cloned) and the error
// that ended it.
type outcome struct {
	frames []*Frame
	err    error
}

func (o outcome) String() string {
	var b strings.Builder
	for _, f := range o.frames {
		b.WriteString(f.String())
		b.WriteString("; ")
	}
	b.WriteString("err=")
	b.WriteString(errKind(o.err))
	return b.String()
}

func (o outcome) equal(x outcome) bool {
	return slices.EqualFunc(o.frames, x.frames, framesEqual) && errKind(o.err) == errKind(x.err)
}

// maxFramesPerStream bounds parseAll so that a bug cannot loop forever.
const maxFramesPerStream = 1 << 16

// parseAll reads frames from r until an error.
func parseAll(tb testing.TB, r io.Reader, v Version, lim Limits) outcome {
	tb.Helper()
	p := NewParser(r, lim)
	p.SetVersion(v)
	var o outcome
	for range maxFramesPerStream {
		f, err := p.ReadFrame()
		if limit := max(minBufBytes, p.maxFrame); len(p.buf) > limit {
			tb.Fatalf("buffer grew to %d bytes, above the %d the limits allow", len(p.buf), limit)
		}
		if err != nil {
			o.err = err
			return o
		}
		o.frames = append(o.frames, f.Clone())
	}
	tb.Fatalf("more than %d frames", maxFramesPerStream)
	return o
}

// chunkReader returns its chunks one per Read (splitting a chunk only when p is short).
type chunkReader struct{ chunks [][]byte }

func (c *chunkReader) Read(p []byte) (int, error) {
	for len(c.chunks) > 0 && len(c.chunks[0]) == 0 {
		c.chunks = c.chunks[1:]
	}
	if len(c.chunks) == 0 {
		return 0, io.EOF
	}
	n := copy(p, c.chunks[0])
	c.chunks[0] = c.chunks[0][n:]
	return n, nil
}

// splitReader returns a reader that delivers in in pieces cut at the given offsets.
func splitReader(in []byte, cuts ...int) io.Reader {
	var chunks [][]byte
	prev := 0
	for _, c := range cuts {
		c = min(max(c, prev), len(in))
		chunks = append(chunks, bytes.Clone(in[prev:c]))
		prev = c
	}
	chunks = append(chunks, bytes.Clone(in[prev:]))
	return &chunkReader{chunks: chunks}
}

// readerModes are the ways every codec table case is fed to the parser besides one shot
// and the splits at every offset.
var readerModes = []struct {
	name string
	wrap func([]byte) io.Reader
}{
	{"OneByteReader", func(b []byte) io.Reader { return iotest.OneByteReader(bytes.NewReader(b)) }},
	{"HalfReader", func(b []byte) io.Reader { return iotest.HalfReader(bytes.NewReader(b)) }},
	{"DataErrReader", func(b []byte) io.Reader { return iotest.DataErrReader(bytes.NewReader(b)) }},
	{"DataErrReader(OneByteReader)", func(b []byte) io.Reader {
		return iotest.DataErrReader(iotest.OneByteReader(bytes.NewReader(b)))
	}},
}

// requireSameForAllReaders parses in one shot, through every reader mode and split at every
// byte offset into two reads, and fails unless every result matches the one-shot result,
// which it returns.
func requireSameForAllReaders(t *testing.T, in []byte, v Version, lim Limits) outcome {
	t.Helper()
	want := parseAll(t, bytes.NewReader(in), v, lim)
	for _, m := range readerModes {
		if got := parseAll(t, m.wrap(in), v, lim); !got.equal(want) {
			t.Fatalf("%s:\n got %v\nwant %v", m.name, got, want)
		}
	}
	for i := 0; i <= len(in); i++ {
		if got := parseAll(t, splitReader(in, i), v, lim); !got.equal(want) {
			t.Fatalf("split at %d (%q | %q):\n got %v\nwant %v", i, in[:i], in[i:], got, want)
		}
	}
	return want
}

// repeatReader returns data over and over, filling every Read completely.
type repeatReader struct {
	data []byte
	off  int
}

func (r *repeatReader) Read(p []byte) (int, error) {
	n := 0
	for n < len(p) {
		c := copy(p[n:], r.data[r.off:])
		n += c
		r.off = (r.off + c) % len(r.data)
	}
	return n, nil
}
