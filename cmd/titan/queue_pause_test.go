package main

import (
	"testing"

	"github.com/titan-broker/titan/internal/admin"
)

func TestQueuePause(t *testing.T) {
	b, addr := startBroker(t, nil)
	a := b.Admin()
	if _, err := a.CreateQueue(admin.CreateQueueOptions{QueueRef: admin.QueueRef{Destination: "/orders", Group: "market"}}); err != nil {
		t.Fatal(err)
	}
	r := run(t, "--addr", addr, "queue", "pause", "/orders", "--group", "market").requireOK(t)
	requireEqual(t, r.stdout, "paused queue /orders (group market) (0 messages held)\n", "stdout")
	l, _ := a.Queues(admin.QueuesOptions{})
	requireEqual(t, l.Queues[0].Paused, true, "paused")

	run(t, "--addr", addr, "queue", "pause", "/orders").requireFail(t, "titan: no queue /orders (see `titan queue list`)\n")
	run(t, "--addr", addr, "queue", "pause", "/a//b").requireFail(t, "titan: invalid destination \"/a//b\"\n")
}
