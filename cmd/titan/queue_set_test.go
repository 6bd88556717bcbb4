package main

import (
	"testing"

	"github.com/titan-broker/titan/internal/admin"
)

func TestQueueSetRingSize(t *testing.T) {
	b, addr := startBroker(t, nil)
	a := b.Admin()
	if _, err := a.CreateQueue(admin.CreateQueueOptions{QueueRef: admin.QueueRef{Destination: "/queue/jobs"}}); err != nil {
		t.Fatal(err)
	}
	r := run(t, "--addr", addr, "queue", "set", "/queue/jobs", "--ring-size", "3").requireOK(t)
	requireEqual(t, r.stdout, "queue /queue/jobs (group default): ring size 3 (0 messages held)\n", "stdout")
	l, _ := a.Queues(admin.QueuesOptions{})
	requireEqual(t, l.Queues[0].RingSize, 3, "ring size")

	r = run(t, "--addr", addr, "queue", "set", "/queue/jobs", "--ring-size", "-1").requireOK(t)
	requireEqual(t, r.stdout, "queue /queue/jobs (group default): ring size none (0 messages held)\n", "stdout")

	run(t, "--addr", addr, "queue", "set", "/queue/jobs").requireFail(t, "titan: nothing to set: pass --ring-size N\n")
	run(t, "--addr", addr, "queue", "set", "/queue/none", "--ring-size", "3").requireFail(t, "titan: no queue /queue/none (see `titan queue list`)\n")
	run(t, "--addr", addr, "queue", "set", "/orders", "--ring-size", "3").
		requireFail(t, "titan: ring size applies to queues destinations (/queue/...), not events\n")
}
