package broker_test

import (
	"strconv"
	"testing"

	"github.com/titan-broker/titan/internal/brokertest"
	"github.com/titan-broker/titan/internal/frame"
)

func sendN(t *testing.T, c *brokertest.Client, dest string, from, to int) {
	t.Helper()
	for i := from; i <= to; i++ {
		c.SendFrame("SEND", "e"+strconv.Itoa(i), "destination:"+dest, "receipt:"+strconv.Itoa(i))
		c.Expect(frame.CmdReceipt)
	}
}

func expectSeqs(t *testing.T, c *brokertest.Client, sub string, seqs ...int) []*frame.Frame {
	t.Helper()
	var out []*frame.Frame
	for _, s := range seqs {
		m := c.Expect(frame.CmdMessage, "subscription:"+sub, "sequence:"+strconv.Itoa(s))
		if string(m.Body) != "e"+strconv.Itoa(s) {
			t.Fatalf("sequence %d carries %q", s, m.Body)
		}
		out = append(out, m)
	}
	return out
}

func TestEventsStoreStartPositions(t *testing.T) {
	brokertest.ForEachSetup(t, func(t *testing.T, s brokertest.Setup) {
		addr := s.Start(t)
		p := s.Connect(t, addr)
		sendN(t, p, "/events-store/prices", 1, 5)
		c := s.Connect(t, addr)
		c.SendFrame("SUBSCRIBE", "", "destination:/events-store/prices", "id:first", "start-position:first")
		expectSeqs(t, c, "first", 1, 2, 3, 4, 5)
		c.SendFrame("SUBSCRIBE", "", "destination:/store/prices", "id:last", "start-position:last")
		m := expectSeqs(t, c, "last", 5)[0]
		if m.Value("destination") != "/events-store/prices" {
			t.Fatalf("alias subscriber sees %q, want the primary prefix", m.Value("destination"))
		}
		c.SendFrame("SUBSCRIBE", "", "destination:/events-store/prices", "id:three", "start-position:3")
		expectSeqs(t, c, "three", 3, 4, 5)
		c.SendFrame("SUBSCRIBE", "", "destination:/events-store/prices", "id:delta", "start-position:delta:1h")
		expectSeqs(t, c, "delta", 1, 2, 3, 4, 5)
		c.SendFrame("SUBSCRIBE", "", "destination:/events-store/prices", "id:new", "receipt:new")
		c.Expect(frame.CmdReceipt)
		c.ExpectQuiet() // start-position new: nothing old (and sequence 6 below must come first)
		sendN(t, p, "/events-store/prices", 6, 6)
		got := map[string]bool{}
		for range 5 { // the live tail reaches every subscription
			m := c.Expect(frame.CmdMessage, "sequence:6")
			got[m.Value("subscription")] = true
		}
		if len(got) != 5 {
			t.Fatalf("live tail reached %v", got)
		}
		c.SendFrame("SUBSCRIBE", "", "destination:/events-store/prices/*", "id:w", "receipt:w")
		c.Expect(frame.CmdError, "message:invalid destination", "receipt-id:w")
	})
}

func TestEventsStoreDurableSubscriptionSurvivesRestart(t *testing.T) {
	dir := t.TempDir()
	b, stop := startStop(t, durableConfig(dir))
	p := brokertest.Connect(t, b.Addrs()[0])
	sendN(t, p, "/events-store/audit", 1, 5)
	c := brokertest.Connect(t, b.Addrs()[0])
	c.SendFrame("SUBSCRIBE", "", "destination:/events-store/audit", "id:a", "ack:client-individual",
		"durable-name:auditor", "start-position:first")
	ms := expectSeqs(t, c, "a", 1, 2, 3, 4, 5)
	for _, m := range ms[:2] {
		c.SendFrame("ACK", "", "id:"+m.Value("ack"))
	}
	c.SendFrame("DISCONNECT", "", "receipt:bye")
	c.Expect(frame.CmdReceipt)
	stop()

	b2, stop2 := startStop(t, durableConfig(dir))
	defer stop2()
	p2 := brokertest.Connect(t, b2.Addrs()[0])
	sendN(t, p2, "/events-store/audit", 6, 6) // sequences continue across the restart
	c2 := brokertest.Connect(t, b2.Addrs()[0])
	c2.SendFrame("SUBSCRIBE", "", "destination:/events-store/audit", "id:a", "ack:client",
		"durable-name:auditor", "start-position:first")
	expectSeqs(t, c2, "a", 3, 4, 5, 6)
}

// TestEventsStoreDurablePositionOutOfOrderAcks: the saved position is the sequence before
// the lowest unacknowledged one whatever order ACKs come in, a NACKed sequence holds it
// back, and the sequences acknowledged above it are kept with it: with 1-3, 5 and 6
// acknowledged (out of order) and 4 NACKed, a resume delivers 4 only.
func TestEventsStoreDurablePositionOutOfOrderAcks(t *testing.T) {
	dir := t.TempDir()
	b, stop := startStop(t, durableConfig(dir))
	p := brokertest.Connect(t, b.Addrs()[0])
	sendN(t, p, "/events-store/ooo", 1, 6)
	c := brokertest.Connect(t, b.Addrs()[0])
	c.SendFrame("SUBSCRIBE", "", "destination:/events-store/ooo", "id:a", "ack:client-individual",
		"durable-name:ooo", "start-position:first")
	ms := expectSeqs(t, c, "a", 1, 2, 3, 4, 5, 6)
	for _, i := range []int{4, 2, 5, 0, 1} { // sequences 5, 3, 6, 1, 2
		c.SendFrame("ACK", "", "id:"+ms[i].Value("ack"))
	}
	c.SendFrame("NACK", "", "id:"+ms[3].Value("ack"), "receipt:n")
	c.Expect(frame.CmdReceipt, "receipt-id:n")
	c.SendFrame("DISCONNECT", "", "receipt:bye")
	c.Expect(frame.CmdReceipt)
	stop()

	b2, stop2 := startStop(t, durableConfig(dir))
	defer stop2()
	c2 := brokertest.Connect(t, b2.Addrs()[0])
	c2.SendFrame("SUBSCRIBE", "", "destination:/events-store/ooo", "id:a", "ack:client-individual",
		"durable-name:ooo", "start-position:first")
	expectSeqs(t, c2, "a", 4)
	// 5 and 6 were acknowledged: a reader delivers in sequence order, so sequence 7, appended
	// now, is the next MESSAGE only if neither comes again.
	p2 := brokertest.Connect(t, b2.Addrs()[0])
	sendN(t, p2, "/events-store/ooo", 7, 7)
	expectSeqs(t, c2, "a", 7)
	c2.ExpectQuiet()
}
