package rpc

import (
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/titan-broker/titan/internal/delivery"
	"github.com/titan-broker/titan/internal/delivery/deliverytest"
	"github.com/titan-broker/titan/internal/dest"
	"github.com/titan-broker/titan/internal/message"
)

// BenchmarkRoundTrip measures request/response round trips at the pattern (Request
// delivers to an auto-ack responder, Respond completes it) from 16 requesters at once,
// all to one channel and each to its own (issue 32: the pattern's locks on this path).
func BenchmarkRoundTrip(b *testing.B) {
	for _, channels := range []int{1, 16} {
		b.Run("channels="+strconv.Itoa(channels), func(b *testing.B) {
			p := New(Options{Replies: discard{}, TempQueues: discard{}})
			defer p.Close()
			ids := make([]dest.Identity, channels)
			for i := range ids {
				ids[i] = dest.Identity{Group: "default", Pattern: dest.PatternCommands, Channel: "c" + strconv.Itoa(i)}
				for r := range 2 {
					c := delivery.NewConn(deliverytest.Null{}, nil)
					sub := &delivery.Subscription{ID: "r" + strconv.Itoa(r), Conn: c, Group: "default",
						Dest: dest.Destination{Pattern: dest.PatternCommands, Channel: ids[i].Channel}}
					if err := p.Subscribe(sub); err != nil {
						b.Fatal(err)
					}
				}
			}
			m := &message.Message{ID: "m", Group: "default", Destination: "/command/c", Body: []byte("req")}
			var next atomic.Int64
			b.SetParallelism(8) // 16 requesters on 2 CPUs
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				w := next.Add(1)
				id := ids[int(w)%channels]
				replyTo := dest.Identity{Group: "default", Pattern: dest.PatternTempQueue, Channel: "s" + strconv.FormatInt(w, 10) + ".r"}
				corrs := make([]string, 1024)
				for i := range corrs {
					corrs[i] = strconv.Itoa(i)
				}
				i := 0
				for pb.Next() {
					corr := corrs[i&1023]
					i++
					if err := request(p, id, m, replyTo, corr); err != nil {
						b.Fatal(err)
					}
					if ok, _ := p.Respond(replyTo, corr); !ok {
						b.Fatal("response matched no pending request")
					}
				}
			})
		})
	}
}

type discard struct{}

func (discard) Publish(dest.Identity, *message.Message, <-chan struct{}) (bool, error) {
	return false, nil
}
func (discard) DropOwned(string) {}

// request is Request with a minute's timeout and no requesting connection.
func request(p *Pattern, id dest.Identity, m *message.Message, replyTo dest.Identity, corr string) error {
	return p.Request(id, m, replyTo, corr, time.Minute, nil)
}
