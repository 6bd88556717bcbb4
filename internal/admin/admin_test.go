package admin_test

import (
	"encoding/base64"
	"strings"
	"testing"
	"time"

	"github.com/titan-broker/titan/internal/address"
	"github.com/titan-broker/titan/internal/admin"
	"github.com/titan-broker/titan/internal/brokertest"
	"github.com/titan-broker/titan/internal/config"
	"github.com/titan-broker/titan/internal/dest"
	"github.com/titan-broker/titan/internal/dispatch"
	"github.com/titan-broker/titan/internal/frame"
	"github.com/titan-broker/titan/internal/session"
)

func TestCreateQueueIsIdempotentAndKeepsLimits(t *testing.T) {
	_, a := start(t, nil)
	res, err := a.CreateQueue(admin.CreateQueueOptions{QueueRef: admin.QueueRef{Destination: "/orders"}, MaxPendingBytes: ptr[int64](1 << 20)})
	requireNoError(t, err)
	requireEqual(t, res.Created, true, "created")
	q := res.Queue
	requireEqual(t, q.Destination, "/orders", "destination")
	requireEqual(t, q.Group, "default", "group")
	requireEqual(t, q.Pattern, "events", "pattern")
	requireEqual(t, q.MaxPendingBytes, int64(1<<20), "maxPendingBytes")
	// --max-pending-bytes alone chooses the events queue's limit instead of the 11-message default.
	requireEqual(t, q.Capacity, 0, "capacity")

	res, err = a.CreateQueue(admin.CreateQueueOptions{QueueRef: admin.QueueRef{Destination: "orders"}, MaxPendingBytes: ptr[int64](5), Capacity: ptr(3)})
	requireNoError(t, err)
	requireEqual(t, res.Created, false, "created again")
	requireEqual(t, res.Queue.MaxPendingBytes, int64(1<<20), "maxPendingBytes after a second create")
	requireEqual(t, res.Queue.Capacity, 0, "capacity after a second create")

	// Without limits, a queue gets what traffic would give it.
	res, err = a.CreateQueue(admin.CreateQueueOptions{QueueRef: admin.QueueRef{Destination: "/topic/prices", Group: "market"}})
	requireNoError(t, err)
	requireEqual(t, res.Queue.Capacity, address.DefaultEventsCapacity, "default events capacity")
	res, err = a.CreateQueue(admin.CreateQueueOptions{QueueRef: admin.QueueRef{Destination: "/queue/jobs"}, RingSize: ptr(100)})
	requireNoError(t, err)
	requireEqual(t, res.Queue.RingSize, 100, "ring size")
	requireEqual(t, res.Queue.MaxPendingBytes, int64(address.DefaultMaxPendingBytes), "default queue bytes")
	requireEqual(t, res.Queue.Settings.AddressFullPolicy, "BLOCK", "policy")
}

func TestCreateQueueReportsAddressSettingMatch(t *testing.T) {
	ring := 7
	_, a := start(t, func(c *config.Config) {
		c.AddressSettings = []config.AddressSetting{{Match: "jobs.#", DefaultRingSize: &ring, AddressFullPolicy: "DROP"}}
	})
	res, err := a.CreateQueue(admin.CreateQueueOptions{QueueRef: admin.QueueRef{Destination: "/queue/jobs/eu"}})
	requireNoError(t, err)
	s := res.Queue.Settings
	requireEqual(t, s.Match, "jobs.#", "match")
	requireEqual(t, s.RingSize, 7, "ring size from the match")
	requireEqual(t, s.AddressFullPolicy, "DROP", "policy from the match")
	requireEqual(t, res.Queue.Destination, "/queue/jobs/eu", "canonical destination")
}

