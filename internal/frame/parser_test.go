package frame

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"testing/iotest"
)

type parseCase struct {
	name    string
	in      string
	version Version // 0 means V12
	lim     Limits  // zero means DefaultLimits
	want    []*Frame
	err     error  // what ends the stream: io.EOF unless set
	receipt string // ReceiptID expected when err is a protocol error
}

// tinyLimits make every limit reachable with short inputs.
var tinyLimits = Limits{MaxHeaderLineBytes: 16, MaxHeaders: 2, MaxHeaderBytes: 48, MaxBodyBytes: 8}

func parseCases() []parseCase {
	cases := []parseCase{
		// Connection frames (STOMP 1.2, "CONNECT or STOMP Frame").
		{
			name: "CONNECT",
			in:   "CONNECT\naccept-version:1.2\nhost:stomp.github.org\n\n\x00\n",
			want: []*Frame{fr(CmdConnect, "", "accept-version", "1.2", "host", "stomp.github.org")},
		},
		{
			name: "STOMP",
			in:   "STOMP\naccept-version:1.0,1.1,1.2\nhost:/\nlogin:guest\npasscode:guest\n\n\x00",
			want: []*Frame{fr(CmdStomp, "", "accept-version", "1.0,1.1,1.2", "host", "/", "login", "guest", "passcode", "guest")},
		},
		{
			name: "CONNECTED",
			in:   "CONNECTED\nversion:1.2\nheart-beat:0,0\nserver:titan/1\n\n\x00",
			want: []*Frame{fr(CmdConnected, "", "version", "1.2", "heart-beat", "0,0", "server", "titan/1")},
		},

		// Heart-beats and line endings (STOMP 1.2, "Heart-beating", "Augmented BNF").
		{
			name: "heart-beats before the first frame",
			in:   "\n\r\n\n\r\nSEND\ndestination:/q\n\nhi\x00",
			want: []*Frame{fr(CmdSend, "hi", "destination", "/q")},
		},
		{
			name: "heart-beats between and after frames",
			in:   "SEND\ndestination:/q\n\na\x00\n\r\n\nSEND\ndestination:/q\n\nb\x00\r\n\n",
			want: []*Frame{fr(CmdSend, "a", "destination", "/q"), fr(CmdSend, "b", "destination", "/q")},
		},
		{name: "only heart-beats", in: "\n\n\r\n\n"},
		{name: "empty stream", in: ""},
		{
			name: "CRLF line endings",
			in:   "SEND\r\ndestination:/q\r\ncontent-type:text/plain\r\n\r\nhello\x00\r\n",
			want: []*Frame{fr(CmdSend, "hello", "destination", "/q", "content-type", "text/plain")},
		},
		{
			name: "mixed line endings",
			in:   "SEND\ndestination:/q\r\n\nx\x00",
			want: []*Frame{fr(CmdSend, "x", "destination", "/q")},
		},
		{
			name: "trailing CR at end of stream",
			in:   "SEND\n\n\x00\r",
			want: []*Frame{fr(CmdSend, "")},
		},

		// Escaping (STOMP 1.2, "Value Encoding").
		{
			name: "1.2 unescapes \\r \\n \\c \\\\ in names and values",
			in:   "SEND\nk\\c\\n\\r\\\\:a\\rb\\nc\\cd\\\\e\n\n\x00",
			want: []*Frame{fr(CmdSend, "", "k:\n\r\\", "a\rb\nc:d\\e")},
		},
		{
			name:    "1.1 unescapes \\n \\c \\\\",
			in:      "SEND\nk\\c:a\\nb\\cc\\\\d\n\n\x00",
			version: V11,
			want:    []*Frame{fr(CmdSend, "", "k:", "a\nb:c\\d")},
		},
		{
			name:    "1.1 has no \\r escape",
			in:      "SEND\nreceipt:r-11\nk:a\\rb\n\n\x00",
			version: V11,
			err:     ErrBadEscape,
			receipt: "r-11",
		},
		{
			name:    "1.0 does not unescape",
			in:      "SEND\nk\\c:a\\nb\\q\\\n\n\x00",
			version: V10,
			want:    []*Frame{fr(CmdSend, "", "k\\c", "a\\nb\\q\\")},
		},
		{
			name: "raw colon in a 1.2 value is kept",
			in:   "SEND\nk:a:b\n\n\x00",
			want: []*Frame{fr(CmdSend, "", "k", "a:b")},
		},
		{
			name: "CONNECT is never unescaped",
			in:   "CONNECT\nlogin:a\\cb\\n\npasscode:x\\qy\n\n\x00",
			want: []*Frame{fr(CmdConnect, "", "login", "a\\cb\\n", "passcode", "x\\qy")},
		},
		{
			name: "STOMP is never unescaped",
			in:   "STOMP\nlogin:a\\cb\\\\\n\n\x00",
			want: []*Frame{fr(CmdStomp, "", "login", "a\\cb\\\\")},
		},
		{
			name: "CONNECTED is never unescaped",
			in:   "CONNECTED\nserver:a\\c\\tb\n\n\x00",
			want: []*Frame{fr(CmdConnected, "", "server", "a\\c\\tb")},
		},
		{
			name: "undefined escape",
			in:   "SEND\nreceipt:r1\nk:a\\tb\n\n\x00",
			err:  ErrBadEscape, receipt: "r1",
		},
		{
			name: "undefined escape in a name",
			in:   "SEND\nk\\x:v\n\n\x00",
			err:  ErrBadEscape,
		},
		{
			name: "trailing backslash",
			in:   "SEND\nk:ab\\\n\n\x00",
			err:  ErrBadEscape,
		},
		{
			name: "receipt-id is decoded when the receipt comes before the bad escape",
			in:   "SEND\nreceipt:a\\cb\\\\c\nk:\\t\n\n\x00",
			err:  ErrBadEscape, receipt: "a:b\\c",
		},
		{
			name: "receipt-id is decoded when the receipt comes after the bad escape",
			in:   "SEND\nk:\\t\nreceipt:a\\cb\\\\c\n\n\x00",
			err:  ErrBadEscape, receipt: "a:b\\c",
		},
		{
			name: "receipt-id is raw when the receipt itself is badly escaped",
			in:   "SEND\nreceipt:a\\tb\n\n\x00",
			err:  ErrBadEscape, receipt: "a\\tb",
		},
		{
			name: "receipt-id comes from the first receipt header",
			in:   "SEND\nreceipt:one\nreceipt:two\ncontent-length:x\n\n\x00",
			err:  ErrBadContentLength, receipt: "one",
		},

		// Repeated headers (STOMP 1.2, "Repeated Header Entries").
		{
			name: "repeated headers are all kept in order",
			in:   "MESSAGE\nfoo:World\nfoo:Hello\n\n\x00",
			want: []*Frame{fr(CmdMessage, "", "foo", "World", "foo", "Hello")},
		},

		// Bodies.
		{
			name: "content-length body with NULs",
			in:   "SEND\ndestination:/q\ncontent-length:5\n\na\x00b\x00c\x00\n",
			want: []*Frame{fr(CmdSend, "a\x00b\x00c", "destination", "/q", "content-length", "5")},
		},
		{
			name: "content-length zero",
			in:   "SEND\ncontent-length:0\n\n\x00",
			want: []*Frame{fr(CmdSend, "", "content-length", "0")},
		},
		{
			name: "first content-length wins",
			in:   "SEND\ncontent-length:2\ncontent-length:9\n\nab\x00",
			want: []*Frame{fr(CmdSend, "ab", "content-length", "2", "content-length", "9")},
		},
		{
			name: "body ends at the first NUL without content-length",
			in:   "SEND\n\nabc\x00SEND\n\ndef\x00",
			want: []*Frame{fr(CmdSend, "abc"), fr(CmdSend, "def")},
		},
		{
			name: "body may hold CR and LF",
			in:   "SEND\n\na\rb\nc\r\n\x00",
			want: []*Frame{fr(CmdSend, "a\rb\nc\r\n")},
		},
		{
			name: "missing NUL after content-length body",
			in:   "SEND\nreceipt:r2\ncontent-length:3\n\nabcd\x00",
			err:  ErrMissingNUL, receipt: "r2",
		},
		{name: "negative content-length", in: "SEND\ncontent-length:-1\n\n\x00", err: ErrBadContentLength},
		{name: "non-decimal content-length", in: "SEND\ncontent-length:0x10\n\n\x00", err: ErrBadContentLength},
		{name: "empty content-length", in: "SEND\ncontent-length:\n\n\x00", err: ErrBadContentLength},
		{name: "padded content-length", in: "SEND\ncontent-length: 1\n\na\x00", err: ErrBadContentLength},
		{name: "huge content-length", in: "SEND\ncontent-length:9999999999999999999\n\n\x00", err: ErrBadContentLength},

		// Malformed frames.
		{name: "header without colon", in: "SEND\nreceipt:r\nnocolon\n\n\x00", err: ErrMalformedHeader},
		{name: "header with empty name", in: "SEND\n:value\n\n\x00", err: ErrMalformedHeader},
		{name: "bare CR in a header", in: "SEND\nk:a\rb\n\n\x00", err: ErrBareCR},
		{name: "bare CR in the command", in: "SE\rND\n\n\x00", err: ErrBareCR},
		{name: "CR CR LF", in: "SEND\r\r\n\n\x00", err: ErrBareCR},
		{name: "bare CR between frames", in: "SEND\n\n\x00\rSEND\n\n\x00", want: []*Frame{fr(CmdSend, "")}, err: ErrBareCR},
		{name: "bare CR before the first frame", in: "\n\rX", err: ErrBareCR},
		{name: "NUL inside a header value", in: "SEND\nreceipt:r\ninj:x\x00ERROR\n\nbody\x00", err: ErrMalformedHeader, receipt: "r"},
		{name: "unknown command", in: "FOO\nreceipt:r\n\n\x00", err: ErrUnknownCommand, receipt: "r"},
		{name: "commands are case-sensitive", in: "send\n\n\x00", err: ErrUnknownCommand},
		{name: "command with trailing space", in: "SEND \n\n\x00", err: ErrUnknownCommand},
		{name: "NUL between frames", in: "SEND\n\n\x00\x00SEND\n\n\x00", want: []*Frame{fr(CmdSend, "")}, err: ErrUnknownCommand},
		{name: "unknown command rejected when the headers end, before any body", in: "GET / HTTP/1.1\r\nHost: x\r\n\r\n", err: ErrUnknownCommand},
		{name: "unknown command wins over a later limit", in: "FOO\nreceipt:r\nk:" + strings.Repeat("v", 40), lim: tinyLimits, err: ErrUnknownCommand, receipt: "r"},

		// End of stream.
		{name: "clean EOF after a frame", in: "SEND\n\n\x00", want: []*Frame{fr(CmdSend, "")}},
		{name: "EOF in the command", in: "SEN", err: io.ErrUnexpectedEOF},
		{name: "EOF in the headers", in: "SEND\ndestination:/q\n", err: io.ErrUnexpectedEOF},
		{name: "EOF in the body", in: "SEND\n\nabc", err: io.ErrUnexpectedEOF},
		{name: "EOF in a content-length body", in: "SEND\ncontent-length:3\n\nab", err: io.ErrUnexpectedEOF},
		{name: "EOF before the NUL of a content-length body", in: "SEND\ncontent-length:3\n\nabc", err: io.ErrUnexpectedEOF},
		{name: "EOF mid-frame after a frame", in: "SEND\n\n\x00\nSEND\n", want: []*Frame{fr(CmdSend, "")}, err: io.ErrUnexpectedEOF},

		// Limits. tinyLimits: line 16, 2 headers, 48 header bytes, body 8.
		{
			name: "header line at the limit",
			in:   "SEND\nk:" + strings.Repeat("v", 14) + "\r\n\n\x00",
			lim:  tinyLimits,
			want: []*Frame{fr(CmdSend, "", "k", strings.Repeat("v", 14))},
		},
		{
			name: "header line over the limit",
			in:   "SEND\nreceipt:r\nk:" + strings.Repeat("v", 15) + "\n\n\x00",
			lim:  tinyLimits, err: ErrHeaderLineTooLong, receipt: "r",
		},
		{
			name: "header line over the limit, CRLF",
			in:   "SEND\nk:" + strings.Repeat("v", 15) + "\r\n\n\x00",
			lim:  tinyLimits, err: ErrHeaderLineTooLong,
		},
		{
			name: "endless header line",
			in:   "SEND\nk:" + strings.Repeat("v", 40),
			lim:  tinyLimits, err: ErrHeaderLineTooLong,
		},
		{
			name: "command line over the limit",
			in:   strings.Repeat("S", 17) + "\n\n\x00",
			lim:  tinyLimits, err: ErrHeaderLineTooLong,
		},
		{
			name: "headers at the count limit",
			in:   "SEND\na:1\nb:2\n\n\x00",
			lim:  tinyLimits,
			want: []*Frame{fr(CmdSend, "", "a", "1", "b", "2")},
		},
		{
			name: "too many headers",
			in:   "SEND\nreceipt:r\na:1\nb:2\n\n\x00",
			lim:  tinyLimits, err: ErrTooManyHeaders, receipt: "r",
		},
		{
			// 5 + 16 + 16 + 10 + 1 = 48 bytes, blank line included.
			name: "header section at the limit",
			in:   "SEND\nk:aaaaaaaaaaaaa\nk:bbbbbbbbbbbbb\nk:ccccccc\n\n\x00",
			lim:  Limits{MaxHeaderLineBytes: 16, MaxHeaderBytes: 48},
			want: []*Frame{fr(CmdSend, "", "k", "aaaaaaaaaaaaa", "k", "bbbbbbbbbbbbb", "k", "ccccccc")},
		},
		{
			name: "header section over the limit",
			in:   "SEND\nk:aaaaaaaaaaaaa\nk:bbbbbbbbbbbbb\nk:ccccccc\r\n\n\x00",
			lim:  Limits{MaxHeaderLineBytes: 16, MaxHeaderBytes: 48},
			err:  ErrHeaderSectionTooLarge,
		},
		{
			name: "endless header section",
			in:   "SEND\n" + strings.Repeat("k:v\n", 20),
			lim:  Limits{MaxHeaderLineBytes: 16, MaxHeaderBytes: 48},
			err:  ErrHeaderSectionTooLarge,
		},
		{
			// The line limit is crossed at byte 5+18 of the frame, the section limit at 48:
			// however the line arrives, the line limit is reported.
			name: "line limit crossed before section limit",
			in:   "SEND\n" + strings.Repeat("x", 60) + "\n\n\x00",
			lim:  Limits{MaxHeaderLineBytes: 16, MaxHeaderBytes: 48},
			err:  ErrHeaderLineTooLong,
		},
		{
			// The section limit is crossed at byte 48, the line limit of the last line at
			// 5+16+16+18 = 55: the section limit is reported.
			name: "section limit crossed before line limit",
			in:   "SEND\nk:aaaaaaaaaaaaa\nk:bbbbbbbbbbbbb\nk:cccccccccccccc" + strings.Repeat("c", 40) + "\n\n\x00",
			lim:  Limits{MaxHeaderLineBytes: 16, MaxHeaderBytes: 48},
			err:  ErrHeaderSectionTooLarge,
		},
		{
			name: "long bare-CR line is too long, not a bare CR",
			in:   "SEND\nk:\rv" + strings.Repeat("v", 20) + "\n\n\x00",
			lim:  tinyLimits, err: ErrHeaderLineTooLong,
		},
		{
			name: "content-length body at the limit",
			in:   "SEND\ncontent-length:8\n\n12345678\x00",
			lim:  tinyLimits,
			want: []*Frame{fr(CmdSend, "12345678", "content-length", "8")},
		},
		{
			name: "content-length over the body limit",
			in:   "SEND\nreceipt:r3\ncontent-length:9\n\n123456789\x00",
			lim:  tinyLimits, err: ErrBodyTooLarge, receipt: "r3",
		},
		{
			name: "NUL-terminated body at the limit",
			in:   "SEND\n\n12345678\x00",
			lim:  tinyLimits,
			want: []*Frame{fr(CmdSend, "12345678")},
		},
		{
			name: "NUL-terminated body over the limit",
			in:   "SEND\nreceipt:r4\n\n123456789\x00",
			lim:  tinyLimits, err: ErrBodyTooLarge, receipt: "r4",
		},
		{
			name: "endless body",
			in:   "SEND\nreceipt:r5\n\n" + strings.Repeat("b", 100),
			lim:  tinyLimits, err: ErrBodyTooLarge, receipt: "r5",
		},
	}

	// Every command, with and without headers and body.
	for c := CmdConnect; c < numCommands; c++ {
		cases = append(cases,
			parseCase{name: "command " + c.String(), in: c.String() + "\n\n\x00", want: []*Frame{fr(c, "")}},
			parseCase{
				name: "command " + c.String() + " with headers and body",
				in:   c.String() + "\r\nid:0\r\n\r\nbody\x00",
				want: []*Frame{fr(c, "body", "id", "0")},
			},
		)
	}
	return cases
}

