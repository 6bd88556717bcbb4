package queues

import (
	"log/slog"
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/titan-broker/titan/internal/delivery"
	"github.com/titan-broker/titan/internal/dest"
	"github.com/titan-broker/titan/internal/message"
)

// pulledMsg is a first delivery pulled from a queue; it counts Metadata reads.
type pulledMsg struct {
	jetstream.Msg
	data  []byte
	reads int
}

func (m *pulledMsg) Metadata() (*jetstream.MsgMetadata, error) {
	m.reads++
	return &jetstream.MsgMetadata{NumDelivered: 1, Stream: "S"}, nil
}
func (m *pulledMsg) Data() []byte { return m.data }

// A message no subscription can take now is offered again on the next Kick; it is decoded
// and counted once (for a redelivery the count is a TITAN_UNDELIVERED read), not per
// offer, and a new head is decoded afresh.
func TestRefusedHeadDecodedOnce(t *testing.T) {
	c := &consumer{q: &Pattern{log: slog.New(slog.DiscardHandler)}, id: dest.Identity{Group: "g", Pattern: dest.PatternQueues, Channel: "c"},
		inflight: make(map[uint64]inflight), out: make(map[*delivery.Subscription]int)}
	data := message.Encode(nil, &message.Message{ID: "m1", Group: "g", Destination: "/queue/c", Body: []byte("x")})
	a, b := &pulledMsg{data: data}, &pulledMsg{data: data}
	for range 3 {
		if c.Deliver(a) {
			t.Fatal("Deliver with no subscription = true, want false")
		}
	}
	if a.reads != 1 {
		t.Errorf("head offered 3 times was read %d times, want 1", a.reads)
	}
	if c.Deliver(b); b.reads != 1 {
		t.Errorf("a new head was read %d times, want 1", b.reads)
	}
}
