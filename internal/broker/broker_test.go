package broker_test

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/titan-broker/titan/internal/brokertest"
	"github.com/titan-broker/titan/internal/config"
	"github.com/titan-broker/titan/internal/dest"
	"github.com/titan-broker/titan/internal/frame"
)

func dispatchIdentity(channel string) dest.Identity {
	return dest.Identity{Group: "default", Pattern: dest.PatternQueues, Channel: channel}
}

func start(t *testing.T, mutate ...func(*config.Config)) string {
	t.Helper()
	cfg := brokertest.DefaultTestConfig()
	for _, m := range mutate {
		m(&cfg)
	}
	b := brokertest.Run(t, cfg)
	return b.Addrs()[0]
}

func TestTopicFanOutToEveryExactSubscriber(t *testing.T) {
	brokertest.ForEachSetup(t, func(t *testing.T, s brokertest.Setup) {
		addr := s.Start(t)
		var subs []*brokertest.Client
		for i := range 3 {
			c := s.Connect(t, addr)
			c.SendFrame("SUBSCRIBE", "", "destination:/topic/orders", "id:s"+strconv.Itoa(i), "receipt:r")
			c.Expect(frame.CmdReceipt, "receipt-id:r")
			subs = append(subs, c)
		}
		other := s.Connect(t, addr)
		other.SendFrame("SUBSCRIBE", "", "destination:/topic/orders/created", "id:x", "receipt:r")
		other.Expect(frame.CmdReceipt)
		p := s.Connect(t, addr)
		p.SendFrame("SEND", "hello", "destination:/topic/orders", "receipt:p1")
		p.Expect(frame.CmdReceipt, "receipt-id:p1")
		for i, c := range subs {
			m := c.Expect(frame.CmdMessage, "destination:/topic/orders", "subscription:s"+strconv.Itoa(i), "content-length:5")
			if string(m.Body) != "hello" {
				t.Fatalf("body %q", m.Body)
			}
		}
		other.ExpectQuiet() // /topic/orders never reaches /topic/orders/created (fan-out ran before p1's RECEIPT)
	})
}

func TestQueueRedeliversOnNackAndDisconnect(t *testing.T) {
	brokertest.ForEachSetup(t, func(t *testing.T, s brokertest.Setup) {
		addr := s.Start(t)
		a := s.Connect(t, addr)
		a.SendFrame("SUBSCRIBE", "", "destination:/queue/jobs", "id:a", "ack:client-individual", "receipt:r")
		a.Expect(frame.CmdReceipt)
		p := s.Connect(t, addr)
		p.SendFrame("SEND", "job1", "destination:/queue/jobs", "receipt:1")
		p.Expect(frame.CmdReceipt)
		m := a.Expect(frame.CmdMessage, "subscription:a")
		if _, ok := m.Get("redelivered"); ok {
			t.Fatal("first delivery marked redelivered")
		}
		a.SendFrame("NACK", "", "id:"+m.Value("ack"))
		m2 := a.Expect(frame.CmdMessage, "redelivered:true", "delivery-count:2")
		if m2.Value("message-id") != m.Value("message-id") {
			t.Fatal("redelivery changed message-id")
		}
		// Abrupt disconnect with the message unacknowledged: a second subscriber gets it.
		b := s.Connect(t, addr)
		b.SendFrame("SUBSCRIBE", "", "destination:/queue/jobs", "id:b", "ack:client", "receipt:r")
		b.Expect(frame.CmdReceipt)
		_ = a.Conn.Close()
		m3 := b.Expect(frame.CmdMessage, "redelivered:true", "subscription:b")
		if string(m3.Body) != "job1" {
			t.Fatalf("body %q", m3.Body)
		}
		b.SendFrame("ACK", "", "id:"+m3.Value("ack"), "receipt:ack")
		b.Expect(frame.CmdReceipt, "receipt-id:ack")
		b.SendFrame("ACK", "", "id:"+m3.Value("ack"), "receipt:again")
		b.Expect(frame.CmdError, "message:unknown ack id", "receipt-id:again")
	})
}