func TestParse(t *testing.T) {
	for _, c := range parseCases() {
		t.Run(c.name, func(t *testing.T) {
			v := c.version
			if v == 0 {
				v = V12
			}
			got := requireSameForAllReaders(t, []byte(c.in), v, c.lim)
			want := outcome{frames: c.want, err: c.err}
			if want.err == nil {
				want.err = io.EOF
			}
			if len(got.frames) != len(want.frames) {
				t.Fatalf("got %v\nwant %v", got, want)
			}
			for i := range got.frames {
				if !framesEqual(got.frames[i], want.frames[i]) {
					t.Fatalf("frame %d: got %v, want %v", i, got.frames[i], want.frames[i])
				}
			}
			requireErrorIs(t, got.err, want.err)
			if errors.Is(want.err, io.EOF) || errors.Is(want.err, io.ErrUnexpectedEOF) {
				requireEqual(t, got.err, want.err) // returned as is, not wrapped
				return
			}
			pe, ok := IsProtocolError(got.err)
			if !ok {
				t.Fatalf("%T %v is not a *ProtocolError", got.err, got.err)
			}
			requireEqual(t, pe.Fatal, true)
			requireEqual(t, pe.ReceiptID, c.receipt)
			requireEqual(t, pe.Err, want.err)
			if pe.Reason == "" || strings.HasPrefix(pe.Reason, "frame: ") {
				t.Fatalf("Reason %q: want the sentinel's text without the package prefix", pe.Reason)
			}
		})
	}
}

