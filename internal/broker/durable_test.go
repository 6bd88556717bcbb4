package broker_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/titan-broker/titan/internal/address"
	"github.com/titan-broker/titan/internal/broker"
	"github.com/titan-broker/titan/internal/brokertest"
	"github.com/titan-broker/titan/internal/config"
	"github.com/titan-broker/titan/internal/dest"
	"github.com/titan-broker/titan/internal/frame"
	"github.com/titan-broker/titan/internal/testwait"
)

func durableConfig(dir string) config.Config {
	c := brokertest.DefaultTestConfig()
	c.Store = config.Store{Type: "pebble", DataDir: dir}
	return c
}

func startStop(t *testing.T, cfg config.Config) (*broker.Broker, func()) {
	t.Helper()
	b, err := broker.New(cfg, broker.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Start(); err != nil {
		t.Fatal(err)
	}
	return b, func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := b.Shutdown(ctx); err != nil {
			t.Fatal(err)
		}
	}
}

func TestQueueMessagesSurviveRestart(t *testing.T) {
	dir := t.TempDir()
	b, stop := startStop(t, durableConfig(dir))
	p := brokertest.Connect(t, b.Addrs()[0])
	for i := range 10 {
		p.SendFrame("SEND", "m"+strconv.Itoa(i), "destination:/queue/durable", "receipt:"+strconv.Itoa(i))
		p.Expect(frame.CmdReceipt, "receipt-id:"+strconv.Itoa(i))
	}
	p.SendFrame("SEND", "scheduled", "destination:/queue/later", "delay:400", "receipt:s")
	p.Expect(frame.CmdReceipt)
	// Consume and acknowledge the first three; leave the rest.
	c := brokertest.Connect(t, b.Addrs()[0])
	c.SendFrame("SUBSCRIBE", "", "destination:/queue/durable", "id:1", "ack:client-individual", "prefetch-count:3")
	for range 3 {
		m := c.Expect(frame.CmdMessage)
		c.SendFrame("ACK", "", "id:"+m.Value("ack"))
	}
	c.SendFrame("DISCONNECT", "", "receipt:bye")
	for { // unacknowledged deliveries that raced the DISCONNECT go back to the queue
		f, err := c.Read(5 * time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if f.Command == frame.CmdReceipt {
			break
		}
	}
	stop()

	b2, stop2 := startStop(t, durableConfig(dir))
	defer stop2()
	c2 := brokertest.Connect(t, b2.Addrs()[0])
	c2.SendFrame("SUBSCRIBE", "", "destination:/queue/durable", "id:1")
	for i := 3; i < 10; i++ {
		m := c2.Expect(frame.CmdMessage, "redelivered:true")
		if string(m.Body) != "m"+strconv.Itoa(i) {
			t.Fatalf("after restart got %q, want m%d", m.Body, i)
		}
	}
	c2.ExpectQuiet() // the SUBSCRIBE dispatched every restored message
	c2.SendFrame("SUBSCRIBE", "", "destination:/queue/later", "id:2")
	m := c2.Expect(frame.CmdMessage)
	if string(m.Body) != "scheduled" {
		t.Fatalf("scheduled message: %q", m.Body)
	}
}

func TestRingQueueContentAndSizeSurviveRestart(t *testing.T) {
	dir := t.TempDir()
	b, stop := startStop(t, durableConfig(dir))
	id := dest.Identity{Group: "default", Pattern: dest.PatternQueues, Channel: "prices"}
	b.Engine().Create(id, address.Settings{RingSize: 3})
	p := brokertest.Connect(t, b.Addrs()[0])
	for _, body := range []string{"A", "B", "C", "D", "E"} {
		p.SendFrame("SEND", body, "destination:/queue/prices", "receipt:"+body)
		p.Expect(frame.CmdReceipt)
	}
	testwait.Eventually(t, 5*time.Second, `streamCount(t, b, "queue/default/p/prices") == 3`, func() bool { return streamCount(t, b, "queue/default/p/prices") == 3 }) // ring removals leave the store too
	stop()

	b2, stop2 := startStop(t, durableConfig(dir))
	defer stop2()
	q, ok := b2.Engine().Lookup(id)
	if !ok || q.Stats().Settings.RingSize != 3 || q.Stats().Messages != 3 {
		t.Fatalf("after restart: found %v stats %+v", ok, q.Stats())
	}
	c := brokertest.Connect(t, b2.Addrs()[0])
	c.SendFrame("SUBSCRIBE", "", "destination:/queue/prices", "id:1")
	for _, want := range []string{"C", "D", "E"} {
		if m := c.Expect(frame.CmdMessage); string(m.Body) != want {
			t.Fatalf("got %q, want %q", m.Body, want)
		}
	}
}

func streamCount(t *testing.T, b *broker.Broker, name string) int64 {
	t.Helper()
	streams, err := b.Durable().Store().Streams()
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range streams {
		if s.Name == name {
			return s.Count
		}
	}
	return 0
}