func TestQueueRoundRobinAndPrefetch(t *testing.T) {
	brokertest.ForEachSetup(t, func(t *testing.T, s brokertest.Setup) {
		addr := s.Start(t)
		a := s.Connect(t, addr)
		a.SendFrame("SUBSCRIBE", "", "destination:/queue/w", "id:a", "ack:client", "prefetch-count:2", "receipt:r")
		a.Expect(frame.CmdReceipt)
		p := s.Connect(t, addr)
		for i := range 5 {
			p.SendFrame("SEND", strconv.Itoa(i), "destination:/queue/w")
		}
		p.SendFrame("SEND", "x", "destination:/queue/other", "receipt:done")
		p.Expect(frame.CmdReceipt)
		a.Expect(frame.CmdMessage)
		m := a.Expect(frame.CmdMessage)
		a.ExpectQuiet()                              // prefetch 2 honoured (dispatch ran before "done"'s RECEIPT)
		a.SendFrame("ACK", "", "id:"+m.Value("ack")) // cumulative: frees both
		got := []string{string(a.Expect(frame.CmdMessage).Body), string(a.Expect(frame.CmdMessage).Body)}
		if got[0] != "2" || got[1] != "3" {
			t.Fatalf("FIFO broken: %v", got)
		}
	})
}

func TestGroupsIsolateDestinations(t *testing.T) {
	addr := start(t)
	m := brokertest.Connect(t, addr)
	m.SendFrame("SUBSCRIBE", "", "destination:/topic/orders", "id:m", "group:market", "receipt:r")
	m.Expect(frame.CmdReceipt)
	d := brokertest.Connect(t, addr)
	d.SendFrame("SUBSCRIBE", "", "destination:/topic/orders", "id:d", "receipt:r")
	d.Expect(frame.CmdReceipt)
	p := brokertest.Connect(t, addr)
	p.SendFrame("SEND", "to-market", "destination:/topic/orders", "group:market")
	p.SendFrame("SEND", "to-default", "destination:/topic/orders", "receipt:r")
	p.Expect(frame.CmdReceipt)
	mm := m.Expect(frame.CmdMessage, "group:market")
	if string(mm.Body) != "to-market" {
		t.Fatalf("market got %q", mm.Body)
	}
	dm := d.Expect(frame.CmdMessage)
	if string(dm.Body) != "to-default" {
		t.Fatalf("default got %q", dm.Body)
	}
	if _, ok := dm.Get("group"); ok {
		t.Fatal("default-group MESSAGE carries a group header")
	}
	p.SendFrame("SEND", "x", "destination:/topic/orders", "group:bad/name", "receipt:g")
	p.Expect(frame.CmdError, "message:invalid group", "receipt-id:g")
	p.ExpectClosed(2 * time.Second)
}

func TestServerHeadersCannotBeSpoofed(t *testing.T) {
	addr := start(t)
	c := brokertest.Connect(t, addr)
	c.SendFrame("SUBSCRIBE", "", "destination:/queue/s", "id:real", "ack:client-individual", "receipt:r")
	c.Expect(frame.CmdReceipt)
	c.SendFrame("SEND", "b", "destination:/queue/s", "subscription:fake", "message-id:fake", "ack:fake",
		"content-length:1", "redelivered:true", "destination:/queue/evil")
	m := c.Expect(frame.CmdMessage, "subscription:real", "destination:/queue/s", "content-length:1")
	if m.Value("message-id") == "fake" || m.Value("ack") == "fake" {
		t.Fatalf("spoofed header survived: %s", m)
	}
	if _, ok := m.Get("redelivered"); ok {
		t.Fatal("spoofed redelivered header survived")
	}
}

func TestFanoutModeDropsMessagesWithoutSubscribers(t *testing.T) {
	addr := start(t, func(c *config.Config) { c.Servers[0].ProtocolOptions.FanoutMode = "virtual" })
	p := brokertest.Connect(t, addr)
	p.SendFrame("SEND", "early", "destination:/orders", "receipt:1")
	p.Expect(frame.CmdReceipt)
	s := brokertest.Connect(t, addr)
	s.SendFrame("SUBSCRIBE", "", "destination:/orders", "id:1", "receipt:r")
	s.Expect(frame.CmdReceipt)
	s.ExpectQuiet() // nothing is retained for a later subscriber; the FIFO check below starts at "0" too
	for i := range 50 {
		p.SendFrame("SEND", strconv.Itoa(i), "destination:/orders")
	}
	for i := range 50 {
		if m := s.Expect(frame.CmdMessage, "destination:/orders"); string(m.Body) != strconv.Itoa(i) {
			t.Fatalf("FIFO broken at %d: %q", i, m.Body)
		}
	}
}

