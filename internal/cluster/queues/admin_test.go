package queues

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/titan-broker/titan/internal/cluster/clustertest"
	"github.com/titan-broker/titan/internal/message"
)

// The operator actions act on JetStream from any node: messages sent through one node are
// browsed (ready, then scheduled), moved, paused, purged and deleted through another.
func TestQueueOperatorActions(t *testing.T) {
	nodes := clustertest.StartNodes(t)
	send, op := New(nodes[0], clustertest.TestSettings, nil), New(nodes[1], clustertest.TestSettings, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	id := clustertest.QueueID("ops", "jobs")

	if _, err := op.BrowseQueue(ctx, id, 10); !errors.Is(err, ErrNoQueue) {
		t.Fatalf("browse of an unknown queue: %v, want ErrNoQueue", err)
	}
	for i := range 3 {
		if _, err := send.Publish(id, clustertest.MsgFor(id, fmt.Sprint("m", i)), nil); err != nil {
			t.Fatal(err)
		}
	}
	later := clustertest.MsgFor(id, "scheduled")
	later.DeliverAtMs = time.Now().Add(time.Hour).UnixMilli()
	if _, err := send.Publish(id, later, nil); err != nil {
		t.Fatal(err)
	}
	other := clustertest.QueueID("ops", "other") // shares the stream: never touched by actions on jobs
	if _, err := send.Publish(other, clustertest.MsgFor(other, "keep"), nil); err != nil {
		t.Fatal(err)
	}

	ms, err := op.BrowseQueue(ctx, id, 10)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, m := range ms {
		got = append(got, string(m.Message.Body))
	}
	if !clustertest.Equal(got, []string{"m0", "m1", "m2", "scheduled"}) || ms[3].DeliverAt.IsZero() || !ms[0].DeliverAt.IsZero() {
		t.Fatalf("browse = %v (%+v), want m0 m1 m2 then the scheduled one", got, ms)
	}
	if ms, err = op.BrowseQueue(ctx, id, 2); err != nil || len(ms) != 2 {
		t.Fatalf("browse limit 2: %d messages, %v", len(ms), err)
	}
	if n, err := op.QueueDepth(ctx, id); err != nil || n != 3 {
		t.Fatalf("depth = %d, %v; want 3", n, err)
	}

	// Move the head: fn's failure keeps it; success removes it.
	if _, err := op.MoveQueueHead(ctx, id, func(*message.Message) error { return errors.New("refused") }); err == nil {
		t.Fatal("a failing move reported no error")
	}
	var moved string
	if ok, err := op.MoveQueueHead(ctx, id, func(m *message.Message) error { moved = string(m.Body); return nil }); err != nil || !ok || moved != "m0" {
		t.Fatalf("move head: %v %v %q", ok, err, moved)
	}
	if b := clustertest.BodiesOn(t, send.js, send.Place(id).Stream, send.Place(id).Subject); !clustertest.Equal(b, []string{"m1", "m2"}) {
		t.Fatalf("after the move the queue holds %v", b)
	}

	if err := op.SetPaused(ctx, clustertest.QueueID("ops", "nothing"), true); !errors.Is(err, ErrNoQueue) {
		t.Fatalf("pause of a queue the cluster does not hold: %v, want ErrNoQueue", err)
	}
	// Pause and resume act on the durable consumer, created by the pause if need be.
	if err := op.SetPaused(ctx, id, true); err != nil {
		t.Fatal(err)
	}
	if p, err := send.Paused(ctx, id); err != nil || !p {
		t.Fatalf("paused seen from another node = %v, %v", p, err)
	}
	if err := op.SetPaused(ctx, id, false); err != nil {
		t.Fatal(err)
	}
	if p, err := send.Paused(ctx, id); err != nil || p {
		t.Fatalf("after resume paused = %v, %v", p, err)
	}

	if _, err := op.DeleteQueue(ctx, id, false); !errors.Is(err, ErrQueueNotEmpty) {
		t.Fatalf("delete of a non-empty queue without force: %v", err)
	}
	if n, err := op.PurgeQueue(ctx, id); err != nil || n != 3 { // m1, m2 and the scheduled one
		t.Fatalf("purged %d, %v; want 3", n, err)
	}
	if ms, err := op.BrowseQueue(ctx, id, 10); err != nil || len(ms) != 0 {
		t.Fatalf("after purge browse = %d messages, %v", len(ms), err)
	}
	if b := clustertest.BodiesOn(t, send.js, send.Place(other).Stream, send.Place(other).Subject); !clustertest.Equal(b, []string{"keep"}) {
		t.Fatalf("the other queue holds %v", b)
	}
	if _, err := send.Publish(id, clustertest.MsgFor(id, "again"), nil); err != nil {
		t.Fatal(err)
	}
	if n, err := op.DeleteQueue(ctx, id, true); err != nil || n != 1 {
		t.Fatalf("forced delete discarded %d, %v; want 1", n, err)
	}
	if _, err := op.DeleteQueue(ctx, id, true); !errors.Is(err, ErrNoQueue) {
		t.Fatalf("second delete: %v, want ErrNoQueue", err)
	}
	if ms, err := op.BrowseQueue(ctx, id, 10); err != nil || len(ms) != 0 {
		t.Fatalf("browse of the deleted queue: %d messages, %v; want none", len(ms), err)
	}
	if created, err := op.CreateQueue(ctx, id); err != nil || !created {
		t.Fatalf("create = %v, %v", created, err)
	}
	if created, err := send.CreateQueue(ctx, id); err != nil || created {
		t.Fatalf("second create (another node) = %v, %v; want existing", created, err)
	}
	if n, err := send.QueueDepth(ctx, id); err != nil || n != 0 {
		t.Fatalf("created queue depth %d, %v", n, err)
	}
}
