package queues

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"sync"
	"testing"
	"time"

	"github.com/titan-broker/titan/internal/cluster"
	"github.com/titan-broker/titan/internal/cluster/clustertest"
	"github.com/titan-broker/titan/internal/delivery"
	"github.com/titan-broker/titan/internal/dest"
	"github.com/titan-broker/titan/internal/frame"
	"github.com/titan-broker/titan/internal/message"
)

// frames records the MESSAGE frames a connection receives and refuses every one past
// accept (a full outbound), so the node holds what it pulled for it.
type frames struct {
	mu     sync.Mutex
	accept int
	got    []string
}

func (w *frames) Version() frame.Version { return frame.V12 }
func (w *frames) WriteMessage(b *frame.Buf, shared []byte) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.got) >= w.accept {
		return false
	}
	w.got = append(w.got, string(b.B)+string(shared))
	return true
}
func (w *frames) WriteEvent(b *frame.Buf, s []byte, _ bool) (bool, <-chan struct{}) {
	return w.WriteMessage(b, s), nil
}
func (w *frames) QueuedBytes() int64 { return 0 }

func (w *frames) count() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.got)
}

var messageID = regexp.MustCompile(`\nmessage-id:([^\n]+)\n`)

// A node that steps down hands back, before its clients are closed, what its client has
// not acknowledged and what it pulled and could not hand on, together in stream order
// (issue 27: a rolling restart reorders nothing): a subscriber on another node then gets
// the whole queue in SEND order — the two its client had with delivery-count 2, the held
// ones as first deliveries — and the stepping-down node takes no new subscription.
func TestHandBackInStreamOrder(t *testing.T) {
	nodes := clustertest.StartNodes(t)
	a, b := New(nodes[0], nil, nil), New(nodes[1], nil, nil)
	id := dest.Identity{Group: "handback", Pattern: dest.PatternQueues, Channel: "jobs"}
	const total = 8
	var sent []string
	for i := range total {
		m := &message.Message{ID: fmt.Sprintf("hb-%d", i), Group: id.Group, Destination: id.Destination(), Body: []byte("x"), Persistent: true}
		if _, err := a.Publish(id, m, nil); err != nil {
			t.Fatal(err)
		}
		sent = append(sent, m.ID)
	}
	reg := &delivery.Registry{}
	sub := func(q *Pattern, w *frames, prefetch int) (*delivery.Subscription, error) {
		s := &delivery.Subscription{ID: "s", Conn: reg.NewConn(w), Group: id.Group, Dest: dest.Destination{Pattern: dest.PatternQueues, Channel: "jobs"},
			Ack: delivery.AckClientIndividual, Prefetch: prefetch}
		return s, q.Subscribe(s)
	}
	held := &frames{accept: 2} // two delivered, never acknowledged; the rest of the pull held
	if _, err := sub(a, held, 5); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for held.count() < 2 {
		if time.Now().After(deadline) {
			t.Fatal("the first node's subscriber got no deliveries")
		}
		time.Sleep(10 * time.Millisecond)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	a.HandBack(ctx)
	if _, err := sub(a, &frames{accept: total}, total); !errors.Is(err, cluster.ErrClosed) {
		t.Errorf("Subscribe after HandBack: %v, want cluster.ErrClosed", err)
	}

	next := &frames{accept: total}
	if _, err := sub(b, next, total); err != nil {
		t.Fatal(err)
	}
	for next.count() < total {
		if time.Now().After(deadline) {
			t.Fatalf("the second node's subscriber got %d of %d", next.count(), total)
		}
		time.Sleep(10 * time.Millisecond)
	}
	next.mu.Lock()
	defer next.mu.Unlock()
	for i, f := range next.got {
		got := ""
		if mm := messageID.FindStringSubmatch(f); mm != nil {
			got = mm[1]
		}
		count := ""
		if mm := deliveryCount.FindStringSubmatch(f); mm != nil {
			count = mm[1]
		}
		want := map[bool]string{true: "2", false: ""}[i < 2]
		if got != sent[i] || count != want {
			t.Errorf("delivery %d: %s with delivery-count %q, want %s with %q", i, got, count, sent[i], want)
		}
	}
}
