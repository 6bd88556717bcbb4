package frame

import (
	"bytes"
	"io"
	"testing"
	"testing/iotest"
)

// fuzzLimits are small enough for fuzzed inputs to reach every limit.
var fuzzLimits = Limits{MaxHeaderLineBytes: 32, MaxHeaders: 4, MaxHeaderBytes: 96, MaxBodyBytes: 64}

// reparseLimits are large enough for any re-encoded fuzz frame (escaping a raw ':' in a 1.2
// value doubles it).
var reparseLimits = Limits{MaxHeaderLineBytes: 1 << 20, MaxHeaders: 1 << 20, MaxHeaderBytes: 1 << 24}

// FuzzParse parses arbitrary streams. Seeds are the STOMP 1.2 specification's examples and a
// few malformed frames in testdata/fuzz/FuzzParse. cut1 and cut2 choose where the stream is
// split into reads.
//
// Properties: the parser never panics; its buffer never outgrows one maximal frame under the
// limits (parseAll); the frames and error are the same in one read, two, three and one byte
// at a time, at every version and under default and tiny limits; and a parsed frame whose
// headers the version can represent survives AppendFrame and a second parse unchanged.
func FuzzParse(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte, cut1, cut2 uint16) {
		a, b := int(cut1)%(len(data)+1), int(cut2)%(len(data)+1)
		if a > b {
			a, b = b, a
		}
		for _, v := range []Version{V10, V11, V12} {
			for _, lim := range []Limits{{}, fuzzLimits} {
				one := parseAll(t, bytes.NewReader(data), v, lim)
				for name, r := range map[string]io.Reader{
					"two reads":   splitReader(data, a),
					"three reads": splitReader(data, a, b),
					"one byte":    iotest.OneByteReader(bytes.NewReader(data)),
				} {
					if got := parseAll(t, r, v, lim); !got.equal(one) {
						t.Fatalf("%v %+v %s (cuts %d, %d):\n got %v\nwant %v", v, lim, name, a, b, got, one)
					}
				}
				if lim == (Limits{}) {
					checkRoundTrip(t, one.frames, v)
				}
			}
		}
	})
}

// checkRoundTrip encodes each representable frame at v and parses it back.
func checkRoundTrip(t *testing.T, frames []*Frame, v Version) {
	t.Helper()
next:
	for _, f := range frames {
		raw := f.Command == CmdConnect || f.Command == CmdStomp || f.Command == CmdConnected
		for _, h := range f.Headers {
			if !Representable(h.Key, h.Value, v, raw) {
				continue next
			}
		}
		wire, dropped := AppendFrame(nil, f, v)
		requireEqual(t, dropped, 0)
		p := NewParser(bytes.NewReader(wire), reparseLimits)
		p.SetVersion(v)
		got, err := p.ReadFrame()
		if err != nil {
			t.Fatalf("%v: parse(encode(%v)) = %v\nwire %q", v, f, err, wire)
		}
		if !framesEqual(got, f) {
			t.Fatalf("%v: parse(encode(%v)) = %v\nwire %q", v, f, got, wire)
		}
		if _, err := p.ReadFrame(); err != io.EOF {
			t.Fatalf("%v: encode(%v) left %v after the frame\nwire %q", v, f, err, wire)
		}
	}
}
