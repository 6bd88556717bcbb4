package broker_test

import (
	"testing"

	"github.com/titan-broker/titan/internal/admin"
	"github.com/titan-broker/titan/internal/brokertest"
	"github.com/titan-broker/titan/internal/frame"
)

// Queues restored at start-up from the store's one ordered scan are whole queues: each is
// listed by the admin API with its stored message, counts against max-destinations (a
// SEND that would create one more is refused) without being refused itself, and delivers
// its message, redelivered:true, to a subscriber.
func TestRestoredQueuesDeliverAreListedAndCounted(t *testing.T) {
	const queues = 300
	dir := t.TempDir()
	fillQueues(t, dir, queues)
	cfg := durableConfig(dir)
	cfg.Limits.MaxDestinations = 200 // below what is stored: restored queues are never refused
	cfg.Limits.DestinationIdleTimeout = -1
	b, stop := startStop(t, cfg)
	defer stop()

	list, err := b.Admin().Queues(admin.QueuesOptions{})
	if err != nil {
		t.Fatal(err)
	}
	sizes := map[string]int{}
	for _, q := range list.Queues {
		sizes[q.Destination] = q.Size
	}
	for _, d := range []string{"/queue/q0", "/queue/q150", "/queue/q299"} {
		if sizes[d] != 1 {
			t.Errorf("%s listed with size %d (listed: %v), want 1", d, sizes[d], sizes[d] != 0)
		}
	}
	if list.Summary.Queues < queues {
		t.Errorf("%d queues listed, want at least %d", list.Summary.Queues, queues)
	}

	c := brokertest.Connect(t, b.Addrs()[0])
	c.SendFrame("SEND", "new", "destination:/queue/not-stored", "receipt:r1")
	c.Expect(frame.CmdError, "message:destination limit reached")

	s := brokertest.Connect(t, b.Addrs()[0])
	s.SendFrame("SUBSCRIBE", "", "destination:/queue/q150", "id:1")
	m := s.Expect(frame.CmdMessage, "redelivered:true")
	if string(m.Body) != "stored" {
		t.Fatalf("restored message body %q", m.Body)
	}
	s.ExpectQuiet()
}
