package message

import (
	"bytes"
	"io"
	"testing"

	"github.com/titan-broker/titan/internal/frame"
)

// TestMessageFrameEnding checks that a MESSAGE made of AppendPrefix and Shared, the split the
// dispatcher writes with one writev, ends with frame.Terminator (NUL, LF) at every version,
// and that two of them back to back parse as two intact frames.
func TestMessageFrameEnding(t *testing.T) {
	m := &Message{
		ID: "titan-1", Group: "default", Destination: "/queue/a",
		Headers: []frame.Header{{Key: "content-type", Value: "application/octet-stream"}},
		Body:    []byte("a\x00b\nc\x00"),
	}
	for _, v := range []frame.Version{frame.V10, frame.V11, frame.V12} {
		tail, dropped := m.Shared(v)
		if dropped != 0 {
			t.Fatalf("%v: dropped %d headers", v, dropped)
		}
		if !bytes.HasSuffix(tail, []byte(frame.Terminator)) || bytes.HasSuffix(tail, []byte("\x00\n\n")) {
			t.Fatalf("%v: shared tail %q does not end with one NUL and one LF", v, tail)
		}
		var stream []byte
		for _, sub := range []string{"s1", "s2"} {
			stream = AppendPrefix(stream, &Delivery{Subscription: sub, AckID: "ack-" + sub}, v)
			stream = append(stream, tail...)
		}
		p := frame.NewParser(bytes.NewReader(stream), frame.Limits{})
		p.SetVersion(v)
		for _, sub := range []string{"s1", "s2"} {
			f, err := p.ReadFrame()
			if err != nil {
				t.Fatalf("%v: %v in %q", v, err, stream)
			}
			if f.Command != frame.CmdMessage || f.Value(frame.HdrSubscription) != sub || !bytes.Equal(f.Body, m.Body) {
				t.Fatalf("%v: got %v", v, f)
			}
		}
		if _, err := p.ReadFrame(); err != io.EOF {
			t.Fatalf("%v: after two frames: %v", v, err)
		}
	}
}

// The sequence header of a log delivery follows the other per-delivery headers and costs no
// allocation.
func TestAppendPrefixSequence(t *testing.T) {
	d := Delivery{Subscription: "s", Redelivered: true, Extra: []frame.Header{{Key: "delivery-count", Value: "2"}}, Sequence: 18446744073709551615}
	want := "MESSAGE\nsubscription:s\nredelivered:true\ndelivery-count:2\nsequence:18446744073709551615\n"
	for _, v := range []frame.Version{frame.V10, frame.V11, frame.V12} {
		if got := string(AppendPrefix(nil, &d, v)); got != want {
			t.Fatalf("%v: %q, want %q", v, got, want)
		}
	}
	buf := make([]byte, 0, 256)
	d = Delivery{Subscription: "s", Sequence: 123456789}
	if n := testing.AllocsPerRun(100, func() { buf = AppendPrefix(buf[:0], &d, frame.V12) }); n != 0 {
		t.Fatalf("%v allocations per prefix", n)
	}
}