func TestHeartBeatNegotiationAndSilentClientDropped(t *testing.T) {
	addr := start(t, func(c *config.Config) {
		hb := 200
		c.Servers[0].ProtocolOptions.HeartbeatX = &hb
		c.Servers[0].ProtocolOptions.HeartbeatY = &hb
		floor := 50
		c.Servers[0].ProtocolOptions.HeartbeatMin = &floor
	})
	c := brokertest.Dial(t, addr)
	c.Send("CONNECT\naccept-version:1.2\nhost:h\nheart-beat:200,300\n\n\x00")
	c.Expect(frame.CmdConnected, "version:1.2", "heart-beat:300,200")
	// The broker offers what we asked (above its 50 ms floor) and beats every 300 ms; we
	// stay silent and must be dropped after 2 × 200 ms.
	start := time.Now()
	c.ExpectClosed(3 * time.Second)
	if el := time.Since(start); el < 300*time.Millisecond {
		t.Fatalf("dropped after %v, before the grace period", el)
	}
}

func TestDelayedAndExpiredMessages(t *testing.T) {
	addr := start(t)
	c := brokertest.Connect(t, addr)
	c.SendFrame("SUBSCRIBE", "", "destination:/queue/d", "id:1", "receipt:r")
	c.Expect(frame.CmdReceipt)
	past := strconv.FormatInt(time.Now().Add(-time.Second).UnixMilli(), 10)
	c.SendFrame("SEND", "expired", "destination:/queue/d", "expires:"+past)
	c.SendFrame("SEND", "later", "destination:/queue/d", "delay:300")
	sent := time.Now()
	c.SendFrame("SEND", "now", "destination:/queue/d")
	if m := c.Expect(frame.CmdMessage); string(m.Body) != "now" {
		t.Fatalf("got %q first", m.Body)
	}
	m := c.Expect(frame.CmdMessage)
	if string(m.Body) != "later" || time.Since(sent) < 250*time.Millisecond {
		t.Fatalf("delayed message %q after %v", m.Body, time.Since(sent))
	}
	c.ExpectQuiet()
}

func TestDeadLetterAfterMaxDeliveries(t *testing.T) {
	md := 2
	addr := start(t, func(c *config.Config) {
		c.AddressSettings = []config.AddressSetting{{Match: "#", MaxDeliveries: &md}}
	})
	c := brokertest.Connect(t, addr)
	c.SendFrame("SUBSCRIBE", "", "destination:/queue/DLQ.poison", "id:dlq", "receipt:r")
	c.Expect(frame.CmdReceipt)
	c.SendFrame("SUBSCRIBE", "", "destination:/queue/poison", "id:p", "ack:client-individual", "receipt:r")
	c.Expect(frame.CmdReceipt)
	c.SendFrame("SEND", "bad", "destination:/queue/poison")
	for range md {
		m := c.Expect(frame.CmdMessage, "subscription:p")
		c.SendFrame("NACK", "", "id:"+m.Value("ack"))
	}
	dl := c.Expect(frame.CmdMessage, "subscription:dlq", "destination:/queue/DLQ/poison",
		"dlq-original-destination:/queue/poison", "dlq-reason:max-deliveries", "dlq-delivery-count:2")
	if string(dl.Body) != "bad" {
		t.Fatalf("dead letter body %q", dl.Body)
	}
	c.ExpectQuiet()
}

func TestEgressDropsHeadersAVersionCannotCarry(t *testing.T) {
	b := brokertest.Run(t, brokertest.DefaultTestConfig())
	addr := b.Addrs()[0]
	old := brokertest.Dial(t, addr)
	old.Send("CONNECT\nlogin:x\n\n\x00") // no accept-version: STOMP 1.0
	old.Expect(frame.CmdConnected)
	old.SendFrame("SUBSCRIBE", "", "destination:/topic/v", "receipt:r")
	old.Expect(frame.CmdReceipt)
	p := brokertest.Connect(t, addr) // 1.2: may escape a newline in a value
	p.Send("SEND\ndestination:/topic/v\nx-multi:line1\\nline2\nx-ok:fine\n\nbody\x00")
	m := old.Expect(frame.CmdMessage, "x-ok:fine")
	if _, ok := m.Get("x-multi"); ok {
		t.Fatal("1.0 MESSAGE carries a header it cannot represent")
	}
	if string(m.Body) != "body" || b.Engine().EgressHeadersDropped.Load() != 1 {
		t.Fatalf("body %q dropped %d", m.Body, b.Engine().EgressHeadersDropped.Load())
	}
}