func TestParseSetVersionBetweenFrames(t *testing.T) {
	in := "CONNECT\naccept-version:1.0\n\n\x00SEND\nk:a\\nb\n\n\x00SEND\nk:a\\nb\n\n\x00"
	p := NewParser(strings.NewReader(in), Limits{})
	f, err := p.ReadFrame()
	requireNoError(t, err)
	requireEqual(t, f.Command, CmdConnect)
	p.SetVersion(V10)
	f, err = p.ReadFrame()
	requireNoError(t, err)
	requireEqual(t, f.Value("k"), `a\nb`)
	p.SetVersion(V12)
	f, err = p.ReadFrame()
	requireNoError(t, err)
	requireEqual(t, f.Value("k"), "a\nb")
}

func TestFrameGetFirstWins(t *testing.T) {
	p := NewParser(strings.NewReader("MESSAGE\nfoo:World\nfoo:Hello\n\n\x00"), Limits{})
	f, err := p.ReadFrame()
	requireNoError(t, err)
	v, ok := f.Get("foo")
	requireEqual(t, ok, true)
	requireEqual(t, v, "World")
	_, ok = f.Get("bar")
	requireEqual(t, ok, false)
	requireEqual(t, f.Value("bar"), "")
}

func TestParseReadErrorAfterBufferedFrames(t *testing.T) {
	boom := errors.New("boom")
	r := io.MultiReader(strings.NewReader("SEND\n\na\x00SEND\n\nb\x00SEND\n"), iotest.ErrReader(boom))
	p := NewParser(r, Limits{})
	for _, body := range []string{"a", "b"} {
		f, err := p.ReadFrame()
		requireNoError(t, err)
		requireEqual(t, string(f.Body), body)
	}
	_, err := p.ReadFrame()
	requireEqual(t, err, boom)
	_, err = p.ReadFrame()
	requireEqual(t, err, boom) // sticky
}