func TestQueueInputErrors(t *testing.T) {
	_, a := start(t, nil)
	ref := func(d, g string) admin.QueueRef { return admin.QueueRef{Destination: d, Group: g} }
	for _, tc := range []struct {
		name     string
		run      func() error
		code     string
		sentinel error
		msg      string
	}{
		{"empty segment", func() error {
			_, err := a.CreateQueue(admin.CreateQueueOptions{QueueRef: ref("/queue//x", "")})
			return err
		},
			admin.CodeInvalidDestination, dest.ErrInvalid, "invalid destination"},
		{"wildcard", func() error {
			_, err := a.DeleteQueue(admin.DeleteQueueOptions{QueueRef: ref("/topic/a/*", "")})
			return err
		},
			admin.CodeInvalidDestination, dest.ErrInvalid, "invalid destination"},
		{"too long", func() error { _, err := a.Pause(ref("/"+strings.Repeat("a", 600), "")); return err },
			admin.CodeInvalidDestination, dest.ErrInvalid, "invalid destination"},
		{"missing", func() error { _, err := a.Resume(ref("", "")); return err },
			admin.CodeInvalidParameter, admin.ErrInvalidParameter, "destination is required"},
		{"group", func() error {
			_, err := a.CreateQueue(admin.CreateQueueOptions{QueueRef: ref("/orders", "bad group!")})
			return err
		},
			admin.CodeInvalidGroup, admin.ErrInvalidGroup, "invalid group: names match ^[a-zA-Z0-9_-]{1,64}$"},
		{"pattern", func() error {
			_, err := a.CreateQueue(admin.CreateQueueOptions{QueueRef: ref("/command/x", "")})
			return err
		},
			admin.CodeUnsupportedPattern, admin.ErrUnsupportedPattern, ""},
		{"negative capacity", func() error {
			_, err := a.CreateQueue(admin.CreateQueueOptions{QueueRef: ref("/orders", ""), Capacity: ptr(-1)})
			return err
		}, admin.CodeInvalidParameter, admin.ErrInvalidParameter, ""},
		{"negative bytes", func() error {
			_, err := a.CreateQueue(admin.CreateQueueOptions{QueueRef: ref("/orders", ""), MaxPendingBytes: ptr[int64](-1)})
			return err
		}, admin.CodeInvalidParameter, admin.ErrInvalidParameter, ""},
		{"ring on events", func() error {
			_, err := a.CreateQueue(admin.CreateQueueOptions{QueueRef: ref("/topic/x", ""), RingSize: ptr(5)})
			return err
		}, admin.CodeInvalidParameter, admin.ErrInvalidParameter, ""},
		{"ring below -1", func() error {
			_, err := a.SetRingSize(admin.RingSizeOptions{QueueRef: ref("/queue/x", ""), Size: -2})
			return err
		},
			admin.CodeInvalidParameter, admin.ErrInvalidParameter, ""},
		{"pause absent", func() error { _, err := a.Pause(ref("/queue/none", "")); return err },
			admin.CodeQueueNotFound, dispatch.ErrNoQueue, "no queue /queue/none"},
		{"ring absent", func() error {
			_, err := a.SetRingSize(admin.RingSizeOptions{QueueRef: ref("/queue/none", "g1"), Size: 3})
			return err
		},
			admin.CodeQueueNotFound, dispatch.ErrNoQueue, "no queue /queue/none in group g1"},
		{"delete absent", func() error {
			_, err := a.DeleteQueue(admin.DeleteQueueOptions{QueueRef: ref("/orders", "")})
			return err
		},
			admin.CodeQueueNotFound, dispatch.ErrNoQueue, "no queue /orders"},
		{"list group", func() error { _, err := a.Queues(admin.QueuesOptions{Group: "a b"}); return err },
			admin.CodeInvalidGroup, admin.ErrInvalidGroup, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ae := requireCode(t, tc.run(), tc.code, tc.sentinel)
			if tc.msg != "" {
				requireEqual(t, ae.Message, tc.msg, "message")
			}
			if strings.Contains(ae.Message, "\n") {
				t.Fatalf("message is not one line: %q", ae.Message)
			}
		})
	}
}

