package main

import (
	"encoding/json"
	"testing"

	"github.com/titan-broker/titan/internal/admin"
)

func TestQueueCreateExactlyAsDocumented(t *testing.T) {
	b, addr := startBroker(t, nil)
	r := run(t, "--addr", addr, "queue", "create", "/orders", "--max-pending-bytes", "1048576").requireOK(t)
	requireEqual(t, r.stdout, "created queue /orders (group default), events: capacity none, max-pending-bytes 1048576 (1 MiB), ring size none\n", "stdout")

	// Idempotent: success, and the original limits are kept and reported.
	r = run(t, "--addr", addr, "queue", "create", "/orders", "--max-pending-bytes", "10").requireOK(t)
	requireEqual(t, r.stdout, "queue /orders (group default) already exists; its limits were kept: capacity none, max-pending-bytes 1048576 (1 MiB), ring size none\n", "stdout")

	l, err := b.Admin().Queues(admin.QueuesOptions{})
	if err != nil {
		t.Fatal(err)
	}
	requireEqual(t, len(l.Queues), 1, "queues")
	requireEqual(t, l.Queues[0].MaxPendingBytes, int64(1048576), "limit")
}

func TestQueueCreateOptions(t *testing.T) {
	_, addr := startBroker(t, nil)
	r := run(t, "--addr", addr, "queue", "create", "/queue/jobs", "--group", "market", "--ring-size", "100", "--capacity", "500").requireOK(t)
	requireEqual(t, r.stdout, "created queue /queue/jobs (group market), queues: capacity 500, max-pending-bytes 67108864 (64 MiB), ring size 100\n", "stdout")

	r = run(t, "--addr", addr, "--output", "json", "queue", "create", "/topic/prices", "-g", "market").requireOK(t)
	var res admin.CreateQueueResult
	if err := json.Unmarshal([]byte(r.stdout), &res); err != nil {
		t.Fatalf("json output %q: %v", r.stdout, err)
	}
	requireEqual(t, res.Created, true, "created")
	requireEqual(t, res.Queue.Group, "market", "group")
	requireEqual(t, res.Queue.Capacity, 11, "default events capacity")
}

func TestQueueCreateErrors(t *testing.T) {
	_, addr := startBroker(t, nil)
	run(t, "--addr", addr, "queue", "create", "/queue//x").requireFail(t, "titan: invalid destination \"/queue//x\"\n")
	run(t, "--addr", addr, "queue", "create", "/orders", "--group", "bad group").
		requireFail(t, "titan: invalid group: names match ^[a-zA-Z0-9_-]{1,64}$\n")
	run(t, "--addr", addr, "queue", "create", "/topic/x", "--ring-size", "5").
		requireFail(t, "titan: ring size applies to queues destinations (/queue/...), not events\n")
	run(t, "--addr", addr, "queue", "create").requireFail(t, "titan: titan queue create needs exactly one destination, e.g. `titan queue create /orders`\n")
	r := run(t, "--addr", addr, "queue", "create", "/orders", "--max-pending-bytes", "lots")
	if r.code == 0 || r.stdout != "" {
		t.Fatalf("bad flag accepted: %+v", r)
	}
}
