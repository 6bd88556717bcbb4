package durable

import (
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/titan-broker/titan/internal/dedup"
	"github.com/titan-broker/titan/internal/dest"
	"github.com/titan-broker/titan/internal/frame"
	"github.com/titan-broker/titan/internal/message"
	"github.com/titan-broker/titan/internal/store/pebblestore"
)

// BenchmarkPersistAsync measures the durable SEND path's own cost per message: PersistAsync
// of a persistent 100-byte message into a queue's stream, on a pebblestore over an in-memory
// file system (no disk: what is left is encoding, the store's ordering and its group
// commit), with the waits of every 64 messages called together. dup-id=none is a message
// without a duplicate id; dup-id=set one carrying _AMQ_DUPL_ID, whose id record is written
// in the message's own batch.
func BenchmarkPersistAsync(b *testing.B) {
	id := dest.Identity{Group: "default", Pattern: dest.PatternQueues, Channel: "orders"}
	for _, c := range []struct {
		name    string
		headers []frame.Header
		claimed bool // the router's duplicate stage claimed the id
	}{
		{"dup-id=none", []frame.Header{{Key: "priority", Value: "4"}}, false},
		{"dup-id=set", []frame.Header{{Key: "priority", Value: "4"}, {Key: dedup.Header, Value: "order-42"}}, true},
	} {
		b.Run(c.name, func(b *testing.B) {
			st, err := pebblestore.Open("data", pebblestore.Options{FS: vfs.NewMem(), MinFreeBytes: -1})
			if err != nil {
				b.Fatal(err)
			}
			defer func() { _ = st.Close() }()
			l := New(st, nil)
			l.DuplicateHeader = dedup.Header
			m := &message.Message{ID: "m", Destination: "/queue/orders", TimestampMs: time.Now().UnixMilli(),
				Headers: c.headers, Body: make([]byte, 100), Persistent: true, DuplicateClaimed: c.claimed}
			waits := make([]func() error, 0, 64)
			flush := func() {
				for _, w := range waits {
					if err := w(); err != nil {
						b.Fatal(err)
					}
				}
				waits = waits[:0]
			}
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				m.Sequence, m.DuplicateSeq = 0, 0
				w, err := l.PersistAsync(id, m)
				if err != nil {
					b.Fatal(err)
				}
				if waits = append(waits, w); len(waits) == cap(waits) {
					flush()
				}
			}
			flush()
		})
	}
}
