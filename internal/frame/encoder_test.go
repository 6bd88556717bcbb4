package frame

import (
	"bytes"
	"io"
	"strings"
	"testing"
)

func TestAppendHeader(t *testing.T) {
	for _, c := range []struct {
		name       string
		key, value string
		v          Version
		raw        bool
		want       string // "" means not representable
	}{
		{"1.2 plain", "destination", "/queue/a", V12, false, "destination:/queue/a\n"},
		{"1.2 all escapes", "k:\n\r\\", "a\rb\nc:d\\e", V12, false, `k\c\n\r\\:a\rb\nc\cd\\e` + "\n"},
		{"1.2 empty value", "k", "", V12, false, "k:\n"},
		{"1.1 escapes", "k:", "a\nb:c\\d", V11, false, `k\c:a\nb\cc\\d` + "\n"},
		{"1.1 CR in value", "k", "a\rb", V11, false, ""},
		{"1.1 CR in name", "k\r", "v", V11, false, ""},
		{"1.0 raw", "k\\", "a\\b:c", V10, false, "k\\:a\\b:c\n"},
		{"1.0 colon in name", "k:", "v", V10, false, ""},
		{"1.0 LF in value", "k", "a\nb", V10, false, ""},
		{"1.0 CR in value", "k", "a\rb", V10, false, ""},
		{"1.0 LF in name", "k\n", "v", V10, false, ""},
		{"raw keeps colon and backslash in value", "login", "a:b\\c", V12, true, "login:a:b\\c\n"},
		{"raw colon in name", "a:b", "v", V12, true, ""},
		{"raw LF in value", "k", "a\nb", V12, true, ""},
		{"raw CR in value", "k", "a\rb", V11, true, ""},
		{"empty name 1.2", "", "v", V12, false, ""},
		{"empty name 1.0", "", "v", V10, false, ""},
		{"empty name raw", "", "v", V12, true, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			requireEqual(t, Representable(c.key, c.value, c.v, c.raw), c.want != "")
			prefix := []byte("prefix|")
			out, ok := AppendHeader(bytes.Clone(prefix), c.key, c.value, c.v, c.raw)
			requireEqual(t, ok, c.want != "")
			requireEqual(t, string(out), string(prefix)+c.want)
		})
	}
}

func TestAppendContentLength(t *testing.T) {
	requireEqual(t, string(AppendContentLength([]byte("x\n"), 0)), "x\ncontent-length:0\n")
	requireEqual(t, string(AppendContentLength(nil, 1048576)), "content-length:1048576\n")
}

// TestAppendFrameGoldenMessage pins the wire form of a MESSAGE (STOMP 1.2, "MESSAGE").
func TestAppendFrameGoldenMessage(t *testing.T) {
	f := fr(CmdMessage, "hello queue a",
		"subscription", "0",
		"message-id", "007",
		"destination", "/queue/a",
		"content-type", "text/plain",
		"content-length", "13",
		"note", "a:b\\c\nd",
	)
	const golden = "MESSAGE\n" +
		"subscription:0\n" +
		"message-id:007\n" +
		"destination:/queue/a\n" +
		"content-type:text/plain\n" +
		"content-length:13\n" +
		"note:a\\cb\\\\c\\nd\n" +
		"\n" +
		"hello queue a\x00\n"
	out, dropped := AppendFrame(nil, f, V12)
	requireEqual(t, dropped, 0)
	requireEqual(t, string(out), golden)

	// The same frame built from the pieces a publisher shares between subscribers.
	var b []byte
	b = append(b, "MESSAGE\n"...)
	b, _ = AppendHeader(b, HdrSubscription, "0", V12, false)
	b, _ = AppendHeader(b, HdrMessageID, "007", V12, false)
	b, _ = AppendHeader(b, HdrDestination, "/queue/a", V12, false)
	b, _ = AppendHeader(b, HdrContentType, "text/plain", V12, false)
	b = AppendContentLength(b, 13)
	b, _ = AppendHeader(b, "note", "a:b\\c\nd", V12, false)
	b = append(b, '\n')
	b = AppendTerminator(append(b, "hello queue a"...))
	requireEqual(t, string(b), golden)
}

func TestAppendFrameConnectionFramesAreRaw(t *testing.T) {
	for _, cmd := range []Command{CmdConnect, CmdStomp, CmdConnected} {
		f := fr(cmd, "", "login", "a:b\\c", "bad", "x\ny")
		out, dropped := AppendFrame(nil, f, V12)
		requireEqual(t, dropped, 1)
		requireEqual(t, string(out), cmd.String()+"\nlogin:a:b\\c\n\n\x00\n")
	}
}

func TestAppendFrameDropsUnrepresentable(t *testing.T) {
	f := fr(CmdMessage, "x", "a", "1", "b", "line\nbreak", "c:d", "2", "e", "cr\r")
	for _, c := range []struct {
		v       Version
		want    string
		dropped int
	}{
		{V10, "MESSAGE\na:1\n\nx\x00\n", 3},
		{V11, "MESSAGE\na:1\nb:line\\nbreak\nc\\cd:2\n\nx\x00\n", 1},
		{V12, "MESSAGE\na:1\nb:line\\nbreak\nc\\cd:2\ne:cr\\r\n\nx\x00\n", 0},
	} {
		out, dropped := AppendFrame(nil, f, c.v)
		requireEqual(t, dropped, c.dropped)
		requireEqual(t, string(out), c.want)
	}
}