func TestParseNoProgress(t *testing.T) {
	p := NewParser(zeroReader{}, Limits{})
	_, err := p.ReadFrame()
	requireEqual(t, err, io.ErrNoProgress)
}

type zeroReader struct{}

func (zeroReader) Read([]byte) (int, error) { return 0, nil }

// TestParseFrameLifetime checks that a frame's strings hold until the next ReadFrame, and
// that a clone survives any number of later reads that reuse the buffer.
func TestParseFrameLifetime(t *testing.T) {
	var in bytes.Buffer
	in.WriteString("SEND\ndestination:/queue/a\\cb\nreceipt:77\n\nfirst\x00")
	for i := range 200 {
		in.WriteString("SEND\ndestination:/queue/zzzzzzzz\nreceipt:" + strings.Repeat("9", i%20) + "\n\n")
		in.WriteString(strings.Repeat("x", 50+i) + "\x00")
	}
	p := NewParser(iotest.HalfReader(bytes.NewReader(in.Bytes())), Limits{})
	f, err := p.ReadFrame()
	requireNoError(t, err)
	want := fr(CmdSend, "first", "destination", "/queue/a:b", "receipt", "77")
	if !framesEqual(f, want) {
		t.Fatalf("got %v, want %v", f, want)
	}
	dest, body := f.Value(HdrDestination), f.Body
	c := f.Clone()
	// Still valid: nothing was read since.
	requireEqual(t, dest, "/queue/a:b")
	requireEqual(t, string(body), "first")
	n := 0
	for {
		g, err := p.ReadFrame()
		if err == io.EOF {
			break
		}
		requireNoError(t, err)
		requireEqual(t, len(g.Body), 50+n)
		n++
	}
	requireEqual(t, n, 200)
	if !framesEqual(c, want) {
		t.Fatalf("clone changed after later reads: got %v, want %v", c, want)
	}
}

