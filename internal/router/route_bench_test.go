package router

import (
	"syscall"
	"testing"
	"time"

	"github.com/titan-broker/titan/internal/delivery"
	"github.com/titan-broker/titan/internal/dest"
	"github.com/titan-broker/titan/internal/frame"
	"github.com/titan-broker/titan/internal/message"
)

// nullPattern takes every publication and subscription and keeps nothing, so that a
// benchmark measures the router alone.
type nullPattern struct{}

func (nullPattern) Publish(dest.Identity, *message.Message, <-chan struct{}) (bool, error) {
	return false, nil
}
func (nullPattern) Subscribe(*delivery.Subscription) error { return nil }

// BenchmarkRouteSend measures one SEND through Router.Handle — resolver, the route's
// segments, Final — to a pattern port that keeps nothing, without a store: the router's own
// cost per SEND (message build included), for events and queues, with and without a
// receipt. cpu-ns/op is the process's CPU time per SEND.
func BenchmarkRouteSend(b *testing.B) {
	for _, tc := range []struct{ name, dest, receipt string }{
		{"topic", "/topic/a", ""}, {"queue", "/queue/a", ""}, {"queue-receipt", "/queue/a", "r"},
	} {
		b.Run(tc.name, func(b *testing.B) {
			r := New(Ports{Deliveries: &delivery.Registry{}, Events: nullPattern{}, Queues: nullPattern{}}, Options{})
			c := r.Open(&nullClient{})
			f := &frame.Frame{Command: frame.CmdSend, Body: []byte("body"), Headers: []frame.Header{{Key: frame.HdrDestination, Value: tc.dest}}}
			if tc.receipt != "" {
				f.Headers = append(f.Headers, frame.Header{Key: frame.HdrReceipt, Value: tc.receipt})
			}
			b.ReportAllocs()
			start := cpuTime()
			for b.Loop() {
				r.Handle(c, f)
			}
			b.ReportMetric(float64(cpuTime()-start)/float64(b.N), "cpu-ns/op")
		})
	}
}

// cpuTime is the CPU time the process used so far (user and system): on a loaded machine a
// benchmark's CPU time per op varies far less than its wall time.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// nullClient is a Client that discards what the router writes.
type nullClient struct{}

func (nullClient) Version() frame.Version { return frame.V12 }
func (nullClient) WriteMessage(p *frame.Buf, _ []byte) bool {
	frame.PutBuf(p)
	return true
}
func (nullClient) QueuedBytes() int64 { return 0 }
func (nullClient) WriteEvent(p *frame.Buf, _ []byte, _ bool) (bool, <-chan struct{}) {
	frame.PutBuf(p)
	return true, nil
}
func (nullClient) ID() string                   { return "bench" }
func (nullClient) WriteFrame(*frame.Frame) bool { return true }
func (nullClient) Fail(*frame.ProtocolError)    {}
func (nullClient) Disconnect()                  {}
func (nullClient) Done() <-chan struct{}        { return nil }
