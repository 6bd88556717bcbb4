package admin_test

import (
	"testing"

	"github.com/titan-broker/titan/internal/admin"
	"github.com/titan-broker/titan/internal/config"
)

// A re-drive moves a dead letter only once its copy is accepted: when the target refuses it
// (a paused FAIL queue), the re-drive stops with that error and the message stays at the
// head of the dead-letter queue; once the target takes messages again, everything moves, in
// order, without the dlq-* headers.
func TestRedriveStopsAtARefusedCopyAndLosesNothing(t *testing.T) {
	_, a := start(t, func(c *config.Config) {
		c.AddressSettings = []config.AddressSetting{{Match: "jobs", AddressFullPolicy: "FAIL"}}
	})
	for _, body := range []string{"d1", "d2"} {
		b := body
		_, err := a.Publish(admin.PublishRequest{Destination: "/queue/DLQ.jobs", Body: &b,
			Headers: map[string]string{admin.HeaderDLQOriginalDestination: "/queue/jobs", "dlq-reason": "max-deliveries", "k": b}})
		requireNoError(t, err)
	}
	_, err := a.CreateQueue(admin.CreateQueueOptions{QueueRef: admin.QueueRef{Destination: "/queue/jobs"}})
	requireNoError(t, err)
	_, err = a.Pause(admin.QueueRef{Destination: "/queue/jobs"})
	requireNoError(t, err)

	_, err = a.Redrive(admin.QueueRef{Destination: "/queue/DLQ.jobs"}, 0, "")
	e := requireCode(t, err, admin.CodeQueueFull, nil)
	if e.Message != "queue /queue/jobs is paused; retry after it is resumed (re-drive stopped after 0 messages)" {
		t.Fatalf("message %q", e.Message)
	}
	dl, err := a.Browse(admin.QueueRef{Destination: "/queue/DLQ.jobs"}, 0)
	requireNoError(t, err)
	requireEqual(t, len(dl.Messages), 2, "dead letters kept")
	requireEqual(t, *dl.Messages[0].Body, "d1", "head kept in order")
	requireEqual(t, dl.Messages[0].DeliveryCount, 0, "a refused move is not a delivery")

	_, err = a.Resume(admin.QueueRef{Destination: "/queue/jobs"})
	requireNoError(t, err)
	res, err := a.Redrive(admin.QueueRef{Destination: "/queue/jobs"}, 1, "")
	requireNoError(t, err)
	requireEqual(t, res.Moved, 1, "limit 1")
	res, err = a.Redrive(admin.QueueRef{Destination: "/queue/DLQ.jobs"}, 0, "")
	requireNoError(t, err)
	requireEqual(t, res.Moved, 1, "the rest")
	got, err := a.Browse(admin.QueueRef{Destination: "/queue/jobs"}, 0)
	requireNoError(t, err)
	requireEqual(t, len(got.Messages), 2, "on the queue")
	requireEqual(t, *got.Messages[0].Body+*got.Messages[1].Body, "d1d2", "order")
	if _, ok := got.Messages[0].Headers["dlq-reason"]; ok || got.Messages[0].Headers["k"] != "d1" {
		t.Fatalf("headers after re-drive: %v", got.Messages[0].Headers)
	}

	// Purge keeps the queue; the operator routes reject events destinations.
	p, err := a.Purge(admin.QueueRef{Destination: "/queue/jobs"})
	requireNoError(t, err)
	requireEqual(t, p.Purged, 2, "purged")
	l, err := a.Queues(admin.QueuesOptions{Destination: "/queue/jobs"})
	requireNoError(t, err)
	requireEqual(t, len(l.Queues), 1, "queue kept after purge")
	_, err = a.Browse(admin.QueueRef{Destination: "/topic/x"}, 0)
	requireCode(t, err, admin.CodeUnsupportedPattern, admin.ErrUnsupportedPattern)
	_, err = a.Browse(admin.QueueRef{Destination: "/queue/jobs"}, admin.MaxBrowseLimit+1)
	requireCode(t, err, admin.CodeInvalidParameter, admin.ErrInvalidParameter)
	_, err = a.CloseConnection("nope")
	requireCode(t, err, admin.CodeConnectionNotFound, admin.ErrNotFound)
}
