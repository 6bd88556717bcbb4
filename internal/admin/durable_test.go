package admin_test

import (
	"context"
	"testing"
	"time"

	"github.com/titan-broker/titan/internal/admin"
	"github.com/titan-broker/titan/internal/broker"
	"github.com/titan-broker/titan/internal/brokertest"
	"github.com/titan-broker/titan/internal/config"
	"github.com/titan-broker/titan/internal/frame"
)

// A persistent message published over HTTP is committed like a SEND's: it survives a restart.
func TestPublishIsDurableForQueues(t *testing.T) {
	dir := t.TempDir()
	pebble := func(c *config.Config) { c.Store.Type, c.Store.DataDir = "pebble", dir }

	b1, a1 := start(t, pebble)
	_, err := a1.Publish(admin.PublishRequest{Destination: "/queue/jobs", Body: ptr("keep")})
	requireNoError(t, err)
	_, err = a1.Publish(admin.PublishRequest{Destination: "/queue/jobs", Body: ptr("lose"), Headers: map[string]string{"persistent": "false"}})
	requireNoError(t, err)
	shutdown(t, b1)

	b2, a2 := start(t, pebble)
	l, err := a2.Queues(admin.QueuesOptions{Destination: "/queue/jobs"})
	requireNoError(t, err)
	requireEqual(t, len(l.Queues), 1, "recovered queues")
	requireEqual(t, l.Queues[0].Size, 1, "recovered messages")
	c := brokertest.Connect(t, b2.Addrs()[0])
	c.SendFrame("SUBSCRIBE", "", "destination:/queue/jobs", "id:s")
	m := c.Expect(frame.CmdMessage)
	requireEqual(t, string(m.Body), "keep", "recovered body")
}

func TestPublishToEventsStoreAppendsToTheLog(t *testing.T) {
	b, a := start(t, func(c *config.Config) { c.Store.Type, c.Store.DataDir = "pebble", t.TempDir() })
	for _, body := range []string{"e1", "e2"} {
		res, err := a.Publish(admin.PublishRequest{Destination: "/store/prices", Body: ptr(body)})
		requireNoError(t, err)
		requireEqual(t, res.Pattern, "events-store", "pattern")
		requireEqual(t, res.Destination, "/events-store/prices", "canonical")
	}
	c := brokertest.Connect(t, b.Addrs()[0])
	c.SendFrame("SUBSCRIBE", "", "destination:/events-store/prices", "id:s", "start-position:first")
	requireEqual(t, string(c.Expect(frame.CmdMessage, "sequence:1").Body), "e1", "first")
	requireEqual(t, string(c.Expect(frame.CmdMessage, "sequence:2").Body), "e2", "second")

	// events-store has a log, not a dispatcher queue.
	_, err := a.CreateQueue(admin.CreateQueueOptions{QueueRef: admin.QueueRef{Destination: "/events-store/prices"}})
	requireCode(t, err, admin.CodeUnsupportedPattern, admin.ErrUnsupportedPattern)
	_, err = a.Publish(admin.PublishRequest{Destination: "/command/x"})
	requireCode(t, err, admin.CodeUnsupportedPattern, admin.ErrUnsupportedPattern)
}

func shutdown(t *testing.T, b *broker.Broker) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	requireNoError(t, b.Shutdown(ctx))
}
