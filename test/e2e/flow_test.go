package e2e

// Issue 11, flow control: a subscriber that reads never loses an events message; one that
// never reads is closed as a slow consumer with an ERROR while the others keep receiving.
// Issue 30: a slow subscriber is isolated — no producer pauses for it. And the STOMP 1.1
// ACK rule.

import (
	"bufio"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"
)

type flowOut struct {
	Receipts int              `json:"receipts"`
	Received [][]string       `json:"received"`
	Errors   []map[string]any `json:"errors"`
	Seconds  float64          `json:"seconds"`
}

// wantTags is "m<i>:<size>" for every size, in order.
func wantTags(sizes []int) []string {
	out := make([]string, len(sizes))
	for i, n := range sizes {
		out[i] = fmt.Sprintf("m%d:%d", i, n)
	}
	return out
}

// scrapeSeries returns the value of every unlabelled series on b's /metrics.
func scrapeSeries(t *testing.T, b *broker) map[string]float64 {
	t.Helper()
	data := scrapeMetrics(t, b)
	out := map[string]float64{}
	sc := bufio.NewScanner(strings.NewReader(data))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "#") {
			continue
		}
		name, val, ok := strings.Cut(line, " ")
		if !ok || strings.Contains(name, "{") {
			continue
		}
		if v, err := strconv.ParseFloat(val, 64); err == nil {
			out[name] = v
		}
	}
	return out
}

// Two 16 MiB messages, and a burst of 40 × 1 MiB, to a topic with two reading subscribers:
// every message reaches both (before flow control: 1 of 2 and 25 of 40), every SEND gets
// its RECEIPT, nothing is dropped, and the producer was never paused (issue 30: each
// subscriber's own buffer absorbs the burst).
func TestFlowControlReadingSubscribersLoseNothing(t *testing.T) {
	pythonClient.require(t)
	b := startBroker(t, yamlConfig(""))
	cases := []struct {
		name  string
		sizes []int
		burst bool
	}{
		{"two 16 MiB", []int{16 << 20, 16 << 20}, false},
		{"burst 40 x 1 MiB", func() []int {
			s := make([]int, 40)
			for i := range s {
				s[i] = 1 << 20
			}
			return s
		}(), true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var out flowOut
			pythonClient.run(t, b, "flow", map[string]any{
				"dest": "/topic/flow-" + strings.ReplaceAll(c.name, " ", "-"), "subscribers": 2,
				"sizes": c.sizes, "burst": c.burst, "timeout": 60,
			}, &out)
			want := wantTags(c.sizes)
			requireEqual(t, 2, len(out.Received), "subscribers reported")
			for i, got := range out.Received {
				checkEqual(t, strings.Join(want, " "), strings.Join(got, " "), "subscriber %d received", i)
			}
			checkEqual(t, 0, len(out.Errors), "ERROR frames: %v", out.Errors)
			t.Logf("%s: %.2fs", c.name, out.Seconds)
		})
	}
	m := scrapeSeries(t, b)
	checkEqual(t, 0.0, m["titan_events_dropped_total"], "events dropped")
	checkEqual(t, 0.0, m["titan_events_dropped_by_policy_total"], "events dropped by policy")
	checkEqual(t, 0.0, m["titan_producer_pauses_total"], "producer pauses")
	checkEqual(t, 0.0, m["titan_slow_consumers_closed_total"], "slow-consumer closes")
}