func TestDeleteQueueRefusesNonEmptyUnlessForced(t *testing.T) {
	_, a := start(t, nil)
	for range 3 {
		_, err := a.Publish(admin.PublishRequest{Destination: "/queue/jobs", Body: ptr("x")})
		requireNoError(t, err)
	}
	_, err := a.DeleteQueue(admin.DeleteQueueOptions{QueueRef: admin.QueueRef{Destination: "/queue/jobs"}})
	ae := requireCode(t, err, admin.CodeQueueNotEmpty, dispatch.ErrQueueNotEmpty)
	requireEqual(t, ae.Status(), 409, "status")
	requireEqual(t, ae.Message, "queue /queue/jobs is not empty (3 messages); delete with force=true to discard its messages", "message")

	res, err := a.DeleteQueue(admin.DeleteQueueOptions{QueueRef: admin.QueueRef{Destination: "/queues/jobs"}, Force: true})
	requireNoError(t, err)
	requireEqual(t, res.Discarded, 3, "discarded")
	requireEqual(t, res.Destination, "/queue/jobs", "canonical destination")
	l, err := a.Queues(admin.QueuesOptions{})
	requireNoError(t, err)
	requireEqual(t, len(l.Queues), 0, "queues after delete")

	// An empty queue needs no force.
	_, err = a.CreateQueue(admin.CreateQueueOptions{QueueRef: admin.QueueRef{Destination: "/queue/jobs"}})
	requireNoError(t, err)
	res, err = a.DeleteQueue(admin.DeleteQueueOptions{QueueRef: admin.QueueRef{Destination: "/queue/jobs"}})
	requireNoError(t, err)
	requireEqual(t, res.Discarded, 0, "discarded")
}

func TestPauseResumeAndRingSize(t *testing.T) {
	_, a := start(t, nil)
	_, err := a.CreateQueue(admin.CreateQueueOptions{QueueRef: admin.QueueRef{Destination: "/queue/jobs", Group: "market"}})
	requireNoError(t, err)
	ref := admin.QueueRef{Destination: "/queue/jobs", Group: "market"}
	qi, err := a.Pause(ref)
	requireNoError(t, err)
	requireEqual(t, qi.Paused, true, "paused")
	qi, err = a.Pause(ref)
	requireNoError(t, err)
	requireEqual(t, qi.Paused, true, "paused twice")
	// The same destination in the default group is another queue.
	_, err = a.Pause(admin.QueueRef{Destination: "/queue/jobs"})
	requireCode(t, err, admin.CodeQueueNotFound, dispatch.ErrNoQueue)
	qi, err = a.Resume(ref)
	requireNoError(t, err)
	requireEqual(t, qi.Paused, false, "resumed")

	qi, err = a.SetRingSize(admin.RingSizeOptions{QueueRef: ref, Size: 2})
	requireNoError(t, err)
	requireEqual(t, qi.RingSize, 2, "ring size")
	requireEqual(t, qi.Settings.RingSize, 2, "settings ring size")
	for range 5 {
		_, err := a.Publish(admin.PublishRequest{Destination: "/queue/jobs", Group: "market", Body: ptr("x")})
		requireNoError(t, err)
	}
	l, err := a.Queues(admin.QueuesOptions{Group: "market", Destination: "/queue/jobs"})
	requireNoError(t, err)
	requireEqual(t, len(l.Queues), 1, "filtered queues")
	requireEqual(t, l.Queues[0].Size, 2, "ring keeps 2")
	requireEqual(t, l.Queues[0].RingRemoved, uint64(3), "ring removed")
	requireEqual(t, l.Queues[0].Enqueued, uint64(5), "enqueued")
}