func TestParseBufferGrowsAndShrinks(t *testing.T) {
	small := []byte("SEND\ndestination:/q\n\nsmall\x00")
	bigBody := bytes.Repeat([]byte("B"), 1<<20)
	big := append([]byte("SEND\ndestination:/q\ncontent-length:1048576\n\n"), bigBody...)
	big = append(big, 0)
	nul := append([]byte("SEND\ndestination:/q\n\n"), bigBody...)
	nul = append(nul, 0)

	r := &chunkReader{chunks: [][]byte{small, big, small, nul, small}}
	p := NewParser(r, Limits{})
	requireEqual(t, len(p.buf), minBufBytes)

	f, err := p.ReadFrame()
	requireNoError(t, err)
	requireEqual(t, string(f.Body), "small")

	for _, name := range []string{"content-length", "NUL-terminated"} {
		f, err = p.ReadFrame()
		requireNoError(t, err)
		if !bytes.Equal(f.Body, bigBody) {
			t.Fatalf("%s: big body corrupted", name)
		}
		if len(p.buf) <= idleBufBytes {
			t.Fatalf("%s: buffer is %d bytes after a 1 MiB frame, want it grown", name, len(p.buf))
		}
		f, err = p.ReadFrame()
		requireNoError(t, err)
		requireEqual(t, string(f.Body), "small")
		requireEqual(t, len(p.buf), minBufBytes)
	}
	_, err = p.ReadFrame()
	requireEqual(t, err, io.EOF)
}