// A subscriber that never reads is closed with ERROR message:slow consumer once it stayed
// over the high watermark for slow-consumer-timeout (its buffer bound, max-buffer-bytes,
// is set high so the timer is what closes it); meanwhile the producer is never paused and
// the reading subscriber gets every message.
func TestFlowControlSlowConsumerClosedOthersKeepReceiving(t *testing.T) {
	pythonClient.require(t)
	b := startBroker(t, yamlConfigWith("", `  flow-control:
    subscriber: {max-pending-bytes: 1048576, resume-pending-bytes: 524288, slow-consumer-timeout: 3000, max-buffer-bytes: 268435456}
`))
	const topic = "/topic/flow-slow"
	stuck := dialRaw(t, b)
	stuck.connect()
	requireNoError(t, stuck.write("SUBSCRIBE\nid:s\ndestination:"+topic+"\nreceipt:r-s\n\n\x00"))
	f, err := stuck.readFrame(10 * time.Second)
	requireNoError(t, err)
	requireEqual(t, "RECEIPT", f.command, "SUBSCRIBE receipt: %s", f)
	// From here the stuck client reads nothing until the broker has given up on it.

	sizes := make([]int, 200) // 20 MB: more than loopback socket buffers and the 1 MiB mark
	for i := range sizes {
		sizes[i] = 100 << 10
	}
	var out flowOut
	pythonClient.run(t, b, "flow", map[string]any{
		"dest": topic, "subscribers": 1, "sizes": sizes, "burst": false, "timeout": 60,
	}, &out)
	requireEqual(t, 1, len(out.Received), "subscribers reported")
	checkEqual(t, strings.Join(wantTags(sizes), " "), strings.Join(out.Received[0], " "), "the reading subscriber received")
	checkEqual(t, 0, len(out.Errors), "ERROR frames to the healthy clients: %v", out.Errors)

	// Then the stuck subscriber is closed as a slow consumer by its timer.
	eventually(t, 30*time.Second, func() bool {
		return scrapeSeries(t, b)["titan_slow_consumers_closed_total"] == 1
	}, "a slow-consumer close on /metrics")
	// The stuck client, reading now, finds MESSAGEs, then the ERROR, then the close.
	var errFrame *rawFrame
	messages := 0
	for errFrame == nil {
		f, err := stuck.readFrame(20 * time.Second)
		if err != nil {
			t.Fatalf("stuck subscriber: %v after %d MESSAGEs, want ERROR message:slow consumer", err, messages)
		}
		switch f.command {
		case "MESSAGE":
			messages++
		case "ERROR":
			errFrame = f
		default:
			t.Fatalf("stuck subscriber got %s", f)
		}
	}
	msg, _ := errFrame.get("message")
	checkEqual(t, "slow consumer", msg, "ERROR message header: %s", errFrame)
	if _, err := stuck.expectClosed(10 * time.Second); err != nil {
		t.Errorf("after the ERROR: %v", err)
	}
	if messages >= len(sizes) {
		t.Errorf("the stuck subscriber got all %d messages: it was never over its limit", messages)
	}
	m := scrapeSeries(t, b)
	checkEqual(t, 0.0, m["titan_producer_pauses_total"], "producer pauses")
	checkEqual(t, 1.0, m[`titan_slow_consumers_closed_total`], "slow-consumer closes")
	// Both counters of slow-consumer closes agree (issue 30: one stayed 0 while the other
	// counted).
	checkEqual(t, 1.0, metricValue(scrapeMetrics(t, b), `titan_connections_closed_total{reason="slow_consumer"}`),
		`titan_connections_closed_total{reason="slow_consumer"}`)
	t.Logf("stuck subscriber read %d MESSAGEs before its ERROR; healthy run %.2fs", messages, out.Seconds)
}