func TestBareAndPrefixedDestinationsAreDifferentIdentities(t *testing.T) {
	addr := start(t)
	c := brokertest.Connect(t, addr)
	c.SendFrame("SUBSCRIBE", "", "destination:/topic/p/*", "id:topic-wild", "receipt:1")
	c.Expect(frame.CmdReceipt)
	c.SendFrame("SUBSCRIBE", "", "destination:/p/*", "id:bare-wild", "receipt:2")
	c.Expect(frame.CmdReceipt)
	c.SendFrame("SEND", "bare", "destination:/p/eu")
	c.Expect(frame.CmdMessage, "subscription:bare-wild", "destination:/p/eu")
	c.SendFrame("SEND", "prefixed", "destination:/topic/p/eu")
	c.Expect(frame.CmdMessage, "subscription:topic-wild", "destination:/topic/p/eu")
	c.ExpectQuiet()
}

func TestPausedQueueSaysPaused(t *testing.T) {
	cfg := brokertest.DefaultTestConfig()
	cfg.AddressSettings = []config.AddressSetting{{Match: "#", AddressFullPolicy: "FAIL"}}
	b := brokertest.Run(t, cfg)
	p := brokertest.Connect(t, b.Addrs()[0])
	p.SendFrame("SEND", "1", "destination:/queue/held", "receipt:1")
	p.Expect(frame.CmdReceipt)
	q, _ := b.Engine().Lookup(dispatchIdentity("held"))
	if err := b.Engine().SetPaused(q.Identity(), true); err != nil {
		t.Fatal(err)
	}
	p.SendFrame("SEND", "2", "destination:/queue/held", "receipt:2")
	p.Expect(frame.CmdError, "message:queue paused", "receipt-id:2")
}

func TestCommitReplaysEveryKindOfSend(t *testing.T) {
	brokertest.ForEachSetup(t, func(t *testing.T, s brokertest.Setup) {
		addr := s.Start(t)
		c := s.Connect(t, addr)
		c.SendFrame("SUBSCRIBE", "", "destination:/temp-queue/r", "id:r", "receipt:s")
		c.Expect(frame.CmdReceipt)
		c.SendFrame("BEGIN", "", "transaction:t")
		c.SendFrame("SEND", "logged", "destination:/events-store/txlog", "transaction:t")
		c.SendFrame("SEND", "", "destination:/command/nobody", "reply-to:/temp-queue/r", "correlation-id:c1", "transaction:t")
		c.SendFrame("COMMIT", "", "transaction:t", "receipt:commit")
		got := map[frame.Command]*frame.Frame{}
		for range 2 { // the broker's answer and the RECEIPT, in either order
			f, err := c.Read(5 * time.Second)
			if err != nil {
				t.Fatal(err)
			}
			got[f.Command] = f
		}
		if got[frame.CmdReceipt] == nil || got[frame.CmdMessage] == nil || got[frame.CmdMessage].Value("error") != "no responder" {
			t.Fatalf("after COMMIT: %v", got)
		}
		c.SendFrame("SUBSCRIBE", "", "destination:/events-store/txlog", "id:log", "start-position:first")
		if m := c.Expect(frame.CmdMessage, "subscription:log", "sequence:1"); string(m.Body) != "logged" {
			t.Fatalf("events-store body %q", m.Body)
		}
	})
}

func TestUnreadAnswersStopTheBrokerReading(t *testing.T) {
	b := brokertest.Run(t, func() config.Config {
		c := brokertest.DefaultTestConfig()
		c.Servers[0].ProtocolOptions.MaxOutboundBytes = 64 << 10
		return c
	}())
	c := brokertest.Connect(t, b.Addrs()[0])
	// Ask for 2,000 RECEIPTs of ~8 KiB each and never read them: without read-side
	// back-pressure the broker would queue ~16 MiB for this connection.
	frameText := "SEND\ndestination:/topic/void\nreceipt:" + strings.Repeat("r", 8000) + "\n\n\x00"
	go func() {
		for range 2000 {
			if _, err := c.Conn.Write([]byte(frameText)); err != nil {
				return
			}
		}
	}()
	var peak int64
	deadline := time.Now().Add(2 * time.Second)
	for time.Now().Before(deadline) {
		for _, s := range b.Sessions() {
			peak = max(peak, s.QueuedBytes())
		}
		time.Sleep(5 * time.Millisecond)
	}
	if peak > 64<<10+16<<10 {
		t.Fatalf("queued %d bytes for a client that reads nothing (limit 64 KiB)", peak)
	}
}
