package events

import (
	"testing"

	"github.com/nats-io/nats.go"

	"github.com/titan-broker/titan/internal/cluster/clustertest"
	"github.com/titan-broker/titan/internal/delivery"
	"github.com/titan-broker/titan/internal/dest"
	"github.com/titan-broker/titan/internal/message"
)

// BenchmarkEventsFanOut: one event received on a node's NATS subscription, decoded once and
// delivered to its 4 local auto-ack subscriptions (the NATS callback's work, without NATS).
func BenchmarkEventsFanOut(b *testing.B) {
	e := &Pattern{opts: Options{Drops: &delivery.EventDrops{}}}
	in := &interest{subject: "t.bench.ev.prices.eu"}
	var local []*delivery.Subscription
	for i := range 4 {
		w := &clustertest.CountingWriter{}
		local = append(local, &delivery.Subscription{ID: string(rune('a' + i)), Conn: (&delivery.Registry{}).NewConn(w), Group: "bench",
			Dest: dest.Destination{Pattern: dest.PatternEvents, Channel: "prices.eu"}, Ack: delivery.AckAuto})
	}
	in.local.Store(&local)
	m := &message.Message{ID: "bench-1", Group: "bench", Destination: "/topic/prices/eu", Body: make([]byte, 100)}
	msg := &nats.Msg{Subject: in.subject, Data: message.Encode(nil, m)}
	b.ReportAllocs()
	for b.Loop() {
		e.fanOut(in, msg)
	}
}