// TestSlowSubscriberIsolated is issue 30's check: 20,000 × 1 KiB to a topic with one
// subscriber that never reads and one that reads, from a producer that pipelines its SENDs
// with receipts (real STOMP connections to a titan process). The healthy subscriber receives
// every message, in order, and the producer every RECEIPT; the stalled subscriber was not
// closed meanwhile (slow-consumer-timeout is 90 s), so nobody waited for it to go, and the
// producer never paused. The stalled one is handled by its policy alone: under DROP, what it
// has no room for past max-pending-bytes is dropped and counted; under CLOSE, once more
// traffic fills its buffer to max-buffer-bytes (32 MiB: more than everything the healthy
// subscriber could lag by in the first phase) it is closed as a slow consumer at once,
// counted, while the producer's RECEIPT still comes.
func TestSlowSubscriberIsolated(t *testing.T) {
	b := startBroker(t, yamlConfigWith("", `  flow-control:
    subscriber: {max-pending-bytes: 4194304, slow-consumer-timeout: 90000, max-buffer-bytes: 33554432}
  address-settings:
    - match: "lossy.#"
      slow-consumer-policy: DROP
`))
	for _, c := range []struct{ name, topic string }{{"CLOSE", "/topic/isolated"}, {"DROP", "/topic/lossy/isolated"}} {
		t.Run(c.name, func(t *testing.T) {
			before := scrapeSeries(t, b)
			subscribe := func() *rawConn {
				s := dialRaw(t, b)
				s.connect()
				requireNoError(t, s.write("SUBSCRIBE\nid:s\ndestination:"+c.topic+"\nreceipt:r-s\n\n\x00"))
				f, err := s.readFrame(10 * time.Second)
				requireNoError(t, err)
				requireEqual(t, "RECEIPT", f.command, "SUBSCRIBE receipt: %s", f)
				return s
			}
			subscribe() // the stalled subscriber: reads nothing from here on
			healthy := subscribe()
			const n = 20000
			got := make(chan error, 1)
			go func() { // the healthy subscriber: every message, in order
				for i := range n {
					f, err := healthy.readFrame(60 * time.Second)
					if err != nil {
						got <- fmt.Errorf("after %d messages: %w", i, err)
						return
					}
					if want := fmt.Sprintf("m%d:", i); f.command != "MESSAGE" || !strings.HasPrefix(string(f.body), want) {
						got <- fmt.Errorf("message %d: %s, want a MESSAGE starting %s", i, f, want)
						return
					}
				}
				got <- nil
			}()
			p := dialRaw(t, b)
			p.connect()
			go func() {
				for i := range n {
					tag := fmt.Sprintf("m%d:", i)
					body := tag + strings.Repeat("x", 1024-len(tag))
					if p.write(fmt.Sprintf("SEND\ndestination:%s\nreceipt:%d\ncontent-length:1024\n\n%s\x00", c.topic, i, body)) != nil {
						return
					}
				}
			}()
			for i := range n {
				f, err := p.readFrame(60 * time.Second)
				requireNoError(t, err, "the producer's RECEIPT %d", i)
				rid, _ := f.get("receipt-id")
				requireEqual(t, "RECEIPT "+strconv.Itoa(i), f.command+" "+rid, "the producer's answer %d: %s", i, f)
			}
			requireNoError(t, <-got, "the healthy subscriber")

			m := scrapeSeries(t, b)
			delta := func(name string) float64 { return m[name] - before[name] }
			checkEqual(t, 0.0, delta("titan_producer_pauses_total"), "producer pauses")
			checkEqual(t, 0.0, delta("titan_slow_consumers_closed_total"), "slow-consumer closes while the healthy subscriber ran")
			if c.name == "DROP" {
				if delta("titan_events_dropped_by_policy_total") < 1 {
					t.Errorf("titan_events_dropped_by_policy_total grew by %v, want > 0", delta("titan_events_dropped_by_policy_total"))
				}
				t.Logf("DROP: dropped for the stalled subscriber: %v", delta("titan_events_dropped_by_policy_total"))
				return
			}
			checkEqual(t, 0.0, delta("titan_events_dropped_total"), "events dropped while the stalled subscriber's buffer had room")

			// More traffic fills the stalled subscriber's buffer: it is closed at its bound,
			// and the producer's RECEIPT still comes. (The healthy one leaves first.)
			requireNoError(t, healthy.write("UNSUBSCRIBE\nid:s\nreceipt:u\n\n\x00"))
			f, err := healthy.readFrame(30 * time.Second)
			requireNoError(t, err)
			requireEqual(t, "RECEIPT", f.command, "UNSUBSCRIBE receipt: %s", f)
			big := strings.Repeat("z", 256<<10)
			go func() {
				for range 200 { // 50 MiB
					if p.write(fmt.Sprintf("SEND\ndestination:%s\ncontent-length:%d\n\n%s\x00", c.topic, len(big), big)) != nil {
						return
					}
				}
				_ = p.write("SEND\ndestination:" + c.topic + "\nreceipt:last\n\nend\x00")
			}()
			f, err = p.readFrame(60 * time.Second)
			requireNoError(t, err, "the producer's RECEIPT")
			requireEqual(t, "RECEIPT", f.command, "%s", f)
			m = scrapeSeries(t, b)
			checkEqual(t, 1.0, delta("titan_slow_consumers_closed_total"), "slow-consumer closes")
			checkEqual(t, 0.0, delta("titan_producer_pauses_total"), "producer pauses")
			if delta("titan_events_dropped_total") < 1 {
				t.Errorf("titan_events_dropped_total grew by %v after the close, want > 0", delta("titan_events_dropped_total"))
			}
			t.Logf("CLOSE: then dropped for the closed subscriber: %v", delta("titan_events_dropped_total"))
		})
	}
}

