package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/titan-broker/titan/internal/admin"
	"github.com/titan-broker/titan/internal/brokertest"
)

func TestDashboardOnceOverview(t *testing.T) {
	b, addr := startBroker(t, nil)
	c := brokertest.Connect(t, b.Addrs()[0])
	if _, err := b.Admin().CreateQueue(admin.CreateQueueOptions{QueueRef: admin.QueueRef{Destination: "/orders"}}); err != nil {
		t.Fatal(err)
	}
	r := run(t, "--addr", addr, "--once").requireOK(t)
	requireContains(t, r.stdout,
		"Titan 0.1.0 · "+addr+" · up ",
		"connections 1 (",
		"· 1 queue in 1 group ·",
		"CONNECTIONS (1)\nSESSION",
		c.Conn.LocalAddr().String(),
		"QUEUES (1 queue in 1 group)\nGROUP",
		"default  /orders",
	)
	if strings.Contains(r.stdout, "\x1b[") {
		t.Fatal("ANSI codes in a non-terminal frame")
	}
}

func TestDashboardOnceQueuesViewAndJSON(t *testing.T) {
	b, addr := startBroker(t, nil)
	if _, err := b.Admin().CreateQueue(admin.CreateQueueOptions{QueueRef: admin.QueueRef{Destination: "/queue/jobs", Group: "g1"}}); err != nil {
		t.Fatal(err)
	}
	r := run(t, "--addr", addr, "--view", "queues", "--once").requireOK(t)
	requireContains(t, r.stdout, "MAX PENDING", "g1  ", "/queue/jobs", "\n1 queue in 1 group\n")
	if strings.Contains(r.stdout, "CONNECTIONS") {
		t.Fatal("queues view shows connections")
	}

	r = run(t, "--addr", addr, "--once", "--output", "json").requireOK(t)
	var s admin.Snapshot
	if err := json.Unmarshal([]byte(r.stdout), &s); err != nil {
		t.Fatal(err)
	}
	requireEqual(t, s.Summary.Text, "1 queue in 1 group", "summary")
	requireEqual(t, s.Server.Version, "0.1.0", "version")
}

func TestDashboardLiveWritesPlainFramesWhenNotATerminal(t *testing.T) {
	_, addr := startBroker(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 350*time.Millisecond)
	defer cancel()
	r := runContext(t, ctx, "--addr", addr, "--interval", "100ms")
	r.requireOK(t)
	frames := strings.Count(r.stdout, "Titan 0.1.0")
	if frames < 2 {
		t.Fatalf("%d frames in %q", frames, r.stdout)
	}
	requireContains(t, r.stdout, "\n\nTitan 0.1.0") // frames separated by a blank line
	if strings.Contains(r.stdout, clearScreen) {
		t.Fatal("clear-screen written to a non-terminal")
	}
}

func TestDashboardErrors(t *testing.T) {
	_, addr := startBroker(t, nil)
	run(t, "--addr", addr, "--view", "nope").requireFail(t, "titan: --view \"nope\" is not supported (use overview or queues)\n")
	run(t, "--addr", addr, "--interval", "1ms").requireFail(t, "titan: --interval must be at least 100ms, got 1ms\n")
	run(t, "--addr", addr, "extra").requireFail(t, "titan: unknown command \"extra\" for \"titan\"\n")
}