func TestParseBufferBoundedByLimits(t *testing.T) {
	lim := Limits{MaxHeaderBytes: 1 << 10, MaxBodyBytes: 64 << 10}
	maxFrame := lim.MaxHeaderBytes + lim.MaxBodyBytes + 1
	for _, in := range []string{
		"SEND\n\n" + strings.Repeat("b", 64<<10) + "\x00",
		"SEND\n\n" + strings.Repeat("b", 200<<10),
		"SEND\ncontent-length:65536\n\n" + strings.Repeat("b", 64<<10) + "\x00",
		"SEND\n" + strings.Repeat("k:v\n", 1000),
	} {
		p := NewParser(iotest.HalfReader(strings.NewReader(in)), lim)
		for {
			if _, err := p.ReadFrame(); err != nil {
				break
			}
		}
		if len(p.buf) > maxFrame {
			t.Fatalf("%.20q...: buffer grew to %d bytes, limits allow a %d-byte frame", in, len(p.buf), maxFrame)
		}
	}
}

func TestDefaultLimits(t *testing.T) {
	p := NewParser(strings.NewReader(""), Limits{MaxHeaders: 3})
	requireEqual(t, p.lim, Limits{
		MaxHeaderLineBytes: DefaultMaxHeaderLineBytes,
		MaxHeaders:         3,
		MaxHeaderBytes:     DefaultMaxHeaderBytes,
		MaxBodyBytes:       DefaultMaxBodyBytes,
	})
}