// slow-consumer-policy DROP keeps the old behaviour for the destinations it names: the
// producer is never paused, messages for a subscriber over its limit are dropped and
// counted.
func TestFlowControlDropPolicy(t *testing.T) {
	b := startBroker(t, yamlConfigWith("", `  flow-control:
    subscriber: {max-pending-bytes: 1048576, slow-consumer-timeout: -1}
  address-settings:
    - match: "lossy.#"
      slow-consumer-policy: DROP
`))
	stuck := dialRaw(t, b)
	stuck.connect()
	requireNoError(t, stuck.write("SUBSCRIBE\nid:s\ndestination:/topic/lossy/x\nreceipt:r-s\n\n\x00"))
	f, err := stuck.readFrame(10 * time.Second)
	requireNoError(t, err)
	requireEqual(t, "RECEIPT", f.command)

	p := dialRaw(t, b)
	p.connect()
	body := strings.Repeat("y", 100<<10)
	const n = 200
	go func() {
		for i := range n {
			if p.write(fmt.Sprintf("SEND\ndestination:/topic/lossy/x\ncontent-length:%d\n\n%s\x00", len(body), body)) != nil {
				return
			}
			_ = i
		}
		_ = p.write("SEND\ndestination:/topic/lossy/x\nreceipt:last\n\nend\x00")
	}()
	f, err = p.readFrame(60 * time.Second)
	requireNoError(t, err, "the producer's RECEIPT (it must never be paused under DROP)")
	requireEqual(t, "RECEIPT", f.command, "%s", f)
	m := scrapeSeries(t, b)
	if m["titan_events_dropped_by_policy_total"] < 1 {
		t.Errorf("titan_events_dropped_by_policy_total = %v, want > 0", m["titan_events_dropped_by_policy_total"])
	}
	checkEqual(t, 0.0, m["titan_producer_pauses_total"], "pauses under DROP")
}

// STOMP 1.1: an ACK or NACK whose message-id names a message delivered on this connection
// but whose subscription header names another subscription acknowledges that message
// (RabbitMQ and ActiveMQ accept it); an unknown message-id is still an ERROR.
func TestAck11MismatchedSubscription(t *testing.T) {
	b := startBroker(t, yamlConfig(""))
	c := dialRaw(t, b)
	requireNoError(t, c.write("CONNECT\naccept-version:1.1\nhost:localhost\n\n\x00"))
	f, err := c.readFrame(10 * time.Second)
	requireNoError(t, err)
	v, _ := f.get("version")
	requireEqual(t, "CONNECTED 1.1", f.command+" "+v, "%s", f)
	send := func(dst, body string) {
		requireNoError(t, c.write("SEND\ndestination:"+dst+"\n\n"+body+"\x00"))
	}
	requireNoError(t, c.write("SUBSCRIBE\nid:a\ndestination:/queue/ack11-a\nack:client-individual\n\n\x00"))
	requireNoError(t, c.write("SUBSCRIBE\nid:b\ndestination:/queue/ack11-b\nack:client\nreceipt:subs\n\n\x00"))
	f, err = c.readFrame(10 * time.Second)
	requireNoError(t, err)
	requireEqual(t, "RECEIPT", f.command, "%s", f)
	send("/queue/ack11-a", "one")
	send("/queue/ack11-a", "two")
	var ids []string
	for len(ids) < 2 {
		f, err := c.readFrame(10 * time.Second)
		requireNoError(t, err)
		requireEqual(t, "MESSAGE", f.command, "%s", f)
		id, _ := f.get("message-id")
		sub, _ := f.get("subscription")
		checkEqual(t, "a", sub, "subscription of %s", f)
		ids = append(ids, id)
	}
	requireNoError(t, c.write("ACK\nmessage-id:"+ids[0]+"\nsubscription:b\nreceipt:ack1\n\n\x00"))
	requireNoError(t, c.write("NACK\nmessage-id:"+ids[1]+"\nsubscription:nosuch\nreceipt:nack1\n\n\x00"))
	for _, want := range []string{"ack1", "nack1"} {
		f, err := c.readFrame(10 * time.Second)
		requireNoError(t, err)
		if f.command == "MESSAGE" { // the NACKed message comes back
			f, err = c.readFrame(10 * time.Second)
			requireNoError(t, err)
		}
		requireEqual(t, "RECEIPT", f.command, "answer to %s: %s", want, f)
		rid, _ := f.get("receipt-id")
		checkEqual(t, want, rid)
	}
	eventuallyQueue(t, b, "/queue/ack11-a", "the ACKed message settled", func(q queueStat) bool {
		return q.Acked >= 1
	})
	requireNoError(t, c.write("ACK\nmessage-id:no-such-message\nsubscription:a\nreceipt:bad\n\n\x00"))
	for {
		f, err := c.readFrame(10 * time.Second)
		requireNoError(t, err)
		if f.command == "MESSAGE" {
			continue
		}
		requireEqual(t, "ERROR", f.command, "unknown message-id: %s", f)
		msg, _ := f.get("message")
		checkEqual(t, "unknown ack id", msg)
		break
	}
}
