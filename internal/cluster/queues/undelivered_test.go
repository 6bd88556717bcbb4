package queues

import (
	"regexp"
	"sync"
	"testing"
	"time"

	"github.com/titan-broker/titan/internal/cluster/clustertest"
	"github.com/titan-broker/titan/internal/delivery"
	"github.com/titan-broker/titan/internal/dest"
	"github.com/titan-broker/titan/internal/frame"
	"github.com/titan-broker/titan/internal/message"
)

// heads records the MESSAGE heads a connection receives.
type heads struct {
	mu  sync.Mutex
	got []string
}

func (h *heads) Version() frame.Version { return frame.V12 }
func (h *heads) WriteMessage(b *frame.Buf, _ []byte) bool {
	h.mu.Lock()
	h.got = append(h.got, string(b.B))
	h.mu.Unlock()
	return true
}
func (h *heads) WriteEvent(b *frame.Buf, s []byte, _ bool) (bool, <-chan struct{}) {
	return h.WriteMessage(b, s), nil
}
func (h *heads) QueuedBytes() int64 { return 0 }

func (h *heads) wait(t *testing.T, n int) string {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		h.mu.Lock()
		if len(h.got) >= n {
			s := h.got[n-1]
			h.mu.Unlock()
			return s
		}
		h.mu.Unlock()
		if time.Now().After(deadline) {
			t.Fatalf("no MESSAGE %d", n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

var deliveryCount = regexp.MustCompile(`\ndelivery-count:(\d+)\n`)

// Delivery counts are the same as on a single node whatever node a consumer moves to
// (issue 27): a message delivered once and handed back at each UNSUBSCRIBE, taken up by a
// subscriber on the next node each time, arrives with delivery-count none, 2, 3 and 4 —
// not counting the trips to a node's pull request that handed it to no client.
func TestDeliveryCountAcrossNodes(t *testing.T) {
	nodes := clustertest.StartNodes(t)
	qs := []*Pattern{New(nodes[0], nil, nil), New(nodes[1], nil, nil), New(nodes[2], nil, nil)}
	id := dest.Identity{Group: "moves", Pattern: dest.PatternQueues, Channel: "jobs"}
	m := &message.Message{ID: "move-1", Group: id.Group, Destination: id.Destination(), Body: []byte("x"), Persistent: true}
	if _, err := qs[0].Publish(id, m, nil); err != nil {
		t.Fatal(err)
	}
	reg := &delivery.Registry{}
	var want []string
	var got []string
	for i := range 4 {
		w := &heads{}
		c := reg.NewConn(w)
		sub := &delivery.Subscription{ID: "s", Conn: c, Group: id.Group, Dest: dest.Destination{Pattern: dest.PatternQueues, Channel: "jobs"},
			Ack: delivery.AckClientIndividual, Prefetch: 10}
		if err := qs[i%3].Subscribe(sub); err != nil {
			t.Fatal(err)
		}
		head := w.wait(t, 1)
		count := ""
		if mm := deliveryCount.FindStringSubmatch(head); mm != nil {
			count = mm[1]
		}
		got = append(got, count)
		want = append(want, map[int]string{0: "", 1: "2", 2: "3", 3: "4"}[i])
		if err := c.Unsubscribe("s"); err != nil { // handed back unacknowledged
			t.Fatal(err)
		}
	}
	if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] || got[2] != want[2] || got[3] != want[3] {
		t.Fatalf("delivery-count per node move %q, want %q (single node)", got, want)
	}
}
