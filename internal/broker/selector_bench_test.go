package broker

import (
	"strconv"
	"testing"

	"github.com/titan-broker/titan/internal/delivery"
	"github.com/titan-broker/titan/internal/dest"
	"github.com/titan-broker/titan/internal/frame"
	"github.com/titan-broker/titan/internal/message"
	"github.com/titan-broker/titan/internal/selector"
)

// BenchmarkQueueSelective is BenchmarkQueueEnqueueDeliverAck with a consumer whose selector
// takes red messages, behind a backlog of blue ones nobody selects: each dispatch walks past
// the backlog (Artemis semantics), so the cost grows with it.
func BenchmarkQueueSelective(b *testing.B) {
	for _, backlog := range []int{0, 100, 1000} {
		b.Run("backlog="+strconv.Itoa(backlog), func(b *testing.B) {
			e := newEngine(engineOptions{})
			w := &countingWriter{}
			c := delivery.NewConn(w, nil)
			id := dest.Identity{Group: "default", Pattern: dest.PatternQueues, Channel: "jobs"}
			sel, err := selector.Compile("color = 'red'")
			if err != nil {
				b.Fatal(err)
			}
			sub := &delivery.Subscription{ID: "s", Conn: c, Group: "default", Dest: dest.Destination{Pattern: dest.PatternQueues, Channel: "jobs"},
				Ack: delivery.AckClientIndividual, Prefetch: 10, Selector: sel}
			if err := e.Subscribe(sub); err != nil {
				b.Fatal(err)
			}
			body := make([]byte, 100)
			blue := []frame.Header{{Key: "color", Value: "blue"}}
			for range backlog {
				if _, err := e.Publish(id, &message.Message{ID: "b", Group: "default", Destination: "/queue/jobs", Body: body, Headers: blue}); err != nil {
					b.Fatal(err)
				}
			}
			red := []frame.Header{{Key: "color", Value: "red"}}
			b.ReportAllocs()
			for b.Loop() {
				m := &message.Message{ID: "m", Group: "default", Destination: "/queue/jobs", Body: body, Headers: red}
				if _, err := e.Publish(id, m); err != nil {
					b.Fatal(err)
				}
				key, _ := sub.OldestPending()
				if err := e.Ack(c, key, "", false); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