func TestCommand(t *testing.T) {
	for c := CmdConnect; c < numCommands; c++ {
		requireEqual(t, parseCommand([]byte(c.String())), c)
		requireEqual(t, c.IsClient(), c <= CmdDisconnect)
	}
	requireEqual(t, CmdUnknown.String(), "UNKNOWN")
	requireEqual(t, Command(200).String(), "UNKNOWN")
	requireEqual(t, CmdUnknown.IsClient(), false)
}

func TestParseVersion(t *testing.T) {
	for _, v := range []Version{V10, V11, V12} {
		got, ok := ParseVersion(v.String())
		requireEqual(t, ok, true)
		requireEqual(t, got, v)
	}
	_, ok := ParseVersion("2.0")
	requireEqual(t, ok, false)
}

func TestFrameHeaderEditing(t *testing.T) {
	f := fr(CmdSend, "", "a", "1", "b", "2", "a", "3")
	f.Set("a", "x")
	if !framesEqual(f, fr(CmdSend, "", "a", "x", "b", "2")) {
		t.Fatalf("Set: %v", f)
	}
	f.Set("c", "y")
	f.Add("b", "4")
	f.Del("b")
	if !framesEqual(f, fr(CmdSend, "", "a", "x", "c", "y")) {
		t.Fatalf("Del: %v", f)
	}
	n, ok, err := fr(CmdSend, "", "content-length", "12").ContentLength()
	requireNoError(t, err)
	requireEqual(t, ok, true)
	requireEqual(t, n, 12)
	_, ok, err = fr(CmdSend, "").ContentLength()
	requireNoError(t, err)
	requireEqual(t, ok, false)
	_, _, err = fr(CmdSend, "", "content-length", "x").ContentLength()
	requireErrorIs(t, err, ErrBadContentLength)
}

func TestFrameClone(t *testing.T) {
	for _, f := range []*Frame{
		fr(CmdSend, "body", "k", "v", "k2", ""),
		fr(CmdSend, ""),
		{Command: CmdAck, Headers: []Header{{"", ""}}},
		{Command: CmdAck},
	} {
		c := f.Clone()
		if !framesEqual(c, f) || (c.Body == nil) != (f.Body == nil) {
			t.Fatalf("Clone(%v) = %v", f, c)
		}
	}
}

func TestProtocolError(t *testing.T) {
	pe := protoErr(ErrBadEscape, "r1", "")
	requireEqual(t, pe.Error(), "undefined escape sequence")
	requireEqual(t, pe.ReceiptID, "r1")
	pe.Detail = `"\t" in header "k"`
	requireEqual(t, pe.Error(), `undefined escape sequence: "\t" in header "k"`)

	wrapped := fmt.Errorf("session 7: %w", pe)
	got, ok := IsProtocolError(wrapped)
	requireEqual(t, ok, true)
	requireEqual(t, got, pe)
	requireErrorIs(t, wrapped, ErrBadEscape)
	_, ok = IsProtocolError(io.EOF)
	requireEqual(t, ok, false)
}
