package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/titan-broker/titan/internal/admin"
)

func TestQueueListTable(t *testing.T) {
	b, addr := startBroker(t, nil)
	r := run(t, "--addr", addr, "queue", "list").requireOK(t)
	requireEqual(t, r.stdout, "No queues.\n0 queues in 0 groups\n", "empty list")

	a := b.Admin()
	for _, o := range []admin.CreateQueueOptions{
		{QueueRef: admin.QueueRef{Destination: "/orders"}, MaxPendingBytes: ptr[int64](1 << 20)},
		{QueueRef: admin.QueueRef{Destination: "/queue/jobs", Group: "market"}},
	} {
		if _, err := a.CreateQueue(o); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := a.Publish(admin.PublishRequest{Destination: "/queue/jobs", Group: "market", Body: ptr("hello")}); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Pause(admin.QueueRef{Destination: "/queue/jobs", Group: "market"}); err != nil {
		t.Fatal(err)
	}
	r = run(t, "--addr", addr, "queue", "list").requireOK(t)
	lines := strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n")
	requireEqual(t, len(lines), 4, "lines of\n"+r.stdout)
	requireEqual(t, strings.Join(strings.Fields(lines[0]), " "),
		"GROUP DESTINATION PATTERN SIZE PENDING CAPACITY MAX PENDING RING CONSUMERS DELIVERING ENQUEUED DISPATCHED DROPPED STATE", "header")
	requireEqual(t, strings.Join(strings.Fields(lines[1]), " "), "default /orders events 0 0 B none 1 MiB none 0 0 0 0 0 active", "row 1")
	requireEqual(t, strings.Fields(lines[2])[0], "market", "row 2 group")
	requireContains(t, lines[2], "/queue/jobs", "paused")
	requireEqual(t, lines[3], "2 queues in 2 groups", "summary")
	// Columns are aligned: every row starts its DESTINATION column at the same offset.
	col := strings.Index(lines[0], "DESTINATION")
	requireEqual(t, strings.Index(lines[1], "/orders"), col, "alignment")
	requireEqual(t, strings.Index(lines[2], "/queue/jobs"), col, "alignment")
	if strings.Contains(r.stdout, "\x1b[") {
		t.Fatal("colour codes written to a non-terminal")
	}

	r = run(t, "--addr", addr, "queue", "list", "--group", "market").requireOK(t)
	requireContains(t, r.stdout, "1 queue in 1 group\n")

	r = run(t, "--addr", addr, "queue", "list", "-o", "json").requireOK(t)
	var l admin.QueueList
	if err := json.Unmarshal([]byte(r.stdout), &l); err != nil {
		t.Fatal(err)
	}
	requireEqual(t, l.Summary.Text, "2 queues in 2 groups", "json summary")
	requireEqual(t, l.Queues[1].Size, 1, "json size")
	requireEqual(t, l.Queues[1].Paused, true, "json paused")
}

func ptr[T any](v T) *T { return &v }

func TestQueueListMatchSearchesTheTrie(t *testing.T) {
	b, addr := startBroker(t, nil)
	for _, d := range []string{"/queue/orders", "/queue/orders/created", "/queue/orders/eu/created", "/queue/other"} {
		if _, err := b.Admin().CreateQueue(admin.CreateQueueOptions{QueueRef: admin.QueueRef{Destination: d}}); err != nil {
			t.Fatal(err)
		}
	}
	r := run(t, "--addr", addr, "queue", "list", "--match", "/queue/orders/*", "--output", "json").requireOK(t)
	var l admin.QueueList
	if err := json.Unmarshal([]byte(r.stdout), &l); err != nil || len(l.Queues) != 1 || l.Queues[0].Destination != "/queue/orders/created" {
		t.Fatalf("match *: %s %v", r.stdout, err)
	}
	r = run(t, "--addr", addr, "queue", "list", "--match", "/queue/orders/>", "--output", "json").requireOK(t)
	if err := json.Unmarshal([]byte(r.stdout), &l); err != nil || len(l.Queues) != 2 {
		t.Fatalf("match >: %s %v", r.stdout, err)
	}
}
