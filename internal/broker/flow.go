package broker

import (
	"time"

	"github.com/titan-broker/titan/internal/config"
	"github.com/titan-broker/titan/internal/delivery"
	"github.com/titan-broker/titan/internal/dest"
	"github.com/titan-broker/titan/internal/flow"
	"github.com/titan-broker/titan/internal/message"
	"github.com/titan-broker/titan/internal/router"
	"github.com/titan-broker/titan/internal/session"
)

// Flow control wiring (DESIGN §9; docs/design.md "Flow control").

// FlowStats returns the broker's flow-control counters (producer pauses, slow consumers,
// events dropped by policy).
func (b *Broker) FlowStats() *flow.Stats { return &b.flow }

// HeapCongested reports whether the heap is over its high watermark (producers paused).
func (b *Broker) HeapCongested() bool { return b.heap != nil && b.heap.Congested() != nil }

// applyFlow sets the subscriber watermarks and the slow-consumer timeout of one server's
// sessions: the server's max-outbound-bytes is the high watermark; the low one is
// flow-control.subscriber.resume-pending-bytes when the high one is the broker-wide one,
// else half of it.
func (b *Broker) applyFlow(o *session.Options, sc config.Server) {
	f := b.cfg.FlowControl.Subscriber
	if sc.ProtocolOptions.MaxOutboundBytes == f.MaxPendingBytes {
		o.ResumeOutboundBytes = f.ResumePendingBytes
	}
	o.SlowConsumerTimeout = f.SlowConsumerTimeoutDuration()
	o.FlowStats = &b.flow
}

// startHeapWatch starts the sampler of the heap watermarks, when they are on.
func (b *Broker) startHeapWatch() {
	if b.heap == nil || b.heap.High == 0 {
		return
	}
	b.log.Info("heap watermarks on", "high_bytes", b.heap.High, "low_bytes", b.heap.Low)
	b.goroutine("heap-watermarks", func() {
		b.heap.Run(b.stop, 50*time.Millisecond, func(over bool, bytes uint64) {
			if over {
				b.log.Warn("heap over its high watermark: producers paused", "heap_bytes", bytes, "high_bytes", b.heap.High)
			} else {
				b.log.Info("heap back under its low watermark: producers resumed", "heap_bytes", bytes, "low_bytes", b.heap.Low)
			}
		})
	})
}

// heapGated is a publish port that pauses the producer while the heap is over its high
// watermark (until it falls to the low one, the producer's connection closes, or shutdown).
type heapGated struct {
	router.Pattern
	b *Broker
}

// HonoursSelectors implements router.Selecting for the pattern it gates.
func (g heapGated) HonoursSelectors() bool { return router.HonoursSelectors(g.Pattern) }

func (g heapGated) Publish(id dest.Identity, m *message.Message, cancel <-chan struct{}) (bool, error) {
	g.b.heapWait(cancel)
	return g.Pattern.Publish(id, m, cancel)
}

// heapGatedPublisher is heapGated for a port that only publishes.
type heapGatedPublisher struct {
	router.Publisher
	b *Broker
}

func (g heapGatedPublisher) Publish(id dest.Identity, m *message.Message, cancel <-chan struct{}) (bool, error) {
	g.b.heapWait(cancel)
	return g.Publisher.Publish(id, m, cancel)
}

// heapGatedRequests is the request/response port with heap watermarks: a command or query
// waits like any publication (until the heap falls to its low mark or shutdown; the port
// carries no cancel of the producer's connection).
type heapGatedRequests struct {
	router.Requests
	b *Broker
}

func (g heapGatedRequests) Request(id dest.Identity, m *message.Message, replyTo dest.Identity, corr string, timeout time.Duration, requester *delivery.Conn) error {
	g.b.heapWait(nil)
	return g.Requests.Request(id, m, replyTo, corr, timeout, requester)
}

// heapWait pauses the caller while the heap is congested. Lock-free when it is not.
func (b *Broker) heapWait(cancel <-chan struct{}) {
	if c := b.heap.Congested(); c != nil {
		b.flow.Wait([]<-chan struct{}{c}, cancel, b.stop)
	}
}

// gcFloorMax is the largest heap floor GCFloor proposes.
const gcFloorMax = 64 << 20

// GCFloor returns the heap size, in bytes, below which the process's garbage collector need
// not start (gctune.Start): 64 MiB, or a quarter of the heap low watermark when that is
// smaller, so that garbage left for the collector never trips the heap watermarks. The
// process (titan serve), not the broker, applies it: the GC percent is process-wide.
func (b *Broker) GCFloor() uint64 {
	if b.heap != nil && b.heap.Low > 0 {
		return min(gcFloorMax, b.heap.Low/4)
	}
	return gcFloorMax
}
