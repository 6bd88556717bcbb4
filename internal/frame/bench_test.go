package frame

import (
	"strconv"
	"strings"
	"testing"
)

var benchSizes = []struct {
	name      string
	bodyBytes int
}{
	{"body=100B", 100},
	{"body=4KiB", 4 << 10},
}

func benchSend(bodyBytes int) *Frame {
	return fr(CmdSend, strings.Repeat("x", bodyBytes),
		"destination", "/queue/orders",
		"content-type", "application/json",
		"content-length", strconv.Itoa(bodyBytes),
		"receipt", "r-1234",
		"persistent", "true",
	)
}

func reportMsgsPerSec(b *testing.B) {
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
}

// BenchmarkParse parses a steady stream of identical SEND frames from a reader that always
// fills the buffer, as a busy connection would.
func BenchmarkParse(b *testing.B) {
	for _, s := range benchSizes {
		b.Run(s.name, func(b *testing.B) {
			wire, _ := AppendFrame(nil, benchSend(s.bodyBytes), V12)
			p := NewParser(&repeatReader{data: wire}, Limits{})
			b.SetBytes(int64(len(wire)))
			b.ReportAllocs()
			for b.Loop() {
				f, err := p.ReadFrame()
				if err != nil || len(f.Body) != s.bodyBytes {
					b.Fatalf("ReadFrame: %v, %v", f, err)
				}
			}
			reportMsgsPerSec(b)
		})
	}
}

// BenchmarkEncode encodes a MESSAGE (the SEND's headers plus the per-subscriber ones) into a
// reused buffer.
func BenchmarkEncode(b *testing.B) {
	for _, s := range benchSizes {
		b.Run(s.name, func(b *testing.B) {
			f := benchSend(s.bodyBytes)
			f.Command = CmdMessage
			f.Add(HdrSubscription, "sub-0")
			f.Add(HdrMessageID, "titan:42:1234567")
			f.Add(HdrAck, "titan:42:1234567")
			buf, _ := AppendFrame(nil, f, V12)
			b.SetBytes(int64(len(buf)))
			b.ReportAllocs()
			for b.Loop() {
				buf, _ = AppendFrame(buf[:0], f, V12)
			}
			reportMsgsPerSec(b)
		})
	}
}
