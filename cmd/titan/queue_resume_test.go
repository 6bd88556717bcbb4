package main

import (
	"encoding/json"
	"testing"

	"github.com/titan-broker/titan/internal/admin"
)

func TestQueueResume(t *testing.T) {
	b, addr := startBroker(t, nil)
	a := b.Admin()
	if _, err := a.CreateQueue(admin.CreateQueueOptions{QueueRef: admin.QueueRef{Destination: "/queue/jobs"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Pause(admin.QueueRef{Destination: "/queue/jobs"}); err != nil {
		t.Fatal(err)
	}
	r := run(t, "--addr", addr, "queue", "resume", "/queue/jobs").requireOK(t)
	requireEqual(t, r.stdout, "resumed queue /queue/jobs (group default) (0 messages held)\n", "stdout")
	r = run(t, "--addr", addr, "--output", "json", "queue", "resume", "/queue/jobs").requireOK(t)
	var qi admin.QueueInfo
	if err := json.Unmarshal([]byte(r.stdout), &qi); err != nil {
		t.Fatal(err)
	}
	requireEqual(t, qi.Paused, false, "paused")
	run(t, "--addr", addr, "queue", "resume", "/queue/jobs", "-g", "other").
		requireFail(t, "titan: no queue /queue/jobs in group other (see `titan queue list`)\n")
}