func TestSnapshotSummaryCountsGroupsHoldingQueues(t *testing.T) {
	b, a := start(t, nil)
	c := brokertest.Connect(t, b.Addrs()[0])
	_, err := a.CreateQueue(admin.CreateQueueOptions{QueueRef: admin.QueueRef{Destination: "/orders"}})
	requireNoError(t, err)
	_, err = a.CreateQueue(admin.CreateQueueOptions{QueueRef: admin.QueueRef{Destination: "/orders", Group: "market"}})
	requireNoError(t, err)
	_, err = a.CreateQueue(admin.CreateQueueOptions{QueueRef: admin.QueueRef{Destination: "/queue/jobs", Group: "market"}})
	requireNoError(t, err)
	// A SEND to an events destination without fanout-mode names a group but creates no queue.
	c.SendFrame("SEND", "hi", "destination:/topic/x", "group:lonely", "receipt:r1")
	c.Expect(frame.CmdReceipt, "receipt-id:r1")

	s, err := a.Snapshot(admin.SnapshotOptions{})
	requireNoError(t, err)
	requireEqual(t, s.Summary.Text, "3 queues in 2 groups", "summary")
	requireEqual(t, s.Summary.Queues, 3, "queues")
	requireEqual(t, s.Summary.Groups, 2, "groups")
	requireEqual(t, s.Server.Version, "0.1.0", "version")
	if s.Server.StartTime.IsZero() || s.Server.UptimeSeconds < 0 || s.Server.Uptime == "" {
		t.Fatalf("server info %+v", s.Server)
	}
	if s.Runtime.Goroutines == 0 || s.Runtime.HeapBytes == 0 || s.Runtime.TotalBytes == 0 {
		t.Fatalf("runtime info %+v", s.Runtime)
	}
	requireEqual(t, len(s.Connections), 1, "connections")
	conn := s.Connections[0]
	requireEqual(t, conn.RemoteAddr, c.Conn.LocalAddr().String(), "remote addr")
	requireEqual(t, conn.Version, "1.2", "version")
	if !strings.HasPrefix(conn.ID, "titan-") || conn.QueuedBytes < 0 {
		t.Fatalf("connection %+v", conn)
	}
	requireEqual(t, s.Counters.Published, uint64(1), "published")
	requireEqual(t, s.Counters.EventsNoSubscriber, uint64(1), "no subscriber")
	requireEqual(t, s.Counters.ConnectionsAccepted, uint64(1), "accepted")
	requireEqual(t, len(s.Counters.ConnectionsClosed), len(session.AllCloseReasons()), "close reasons")
	requireEqual(t, s.Queues[0].Group, "default", "sorted by group")

	requireEqual(t, admin.SummaryText(1, 1), "1 queue in 1 group", "singular")
	requireEqual(t, admin.SummaryText(0, 0), "0 queues in 0 groups", "zero")
}

func TestPublishMapsHeadersLikeSend(t *testing.T) {
	b, a := start(t, nil)
	c := brokertest.Connect(t, b.Addrs()[0])
	c.SendFrame("SUBSCRIBE", "", "destination:/queue/jobs", "id:s1", "receipt:r1")
	c.Expect(frame.CmdReceipt, "receipt-id:r1")

	res, err := a.Publish(admin.PublishRequest{
		Destination: "/queues/jobs",
		Headers: map[string]string{
			"content-type":     "text/plain",
			"x-trace":          "abc",
			"destination":      "/queue/evil", // machinery: never a message header
			"stomp.priority":   "9",           // reserved: stripped (spoofing guard)
			"x-titan-metadata": "spoof",
			"reply-to":         "/queue/replies",
		},
		Metadata: map[string]string{"stomp.content-type": "application/json", "tenant": "t1", "stomp.unknown": "u"},
		Body:     ptr(`{"id":42}`),
	})
	requireNoError(t, err)
	requireEqual(t, res.Destination, "/queue/jobs", "canonical")
	requireEqual(t, res.Pattern, "queues", "pattern")
	requireEqual(t, res.BodyBytes, 9, "body bytes")

	f := c.Expect(frame.CmdMessage, "destination:/queue/jobs", "subscription:s1",
		"content-type:application/json", "x-trace:abc", "reply-to:/queue/replies",
		"message-id:"+res.MessageID, `x-titan-metadata:{"stomp.unknown":"u","tenant":"t1"}`)
	requireEqual(t, string(f.Body), `{"id":42}`, "body")
	n := 0
	for _, h := range f.Headers {
		switch h.Key {
		case "content-type":
			n++
		case "stomp.priority", "priority":
			t.Fatalf("reserved header leaked: %v", h)
		}
	}
	requireEqual(t, n, 1, "content-type headers")

	bin := []byte{0, 1, 2, 255}
	_, err = a.Publish(admin.PublishRequest{Destination: "/queue/jobs", BodyBase64: ptr(base64.StdEncoding.EncodeToString(bin))})
	requireNoError(t, err)
	f = c.Expect(frame.CmdMessage, "content-length:4")
	requireEqual(t, string(f.Body), string(bin), "binary body")

	// A group publish reaches only that group's subscribers and says so on MESSAGE.
	c.SendFrame("SUBSCRIBE", "", "destination:/queue/jobs", "id:s2", "group:market", "receipt:r2")
	c.Expect(frame.CmdReceipt, "receipt-id:r2")
	_, err = a.Publish(admin.PublishRequest{Destination: "/queue/jobs", Group: "market", Body: ptr("m")})
	requireNoError(t, err)
	c.Expect(frame.CmdMessage, "subscription:s2", "group:market")
}

