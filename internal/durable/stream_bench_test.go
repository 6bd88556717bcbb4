package durable

import (
	"testing"

	"github.com/titan-broker/titan/internal/dest"
	"github.com/titan-broker/titan/internal/store/memstore"
)

// BenchmarkStreamName looks up a destination's stream name the way every persistent SEND
// and every ACK does: one busy destination, and two alternating.
func BenchmarkStreamName(b *testing.B) {
	l := New(memstore.New(), nil)
	ids := []dest.Identity{
		{Pattern: dest.PatternQueues, Group: "default", Channel: "orders"},
		{Pattern: dest.PatternQueues, Group: "default", Channel: "payments"},
	}
	for _, c := range []struct {
		name string
		n    int
	}{{"one", 1}, {"alternating", 2}} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				if l.stream(ids[i%c.n]) == "" {
					b.Fatal("no name")
				}
			}
		})
	}
}
