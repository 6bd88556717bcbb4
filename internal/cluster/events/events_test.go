package events

import (
	"testing"

	"github.com/titan-broker/titan/internal/cluster/clustertest"
	"github.com/titan-broker/titan/internal/dest"
	"github.com/titan-broker/titan/internal/message"
)

// BenchmarkEventsPublish measures one events SEND (a core NATS publish, no subscriber).
func BenchmarkEventsPublish(b *testing.B) {
	nodes := clustertest.StartNodes(b)
	e := New(nodes[0])
	id := dest.Identity{Group: "bench", Pattern: dest.PatternEvents, Channel: "prices.eu"}
	m := &message.Message{ID: "bench-1", Group: "bench", Destination: "/topic/prices/eu", Body: make([]byte, 128)}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := e.Publish(id, m, nil); err != nil {
			b.Fatal(err)
		}
	}
}
