package broker

import (
	"runtime"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/titan-broker/titan/internal/address"
	"github.com/titan-broker/titan/internal/delivery"
	"github.com/titan-broker/titan/internal/dest"
	"github.com/titan-broker/titan/internal/frame"
	"github.com/titan-broker/titan/internal/message"
)

// countingWriter is a Writer that accepts everything and counts MESSAGE frames.
type countingWriter struct {
	n atomic.Int64
	_ [56]byte // own cache line: the count is written on every delivery
}

func (w *countingWriter) Version() frame.Version { return frame.V12 }
func (w *countingWriter) WriteMessage(p *frame.Buf, _ []byte) bool {
	frame.PutBuf(p)
	w.n.Add(1)
	return true
}
func (w *countingWriter) QueuedBytes() int64 { return 0 }
func (w *countingWriter) WriteEvent(p *frame.Buf, s []byte, _ bool) (bool, <-chan struct{}) {
	return w.WriteMessage(p, s), nil
}

// BenchmarkFanout measures publish → dispatcher queue → one consumer per destination →
// MESSAGE per exact-match subscription (fanout-mode), for several destination and subscriber
// counts. msgs/s counts published messages; deliveries/s counts MESSAGE frames.
func BenchmarkFanout(b *testing.B) {
	for _, nDest := range []int{1, 4, 64} {
		for _, nSub := range []int{1, 8} {
			b.Run("dests="+strconv.Itoa(nDest)+"/subs="+strconv.Itoa(nSub), func(b *testing.B) {
				e := newEngine(engineOptions{FanoutMode: true, Settings: func(dest.Identity) address.Settings {
					return address.Settings{Capacity: 1024, FullPolicy: address.PolicyBlock}
				}})
				w := &countingWriter{}
				ids := make([]dest.Identity, nDest)
				for d := range nDest {
					ids[d] = dest.Identity{Group: "default", Pattern: dest.PatternEvents, Channel: "bench." + strconv.Itoa(d)}
					for s := range nSub {
						c := delivery.NewConn(w, nil)
						sub := &delivery.Subscription{ID: strconv.Itoa(s), Conn: c, Group: "default", Dest: dest.Destination{Pattern: dest.PatternEvents, Channel: ids[d].Channel}}
						if err := e.Subscribe(sub); err != nil {
							b.Fatal(err)
						}
					}
				}
				body := make([]byte, 100)
				b.ReportAllocs()
				b.ResetTimer()
				start := time.Now()
				i := 0
				for b.Loop() {
					id := ids[i%nDest]
					m := &message.Message{ID: "m", Group: "default", Destination: "/topic/bench", Body: body}
					if _, err := e.Publish(id, m); err != nil {
						b.Fatal(err)
					}
					i++
				}
				want := int64(i * nSub)
				for w.n.Load() < want {
					time.Sleep(50 * time.Microsecond)
				}
				el := time.Since(start).Seconds()
				b.ReportMetric(float64(i)/el, "msgs/s")
				b.ReportMetric(float64(want)/el, "deliveries/s")
			})
		}
	}
}

// BenchmarkQueueEnqueueDeliverAck measures one queues-pattern message's life: enqueue,
// delivery to a client-ack subscriber, ACK.
func BenchmarkQueueEnqueueDeliverAck(b *testing.B) {
	e := newEngine(engineOptions{})
	w := &countingWriter{}
	c := delivery.NewConn(w, nil)
	id := dest.Identity{Group: "default", Pattern: dest.PatternQueues, Channel: "jobs"}
	sub := &delivery.Subscription{ID: "s", Conn: c, Group: "default", Dest: dest.Destination{Pattern: dest.PatternQueues, Channel: "jobs"}, Ack: delivery.AckClientIndividual, Prefetch: 10}
	if err := e.Subscribe(sub); err != nil {
		b.Fatal(err)
	}
	body := make([]byte, 100)
	b.ReportAllocs()
	for b.Loop() {
		m := &message.Message{ID: "m", Group: "default", Destination: "/queue/jobs", Body: body}
		if _, err := e.Publish(id, m); err != nil {
			b.Fatal(err)
		}
		key, _ := sub.OldestPending()
		if err := e.Ack(c, key, "", false); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkEventsDirect measures the direct events path (no fanout-mode): publish → match →
// MESSAGE per subscription in the publisher's goroutine (delivery.Conn.DeliverEvent and the
// flow-control check), for 1 and 8 subscribers.
func BenchmarkEventsDirect(b *testing.B) {
	for _, nSub := range []int{1, 8} {
		b.Run("subs="+strconv.Itoa(nSub), func(b *testing.B) {
			e := newEngine(engineOptions{})
			w := &countingWriter{}
			id := dest.Identity{Group: "default", Pattern: dest.PatternEvents, Channel: "bench.direct"}
			for s := range nSub {
				c := delivery.NewConn(w, nil)
				sub := &delivery.Subscription{ID: strconv.Itoa(s), Conn: c, Group: "default", Dest: dest.Destination{Pattern: dest.PatternEvents, Channel: id.Channel}}
				if err := e.Subscribe(sub); err != nil {
					b.Fatal(err)
				}
			}
			m := &message.Message{ID: "m", Group: "default", Destination: "/topic/bench/direct", Body: make([]byte, 100)}
			b.ReportAllocs()
			for b.Loop() {
				if _, err := e.Publish(id, m); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkFanoutBursts measures fanout-mode publication in bursts: 8 messages to one
// destination with one subscriber, then a wait until they are delivered (the consumer goes
// idle between bursts, as under request/response-like traffic). One op is one burst.
func BenchmarkFanoutBursts(b *testing.B) {
	e := newEngine(engineOptions{FanoutMode: true})
	defer e.Dispatcher.Close()
	w := &countingWriter{}
	id := dest.Identity{Group: "default", Pattern: dest.PatternEvents, Channel: "bursts"}
	sub := &delivery.Subscription{ID: "1", Conn: delivery.NewConn(w, nil), Group: "default", Dest: dest.Destination{Pattern: dest.PatternEvents, Channel: id.Channel}}
	if err := e.Subscribe(sub); err != nil {
		b.Fatal(err)
	}
	body := make([]byte, 100)
	want := int64(0)
	b.ReportAllocs()
	for b.Loop() {
		for range 8 {
			m := &message.Message{ID: "m", Group: "default", Destination: "/topic/bursts", Body: body}
			if _, err := e.Publish(id, m); err != nil {
				b.Fatal(err)
			}
		}
		want += 8
		for w.n.Load() < want {
			runtime.Gosched()
		}
	}
}