func TestPublishErrors(t *testing.T) {
	_, a := start(t, func(c *config.Config) { c.Servers[0].ProtocolOptions.MaxBodyLength = 8 })
	_, err := a.Publish(admin.PublishRequest{Destination: "/queue/x", Body: ptr("a"), BodyBase64: ptr("YQ==")})
	requireCode(t, err, admin.CodeInvalidParameter, admin.ErrInvalidParameter)
	_, err = a.Publish(admin.PublishRequest{Destination: "/queue/x", BodyBase64: ptr("***")})
	requireCode(t, err, admin.CodeInvalidParameter, admin.ErrInvalidParameter)
	_, err = a.Publish(admin.PublishRequest{Destination: "/queue/x", Body: ptr("123456789")})
	requireCode(t, err, admin.CodeTooLarge, admin.ErrTooLarge)
	_, err = a.Publish(admin.PublishRequest{Destination: "/queue/x", Headers: map[string]string{"a:b": "c"}})
	requireCode(t, err, admin.CodeInvalidParameter, admin.ErrInvalidParameter)
	_, err = a.Publish(admin.PublishRequest{Destination: "/queue/x", Headers: map[string]string{"expires": "soon"}})
	requireCode(t, err, admin.CodeInvalidParameter, admin.ErrInvalidParameter)
	_, err = a.Publish(admin.PublishRequest{Destination: "/queue/x", Headers: map[string]string{"delay": "-1"}})
	requireCode(t, err, admin.CodeInvalidParameter, admin.ErrInvalidParameter)
	_, err = a.Publish(admin.PublishRequest{Destination: "/queue/a//b"})
	requireCode(t, err, admin.CodeInvalidDestination, dest.ErrInvalid)
	_, err = a.Publish(admin.PublishRequest{Destination: "/query/x"})
	requireCode(t, err, admin.CodeUnsupportedPattern, admin.ErrUnsupportedPattern)

}

func TestPublishDropPolicyAndDelay(t *testing.T) {
	_, a := start(t, func(c *config.Config) {
		c.AddressSettings = []config.AddressSetting{{Match: "drop.#", AddressFullPolicy: "DROP"}, {Match: "fail.#", AddressFullPolicy: "FAIL"}}
	})
	for _, d := range []string{"/queue/drop/x", "/queue/fail/x"} {
		_, err := a.CreateQueue(admin.CreateQueueOptions{QueueRef: admin.QueueRef{Destination: d}, Capacity: ptr(1)})
		requireNoError(t, err)
		_, err = a.Publish(admin.PublishRequest{Destination: d, Body: ptr("1")})
		requireNoError(t, err)
	}
	res, err := a.Publish(admin.PublishRequest{Destination: "/queue/drop/x", Body: ptr("2")})
	requireNoError(t, err)
	requireEqual(t, res.Dropped, true, "dropped")
	_, err = a.Publish(admin.PublishRequest{Destination: "/queue/fail/x", Body: ptr("2")})
	ae := requireCode(t, err, admin.CodeQueueFull, dispatch.ErrQueueFull)
	requireEqual(t, ae.Status(), 503, "status")

	_, err = a.Publish(admin.PublishRequest{Destination: "/queue/later", Headers: map[string]string{"delay": "60000"}, Body: ptr("x")})
	requireNoError(t, err)
	l, err := a.Queues(admin.QueuesOptions{Destination: "/queue/later"})
	requireNoError(t, err)
	requireEqual(t, l.Queues[0].Scheduled, 1, "scheduled")
}

func TestSnapshotConnectionGoesAway(t *testing.T) {
	b, a := start(t, nil)
	c := brokertest.Connect(t, b.Addrs()[0])
	s, err := a.Snapshot(admin.SnapshotOptions{})
	requireNoError(t, err)
	requireEqual(t, len(s.Connections), 1, "connections")
	c.SendFrame("DISCONNECT", "", "receipt:bye")
	c.Expect(frame.CmdReceipt)
	eventually(t, 5*time.Second, func() bool {
		s, err = a.Snapshot(admin.SnapshotOptions{})
		requireNoError(t, err)
		return len(s.Connections) == 0 && s.Counters.ConnectionsClosed["client_disconnect"] == 1
	})
}