// roundTripFrames are encoded at every version and parsed back.
var roundTripFrames = []*Frame{
	fr(CmdSend, "hello", "destination", "/queue/a", "content-type", "text/plain"),
	fr(CmdSend, "a\x00b\x00", "destination", "/queue/a", "content-length", "4"),
	fr(CmdSend, ""),
	fr(CmdMessage, "body\r\n", "subscription", "0", "message-id", "m:1", "destination", "/topic/a\\b", "k:\n\r\\", "v\r\n:\\"),
	fr(CmdMessage, "", "foo", "World", "foo", "Hello"),
	fr(CmdConnect, "", "accept-version", "1.0,1.1,1.2", "host", "/", "login", "a:b\\c", "passcode", "p\nq"),
	fr(CmdStomp, "", "login", "\\n"),
	fr(CmdConnected, "", "version", "1.2", "session", "s:1\\", "server", "x\ry"),
	fr(CmdError, "oops\x00", "message", "bad: frame", "receipt-id", "r\\1", "content-length", "5"),
	fr(CmdAck, "", "id", "ack:1"),
	fr(CmdDisconnect, "", "receipt", "77"),
}

func TestRoundTripEncodeParse(t *testing.T) {
	for _, v := range []Version{V10, V11, V12} {
		for _, f := range roundTripFrames {
			raw := f.Command == CmdConnect || f.Command == CmdStomp || f.Command == CmdConnected
			want := &Frame{Command: f.Command, Body: f.Body}
			for _, h := range f.Headers {
				if Representable(h.Key, h.Value, v, raw) {
					want.Add(h.Key, h.Value)
				}
			}
			wire, dropped := AppendFrame(nil, f, v)
			requireEqual(t, dropped, len(f.Headers)-len(want.Headers))

			p := NewParser(bytes.NewReader(wire), Limits{})
			p.SetVersion(v)
			got, err := p.ReadFrame()
			requireNoError(t, err)
			if !framesEqual(got, want) {
				t.Fatalf("%v: parse(encode(%v)) = %v, want %v", v, f, got, want)
			}
			again, _ := AppendFrame(nil, got, v)
			if !bytes.Equal(again, wire) {
				t.Fatalf("%v: encode(parse(%q)) = %q", v, wire, again)
			}
			_, err = p.ReadFrame()
			requireEqual(t, err, io.EOF)
		}
	}
}

// TestRoundTripParseEncode checks that canonical wire frames (LF line endings, escapes only
// where needed) come back byte for byte.
func TestRoundTripParseEncode(t *testing.T) {
	for _, c := range []struct {
		v    Version
		wire string
	}{
		{V12, "SEND\ndestination:/queue/a\ncontent-type:text/plain\n\nhello queue a\x00\n"},
		{V12, "MESSAGE\nk\\c\\n:a\\r\\n\\c\\\\b\nk\\c\\n:second\n\n\x00\n"},
		{V12, "CONNECT\naccept-version:1.2\nhost:stomp.github.org\nlogin:a:b\\c\n\n\x00\n"},
		{V12, "ERROR\nmessage:bad\ncontent-length:3\n\na\x00b\x00\n"},
		{V11, "MESSAGE\nk\\c:a\\nb\\\\\n\n\x00\n"},
		{V10, "MESSAGE\nk\\c:a\\nb:c\n\n\x00\n"},
		{V10, "CONNECTED\nversion:1.0\n\n\x00\n"},
	} {
		p := NewParser(strings.NewReader(c.wire), Limits{})
		p.SetVersion(c.v)
		f, err := p.ReadFrame()
		requireNoError(t, err)
		out, dropped := AppendFrame(nil, f, c.v)
		requireEqual(t, dropped, 0)
		requireEqual(t, string(out), c.wire)
	}
}

func TestNoVersionRepresentsNUL(t *testing.T) {
	for _, v := range []Version{V10, V11, V12} {
		if Representable("k", "a\x00b", v, false) || Representable("k\x00", "v", v, false) || Representable("k", "a\x00", v, true) {
			t.Fatalf("version %s represents a NUL in a header", v)
		}
	}
}

// TestFramesEndWithNULLF pins the frame ending (Terminator): every encoded frame ends with
// NUL and exactly one LF, at every version, and frames written back to back parse one by one
// (the LF is skipped like a heart-beat). A parser that, like PHP's PECL stomp, reads the two
// octets after a content-length body and wants NUL LF accepts each of them.
func TestFramesEndWithNULLF(t *testing.T) {
	for _, v := range []Version{V10, V11, V12} {
		var stream []byte
		for _, f := range roundTripFrames {
			start := len(stream)
			stream, _ = AppendFrame(stream, f, v)
			wire := stream[start:]
			if !bytes.HasSuffix(wire, []byte(Terminator)) || bytes.HasSuffix(wire, []byte("\x00\n\n")) {
				t.Fatalf("%v: %q does not end with one NUL and one LF", v, wire)
			}
			if cl := f.Value(HdrContentLength); cl != "" {
				end := len(wire) - len(Terminator)
				requireEqual(t, string(wire[end-len(f.Body):end]), string(f.Body))
			}
		}
		p := NewParser(bytes.NewReader(stream), Limits{})
		p.SetVersion(v)
		for range roundTripFrames {
			_, err := p.ReadFrame()
			requireNoError(t, err)
		}
		_, err := p.ReadFrame()
		requireEqual(t, err, io.EOF)
	}
}
