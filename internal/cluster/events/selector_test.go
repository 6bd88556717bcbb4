package events

import (
	"bytes"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/titan-broker/titan/internal/cluster/clustertest"
	"github.com/titan-broker/titan/internal/cluster/queues"
	"github.com/titan-broker/titan/internal/delivery"
	"github.com/titan-broker/titan/internal/dest"
	"github.com/titan-broker/titan/internal/frame"
	"github.com/titan-broker/titan/internal/message"
	"github.com/titan-broker/titan/internal/selector"
	"github.com/titan-broker/titan/internal/testwait"
)

// bodyWriter stands in for a client socket and keeps each MESSAGE's body.
type bodyWriter struct {
	mu     sync.Mutex
	bodies []string
}

func (w *bodyWriter) Version() frame.Version { return frame.V12 }
func (w *bodyWriter) QueuedBytes() int64     { return 0 }
func (w *bodyWriter) WriteMessage(_ *frame.Buf, shared []byte) bool {
	// The body sits between the blank line and the terminator of the shared tail.
	body := shared[:len(shared)-len(frame.Terminator)]
	if i := bytes.Index(body, []byte("\n\n")); i >= 0 {
		body = body[i+2:]
	}
	w.mu.Lock()
	w.bodies = append(w.bodies, string(body))
	w.mu.Unlock()
	return true
}
func (w *bodyWriter) WriteEvent(p *frame.Buf, shared []byte, _ bool) (bool, <-chan struct{}) {
	return w.WriteMessage(p, shared), nil
}
func (w *bodyWriter) got() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.bodies)
}

// TestEventsSelector: in cluster mode an events subscription's selector filters what its
// node delivers, for events published through another node; the queues adapter does not
// claim to honour selectors (the router refuses them there).
func TestEventsSelector(t *testing.T) {
	nodes := clustertest.StartNodes(t)
	pub, subNode := New(nodes[0], Options{}), New(nodes[1], Options{})
	if !subNode.HonoursSelectors() {
		t.Fatal("cluster events must honour selectors")
	}
	if _, ok := any(queues.New(nodes[0], clustertest.TestSettings, nil)).(interface{ HonoursSelectors() bool }); ok {
		t.Fatal("cluster queues claim to honour selectors, which they do not")
	}
	sel, err := selector.Compile("color = 'red' OR body = 'fence'")
	if err != nil {
		t.Fatal(err)
	}
	w := &bodyWriter{}
	reg := &delivery.Registry{}
	sub := &delivery.Subscription{ID: "s", Conn: reg.NewConn(w), Group: "g", Ack: delivery.AckAuto, Prefetch: 10,
		Dest: dest.Destination{Pattern: dest.PatternEvents, Channel: "sel.>"}, Selector: sel}
	if err := subNode.Subscribe(sub); err != nil {
		t.Fatal(err)
	}
	id := dest.Identity{Group: "g", Pattern: dest.PatternEvents, Channel: "sel.a"}
	publish := func(body, color string) {
		m := &message.Message{ID: body, Group: "g", Destination: "/topic/sel/a", Body: []byte(body),
			Headers: []frame.Header{{Key: "color", Value: color}, {Key: "body", Value: body}}}
		if _, err := pub.Publish(id, m, nil); err != nil {
			t.Fatal(err)
		}
	}
	// Subscription interest reaches node 0 asynchronously: probe until a red one arrives.
	testwait.Eventually(t, 15*time.Second, "the subscription to reach the publishing node", func() bool {
		publish("probe", "red")
		return slices.Contains(w.got(), "probe")
	})
	for i, c := range []string{"red", "blue", "red", "green"} {
		publish(c+string(rune('0'+i)), c)
	}
	publish("fence", "none")
	testwait.Eventually(t, 15*time.Second, "the fence", func() bool { return slices.Contains(w.got(), "fence") })
	var got []string
	for _, b := range w.got() {
		if b != "probe" {
			got = append(got, b)
		}
	}
	if want := []string{"red0", "red2", "fence"}; !slices.Equal(got, want) {
		t.Fatalf("selective subscription got %q, want %q", got, want)
	}
}
