package e2e

import (
	"fmt"
	"net"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// readMessages reads n MESSAGE frames from c (failing on anything else).
func readMessages(t *testing.T, c *rawConn, n int) []*rawFrame {
	t.Helper()
	out := make([]*rawFrame, 0, n)
	for len(out) < n {
		f, err := c.readFrame(10 * time.Second)
		requireNoError(t, err, "reading MESSAGE %d of %d", len(out)+1, n)
		if f.command != "MESSAGE" {
			t.Fatalf("got %s, want MESSAGE", f)
		}
		out = append(out, f)
	}
	return out
}

// durableBodies subscribes to an events-store durable subscription (client-individual) and
// returns the bodies delivered until the connection is quiet for quiet.
func durableBodies(t *testing.T, c *rawConn, destination, name string, quiet time.Duration) []string {
	t.Helper()
	requireNoError(t, c.write(fmt.Sprintf("SUBSCRIBE\ndestination:%s\nid:d\nack:client-individual\ndurable-name:%s\n\n\x00", destination, name)))
	var out []string
	for {
		f, err := c.readFrame(quiet)
		if err != nil {
			return out
		}
		if f.command != "MESSAGE" {
			t.Fatalf("got %s, want MESSAGE", f)
		}
		out = append(out, string(f.body))
	}
}

// TestDurableIndividualAckWithReceiptNotRedelivered: a durable events-store subscription with
// ack:client-individual whose ACKs (with receipts) skip over an unacknowledged message keeps
// those acknowledgements: neither resuming it on a new connection nor a kill -9 delivers an
// acknowledged-with-receipt message again (README "Durability": a message whose ACK was
// receipted is never delivered again), while the unacknowledged ones come back.
func TestDurableIndividualAckWithReceiptNotRedelivered(t *testing.T) {
	n := newTitanNode(t, pebbleConfig(filepath.Join(t.TempDir(), "data"), ""))
	b := n.start().broker()
	const dst, name = "/events-store/attack-ind", "ind"
	p := dialRaw(t, b)
	p.connect()
	for i := range 6 {
		requireReceipt(t, sendExpect(t, p, dst, fmt.Sprintf("m%d", i)), "events-store SEND")
	}
	c := dialRaw(t, b)
	c.connect()
	requireNoError(t, c.write(fmt.Sprintf("SUBSCRIBE\ndestination:%s\nid:s\nack:client-individual\ndurable-name:%s\nstart-position:first\nreceipt:sub\n\n\x00", dst, name)))
	// STOMP does not order a SUBSCRIBE's RECEIPT against the subscription's first MESSAGEs
	// (the reader may start delivering before the RECEIPT is written): collect MESSAGEs
	// until the RECEIPT, then the rest.
	var ms []*rawFrame
	for receipted := false; !receipted; {
		f, err := c.readFrame(10 * time.Second)
		requireNoError(t, err, "reading the durable SUBSCRIBE's RECEIPT")
		if f.command == "MESSAGE" {
			ms = append(ms, f)
			continue
		}
		requireReceipt(t, f, "durable SUBSCRIBE")
		receipted = true
	}
	ms = append(ms, readMessages(t, c, 6-len(ms))...)
	// m0 and m3 stay unacknowledged; m1, m2, m4 and m5 are acknowledged with receipts.
	for _, i := range []int{1, 2, 4, 5} {
		ack, _ := ms[i].get("ack")
		requireNoError(t, c.write(fmt.Sprintf("ACK\nid:%s\nreceipt:a%d\n\n\x00", ack, i)))
		f, err := c.readFrame(10 * time.Second)
		requireNoError(t, err)
		requireReceipt(t, f, "ACK with receipt")
	}
	_ = c.conn.Close()
	want := []string{"m0", "m3"}

	c = dialRaw(t, b)
	c.connect()
	got := durableBodies(t, c, dst, name, 2*time.Second)
	requireEqual(t, fmt.Sprint(want), fmt.Sprint(got), "bodies delivered when the durable subscription resumes on a new connection")
	_ = c.conn.Close()

	// The acknowledgements survive kill -9 too.
	n.kill()
	b = n.start().broker()
	c = dialRaw(t, b)
	c.connect()
	got = durableBodies(t, c, dst, name, 2*time.Second)
	slices.Sort(got)
	requireEqual(t, fmt.Sprint(want), fmt.Sprint(got), "bodies delivered after kill -9")
	n.stop()
}

// TestEarlierReceiptBeforeLaterError: frames of one connection are answered in order. A
// persistent SEND whose RECEIPT waits for its group commit is not overtaken by the ERROR of
// a later SEND refused before the store (an invalid header, here): the producer gets the
// first RECEIPT, then the ERROR, so it knows the first message was accepted (it used to get
// only the ERROR, the connection closed, and the stored message's RECEIPT was lost).
func TestEarlierReceiptBeforeLaterError(t *testing.T) {
	n := newTitanNode(t, pebbleConfig(filepath.Join(t.TempDir(), "data"), ""))
	b := n.start().broker()
	for _, dst := range []string{"/queue/attack-order", "/events-store/attack-order"} {
		for _, bad := range []string{"delay:soon", "expires:-3"} {
			for i := range 5 {
				p := dialRaw(t, b)
				p.connect()
				requireNoError(t, p.write(fmt.Sprintf("SEND\ndestination:%s\nreceipt:first\n\nok\x00SEND\ndestination:%s\n%s\nreceipt:second\n\nbad\x00", dst, dst, bad)))
				var got []string
				for {
					f, err := p.readFrame(5 * time.Second)
					if err != nil {
						break
					}
					id, _ := f.get("receipt-id")
					got = append(got, f.command+" "+id)
				}
				requireEqual(t, "[RECEIPT first ERROR second]", fmt.Sprint(got), "%s, %s, try %d: frames answered", dst, bad, i)
				_ = p.conn.Close()
			}
		}
	}
	n.stop()
}

// TestReplyToDestinationLimits: a request's reply-to makes its destination (the broker
// answers there, "no responder" included), so it is admitted like a SEND's destination: a
// connection's own temp-queues count against max-temp-queues-by-client and the queues it
// names against max-destinations-by-client, and one past the limit is refused with the ERROR
// naming it, nothing created. (Requests with a fresh reply-to each used to make any number
// of temp-queues and queues from one connection.)
func TestReplyToDestinationLimits(t *testing.T) {
	b := startBroker(t, yamlConfigWith("max-destinations-by-client: 20, max-temp-queues-by-client: 5",
		"  limits: {max-destinations: 1000, destination-idle-timeout: -1}\n"))
	request := func(c *rawConn, replyTo string) *rawFrame {
		t.Helper()
		requireNoError(t, c.write(fmt.Sprintf("SEND\ndestination:/command/attack\nreply-to:%s\nreceipt:r\n\nx\x00", replyTo)))
		for {
			f, err := c.readFrame(10 * time.Second)
			requireNoError(t, err, "reading the answer to a request replying to %s", replyTo)
			// The request subscribed its connection to its reply-to temp-queue (RabbitMQ's
			// automatic subscription): the broker's "no responder" answers arrive there.
			sub, _ := f.get("subscription")
			if d, _ := f.get("destination"); f.command != "MESSAGE" || sub != d {
				return f
			}
		}
	}
	c := dialRaw(t, b)
	c.connect()
	for i := range 5 {
		requireReceipt(t, request(c, fmt.Sprintf("/temp-queue/r%d", i)), "request replying to a temp-queue within the limit")
	}
	requireReceipt(t, request(c, "/temp-queue/r0"), "request replying to an existing temp-queue")
	requireErrorMessage(t, request(c, "/temp-queue/r5"), "temp-queue limit reached", "6th reply-to temp-queue")

	c = dialRaw(t, b)
	c.connect()
	for i := range 20 {
		requireReceipt(t, request(c, fmt.Sprintf("/queue/attack-reply-%d", i)), "request replying to a new queue within the limit")
	}
	requireErrorMessage(t, request(c, "/queue/attack-reply-20"), "destination limit reached", "21st reply-to queue")
	if _, ok := monitorQueue(t, b, "/queue/attack-reply-20", ""); ok {
		t.Fatal("the refused reply-to queue /queue/attack-reply-20 exists")
	}
}

// TestLargeFrameBudget: frames in progress cannot hold memory without a broker-wide bound.
// Connections that each start a large SEND and never finish it (a hostile client: 40 of
// them held 600 MB of read buffers before) take from limits.max-large-frame-bytes; once it
// is spent a further large frame gets ERROR `large frame memory limit reached` and its
// connection closes, small frames still pass, and when the holders go away their share
// comes back.
func TestLargeFrameBudget(t *testing.T) {
	b := startBroker(t, yamlConfigWith("", "  limits: {max-large-frame-bytes: 8388608}\n"))
	const declared = 4_000_000
	var holders []*rawConn
	for range 2 {
		h := dialRaw(t, b)
		h.connect()
		requireNoError(t, h.write(fmt.Sprintf("SEND\ndestination:/queue/attack-big\ncontent-length:%d\n\n%s", declared, strings.Repeat("x", declared-10))))
		holders = append(holders, h)
	}
	// big sends a large SEND in two parts: the first 256 KiB (past the pooled read buffers,
	// so the broker must take from the budget) and, unless the broker has answered by then,
	// the rest. A refusal closes the connection: writing the rest into it would end in a
	// reset that can discard the ERROR before it is read.
	big := func(c *rawConn) *rawFrame {
		t.Helper()
		const first = 256 << 10
		frame := fmt.Sprintf("SEND\ndestination:/queue/attack-big\nreceipt:r\ncontent-length:%d\n\n%s\x00", declared, strings.Repeat("y", declared))
		head := len(frame) - declared - 1 + first
		requireNoError(t, c.write(frame[:head]))
		if f, err := c.readFrame(2 * time.Second); err == nil {
			return f
		} else if ne, ok := err.(net.Error); !ok || !ne.Timeout() {
			t.Fatalf("reading the answer to a large SEND's first part: %v", err)
		}
		requireNoError(t, c.write(frame[head:]))
		f, err := c.readFrame(10 * time.Second)
		requireNoError(t, err, "reading the answer to a large SEND")
		return f
	}
	var refused *rawFrame
	eventually(t, 10*time.Second, func() bool {
		c := dialRaw(t, b)
		c.connect()
		defer c.conn.Close()
		if f := big(c); f.command == "ERROR" {
			refused = f
			return true
		}
		return false
	}, "a large SEND refused while two unfinished large frames hold the budget")
	if got, _ := refused.get("message"); got != "large frame memory limit reached" {
		t.Fatalf("got %s, want ERROR message:large frame memory limit reached", refused)
	}
	m := scrapeMetrics(t, b)
	if metricSum(m, "titan_large_frame_refusals_total") < 1 || metricSum(m, "titan_large_frame_bytes_max") != 8388608 {
		t.Errorf("large frame metrics: refusals %v, max %v", metricSum(m, "titan_large_frame_refusals_total"), metricSum(m, "titan_large_frame_bytes_max"))
	}
	small := dialRaw(t, b)
	small.connect()
	requireReceipt(t, sendExpect(t, small, "/queue/attack-big", "small"), "a small SEND while the budget is spent")
	for _, h := range holders {
		_ = h.conn.Close()
	}
	eventually(t, 10*time.Second, func() bool {
		c := dialRaw(t, b)
		c.connect()
		defer c.conn.Close()
		return big(c).command == "RECEIPT"
	}, "a large SEND accepted once the unfinished frames' connections closed")
}

// TestClientAckSlowConsumerReleasesProducersAtTimeout: a client-ack topic subscriber at its
// prefetch that also stops reading its socket (a hung process: the broker cannot even write
// it the ERROR) never holds its producers (issue 30: what it cannot take is held for it
// alone), and it is closed as a slow consumer after slow-consumer-timeout — not once the
// write of its last frames times out (30 s).
func TestClientAckSlowConsumerReleasesProducersAtTimeout(t *testing.T) {
	b := startBroker(t, yamlConfigWith("", `  flow-control:
    subscriber: {slow-consumer-timeout: 1000}
`))
	const topic = "/topic/attack-slow-ack"
	stuck := dialRaw(t, b)
	if tc, ok := stuck.conn.(*net.TCPConn); ok {
		requireNoError(t, tc.SetReadBuffer(4096))
	}
	stuck.connect()
	requireNoError(t, stuck.write("SUBSCRIBE\nid:s\ndestination:"+topic+"\nack:client\nprefetch-count:4\nreceipt:r-s\n\n\x00"))
	f, err := stuck.readFrame(10 * time.Second)
	requireNoError(t, err)
	requireReceipt(t, f, "SUBSCRIBE")
	// From here the stuck client reads nothing.
	p := dialRaw(t, b)
	p.connect()
	body := strings.Repeat("m", 1<<20)
	start := time.Now()
	for i := range 20 {
		requireReceipt(t, sendExpect(t, p, topic, body), fmt.Sprintf("SEND %d", i))
	}
	if took := time.Since(start); took > 15*time.Second {
		t.Fatalf("20 SENDs took %v: the producer waited for the stuck subscriber's write timeout, not its 1 s slow-consumer-timeout", took.Round(time.Millisecond))
	}
	// The producers never waited for it (issue 30); the stuck subscriber is closed as a slow
	// consumer once the messages held at its prefetch have waited slow-consumer-timeout.
	eventually(t, 10*time.Second, func() bool {
		return metricSum(scrapeMetrics(t, b), "titan_slow_consumers_closed_total") >= 1
	}, "titan_slow_consumers_closed_total >= 1")
}

// TestDestinationNotUTF8Refused: STOMP 1.2 headers are UTF-8; a SEND whose destination is
// not gets ERROR `invalid destination` and creates nothing (such a queue used to be created,
// listed by the monitor API under a name with U+FFFD that no operator command could reach).
func TestDestinationNotUTF8Refused(t *testing.T) {
	b := startBroker(t, yamlConfig(""))
	c := dialRaw(t, b)
	c.connect()
	requireErrorMessage(t, sendExpect(t, c, "/queue/attack-\xff\xfe", "x"), "invalid destination", "SEND to a destination that is not UTF-8")
	if n := metricSum(scrapeMetrics(t, b), "titan_destinations"); n != 0 {
		t.Fatalf("titan_destinations is %v after the refused SEND, want 0", n)
	}
}
