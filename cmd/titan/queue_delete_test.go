package main

import (
	"testing"

	"github.com/titan-broker/titan/internal/admin"
)

func TestQueueDelete(t *testing.T) {
	b, addr := startBroker(t, nil)
	a := b.Admin()
	for range 2 {
		if _, err := a.Publish(admin.PublishRequest{Destination: "/queue/jobs", Body: ptr("x")}); err != nil {
			t.Fatal(err)
		}
	}
	run(t, "--addr", addr, "queue", "delete", "/queue/jobs").requireFail(t, "titan: queue /queue/jobs is not empty (use --force)\n")
	r := run(t, "--addr", addr, "queue", "delete", "/queue/jobs", "--force").requireOK(t)
	requireEqual(t, r.stdout, "deleted queue /queue/jobs (group default), discarding 2 messages\n", "stdout")
	run(t, "--addr", addr, "queue", "delete", "/queue/jobs").requireFail(t, "titan: no queue /queue/jobs (see `titan queue list`)\n")

	if _, err := a.CreateQueue(admin.CreateQueueOptions{QueueRef: admin.QueueRef{Destination: "/orders", Group: "market"}}); err != nil {
		t.Fatal(err)
	}
	run(t, "--addr", addr, "queue", "delete", "/orders").requireFail(t, "titan: no queue /orders (see `titan queue list`)\n")
	r = run(t, "--addr", addr, "queue", "delete", "/orders", "--group", "market").requireOK(t)
	requireEqual(t, r.stdout, "deleted queue /orders (group market)\n", "stdout")
}

func TestQueueDeleteNonEmptyInGroup(t *testing.T) {
	b, addr := startBroker(t, nil)
	if _, err := b.Admin().Publish(admin.PublishRequest{Destination: "/queue/jobs", Group: "market", Body: ptr("x")}); err != nil {
		t.Fatal(err)
	}
	run(t, "--addr", addr, "queue", "delete", "/queue/jobs", "-g", "market").
		requireFail(t, "titan: queue /queue/jobs in group market is not empty (use --force)\n")
	r := run(t, "--addr", addr, "-o", "json", "queue", "delete", "/queue/jobs", "-g", "market", "-f").requireOK(t)
	requireContains(t, r.stdout, `"discarded": 1`)
}
