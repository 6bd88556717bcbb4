package router

import (
	"strings"
	"testing"

	"github.com/titan-broker/titan/internal/dest"
	"github.com/titan-broker/titan/internal/frame"
)

// BenchmarkControlStage measures the control-header stage on the frames it sees on every
// SEND and SUBSCRIBE: typical application headers, none of them a peer's control header
// (the common case), and a SUBSCRIBE that carries two control headers it accepts.
func BenchmarkControlStage(b *testing.B) {
	cases := []struct {
		name string
		f    *frame.Frame
	}{
		{"send-plain", fr(frame.CmdSend, "", "destination", "/queue/a", "content-type", "application/json", "content-length", "12",
			"receipt", "r1", "persistent", "true", "priority", "4", "expires", "0", "correlation-id", "c", "x-trace", "abc", "delay", "0")},
		{"subscribe-control", fr(frame.CmdSubscribe, "", "destination", "/queue/a", "id", "1", "ack", "client-individual",
			"activemq.prefetchSize", "10", "durable", "true", "prefetch-count", "10")},
	}
	for _, tc := range cases {
		b.Run(tc.name, func(b *testing.B) {
			c := &Context{Frame: tc.f, Dest: dest.Destination{Pattern: dest.PatternQueues, Channel: "a"}}
			b.ReportAllocs()
			for b.Loop() {
				controlStage{}.Apply(c)
			}
			if c.Err != nil {
				b.Fatal(c.Err)
			}
		})
	}
}

// TestControlStageFindsEveryRow: the cheap first test lets every row of the table through
// to its check (a refused row's header is refused on a frame it applies to), and an
// application header that shares a row's first byte and length is left alone.
func TestControlStageFindsEveryRow(t *testing.T) {
	for _, h := range controlHeaders {
		if controlShapes[h.Name[0]]&(1<<len(h.Name)) == 0 {
			t.Errorf("%s does not pass the first test", h.Name)
		}
		cmd := frame.CmdSend
		if h.use&onSend == 0 {
			cmd = frame.CmdSubscribe
		}
		c := &Context{Frame: fr(cmd, "", "destination", "/queue/a", h.Name, "not a value"), Dest: dest.Destination{Pattern: dest.PatternQueues, Channel: "a"}}
		controlStage{}.Apply(c)
		if c.Err == nil || !strings.HasSuffix(c.Err.Reason, " "+h.Name) {
			t.Errorf("%s: not checked (err %v)", h.Name, c.Err)
		}
	}
	// "x-trace-id-x" has x-max-length's first byte and length; "persistenx" persistent's.
	c := &Context{Frame: fr(frame.CmdSend, "", "destination", "/topic/a", "x-trace-id-x", "1", "persistenx", "q"), Dest: dest.Destination{Pattern: dest.PatternEvents, Channel: "a"}}
	controlStage{}.Apply(c)
	if c.Err != nil {
		t.Fatalf("application headers refused: %v", c.Err)
	}
}
