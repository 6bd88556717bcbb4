package e2e

// Issue 11, flow control: a subscriber that reads never loses an events message; one that
// never reads is closed as a slow consumer with an ERROR while the others keep receiving;
// producer pauses and resumes show on /metrics. And the STOMP 1.1 ACK rule.

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
// its RECEIPT, nothing is dropped, and the producer was paused and resumed on the way.
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
	if m["titan_producer_pauses_total"] < 1 {
		t.Errorf("titan_producer_pauses_total = %v, want >= 1 (32 MiB went to 16 MiB subscribers)", m["titan_producer_pauses_total"])
	}
	checkEqual(t, m["titan_producer_pauses_total"], m["titan_producer_resumes_total"], "every pause ended in a resume")
	checkEqual(t, 0.0, m["titan_producers_paused"], "producers paused after the runs")
}

// A subscriber that never reads is closed with ERROR message:slow consumer once it stayed
// over the high watermark for slow-consumer-timeout; meanwhile the producer is paused
// (titan_producers_paused 1 on /metrics), then resumes, and the reading subscriber gets
// every message.
func TestFlowControlSlowConsumerClosedOthersKeepReceiving(t *testing.T) {
	pythonClient.require(t)
	b := startBroker(t, yamlConfigWith("", `  flow-control:
    subscriber: {max-pending-bytes: 1048576, resume-pending-bytes: 524288, slow-consumer-timeout: 3000}
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
	type result struct {
		out flowOut
	}
	done := make(chan result, 1)
	go func() {
		var out flowOut
		pythonClient.run(t, b, "flow", map[string]any{
			"dest": topic, "subscribers": 1, "sizes": sizes, "burst": false, "timeout": 60,
		}, &out)
		done <- result{out}
	}()

	// The producer is seen paused while the stuck subscriber holds it back.
	eventually(t, 30*time.Second, 20*time.Millisecond, func() bool {
		return scrapeSeries(t, b)["titan_producers_paused"] >= 1
	}, "the producer paused on /metrics")
	// Then the stuck subscriber is closed as a slow consumer and the producer goes on.
	eventually(t, 30*time.Second, 50*time.Millisecond, func() bool {
		return scrapeSeries(t, b)["titan_slow_consumers_closed_total"] == 1
	}, "a slow-consumer close on /metrics")

	var res result
	select {
	case res = <-done:
	case <-time.After(90 * time.Second):
		t.Fatal("the producer and the reading subscriber did not finish")
	}
	requireEqual(t, 1, len(res.out.Received), "subscribers reported")
	checkEqual(t, strings.Join(wantTags(sizes), " "), strings.Join(res.out.Received[0], " "), "the reading subscriber received")
	checkEqual(t, 0, len(res.out.Errors), "ERROR frames to the healthy clients: %v", res.out.Errors)

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
	if m["titan_producer_pauses_total"] < 1 || m["titan_producer_resumes_total"] != m["titan_producer_pauses_total"] {
		t.Errorf("pauses %v, resumes %v: want >= 1 and equal", m["titan_producer_pauses_total"], m["titan_producer_resumes_total"])
	}
	checkEqual(t, 0.0, m["titan_producers_paused"], "producers paused at the end")
	checkEqual(t, 1.0, m[`titan_slow_consumers_closed_total`], "slow-consumer closes")
	// Both counters of slow-consumer closes agree (issue 30: one stayed 0 while the other
	// counted).
	checkEqual(t, 1.0, metricValue(scrapeMetrics(t, b), `titan_connections_closed_total{reason="slow_consumer"}`),
		`titan_connections_closed_total{reason="slow_consumer"}`)
	t.Logf("stuck subscriber read %d MESSAGEs before its ERROR; healthy run %.2fs", messages, res.out.Seconds)
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
