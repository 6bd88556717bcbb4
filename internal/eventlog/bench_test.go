package eventlog

import (
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/titan-broker/titan/internal/delivery"
	"github.com/titan-broker/titan/internal/dest"
	"github.com/titan-broker/titan/internal/dispatch"
	"github.com/titan-broker/titan/internal/durable"
	"github.com/titan-broker/titan/internal/frame"
	"github.com/titan-broker/titan/internal/message"
	"github.com/titan-broker/titan/internal/store/memstore"
)

// stalledWriter refuses every MESSAGE (a subscriber over its outbound limit): its reader
// stalls, so the benchmark measures the publisher's side only.
type stalledWriter struct{}

func (stalledWriter) Version() frame.Version                                      { return frame.V12 }
func (stalledWriter) QueuedBytes() int64                                          { return 0 }
func (stalledWriter) WriteMessage(*frame.Buf, []byte) bool                        { return false }
func (stalledWriter) WriteEvent(*frame.Buf, []byte, bool) (bool, <-chan struct{}) { return false, nil }

// BenchmarkPublish16Logs measures Pattern.Publish (the live tail and the readers' kicks)
// from 16 publishers at once, each to its own log with one live reader (issue 32: the
// pattern's lock on the events-store publish path).
func BenchmarkPublish16Logs(b *testing.B) {
	const logs = 16
	p := New(dispatch.New(dispatch.Options{}), Options{Store: durable.New(memstore.New(), nil), PollBase: time.Hour, PollMax: time.Hour})
	defer p.Close()
	ids := make([]dest.Identity, logs)
	for i := range ids {
		ids[i] = dest.Identity{Group: "default", Pattern: dest.PatternEventsStore, Channel: "log" + strconv.Itoa(i)}
		sub := &delivery.Subscription{ID: "s", Conn: delivery.NewConn(stalledWriter{}, nil), Group: "default",
			Dest: dest.Destination{Pattern: dest.PatternEventsStore, Channel: ids[i].Channel}}
		if err := p.Subscribe(sub); err != nil {
			b.Fatal(err)
		}
	}
	var next atomic.Int64
	b.SetParallelism(8) // 16 publishers on 2 CPUs
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		id := ids[int(next.Add(1))%logs]
		msgs := make([]message.Message, 4096)
		for i := range msgs {
			msgs[i] = message.Message{Destination: "/events-store/x", Body: []byte("e")}
		}
		seq := uint64(0)
		for pb.Next() {
			seq++
			m := &msgs[seq%4096]
			m.Sequence = seq
			if _, err := p.Publish(id, m, nil); err != nil {
				b.Fatal(err)
			}
		}
	})
}
