package e2e

// Issue 6 end to end: ring queues created and resized with the titan CLI, and one created by
// traffic under an address setting's default-ring-size, driven by python3-stomp against a real
// titan process, observed through the monitor API.

import (
	"fmt"
	"slices"
	"testing"
)

type ringSlowOut struct {
	Received               []string  `json:"received"`
	ProduceMs              float64   `json:"produce_ms"`
	SamplesWhileProducing  int       `json:"samples_while_producing"`
	ReceivedWhileProducing int       `json:"received_while_producing"`
	MonitorEnd             queueStat `json:"monitor_end"`
	Stats                  struct {
		Samples       int         `json:"samples"`
		MaxSize       int         `json:"max_size"`
		MaxDelivering int         `json:"max_delivering"`
		Violations    []queueStat `json:"violations"`
		PollErrors    []string    `json:"poll_errors"`
	} `json:"stats"`
}

// A ring of 3 (created with `titan queue create --ring-size 3`) under a producer of 1,000
// messages and a slow consumer (client-individual, prefetch-count 1, acknowledging each
// message 20 ms after it arrives) never holds more than 3 + in-delivery messages; the consumer
// receives far fewer than 1,000, in order, ending with the newest ones; every message is
// either delivered or removed by the ring.
func TestRingQueueUnderSlowConsumerKeepsTheNewest(t *testing.T) {
	t.Parallel()
	b := startBroker(t, yamlConfig(""))
	const dest, n, ring = "/queue/prices-ring", 1000, 3
	r := requireCLIOK(t, b, "queue", "create", dest, "--ring-size", "3")
	checkEqual(t, "created queue /queue/prices-ring (group default), queues: capacity none, max-pending-bytes 67108864 (64 MiB), ring size 3\n",
		r.stdout, "queue create stdout")
	qs := requireQueue(t, b, dest, "")
	requireEqual(t, ring, qs.RingSize, "monitor API ring size after create")

	var out ringSlowOut
	pythonClient.run(t, b, "ring_slow", map[string]any{
		"dest": dest, "count": n, "ring_size": ring, "ack_delay_ms": 20, "monitor": monitorURL(b),
	}, &out)
	t.Logf("produced %d messages in %.0f ms; %d monitor samples (%d while producing); received %d (%d while producing); max size %d, max delivering %d",
		n, out.ProduceMs, out.Stats.Samples, out.SamplesWhileProducing, len(out.Received), out.ReceivedWhileProducing,
		out.Stats.MaxSize, out.Stats.MaxDelivering)
	if len(out.Stats.Violations) > 0 {
		t.Errorf("the ring held more than %d + delivering messages: %+v", ring, out.Stats.Violations)
	}
	if len(out.Stats.PollErrors) > 0 {
		t.Errorf("monitor API polls failed: %q", out.Stats.PollErrors)
	}
	if out.SamplesWhileProducing < 10 {
		t.Errorf("only %d monitor samples while the producer ran: the bound was not observed", out.SamplesWhileProducing)
	}
	if out.Stats.MaxDelivering > 1 {
		t.Errorf("monitor API showed %d messages delivering, want at most 1 (prefetch-count 1)", out.Stats.MaxDelivering)
	}
	if out.Stats.MaxSize > ring+1 {
		t.Errorf("monitor API showed size %d, want at most %d (ring %d + 1 delivering)", out.Stats.MaxSize, ring+1, ring)
	}
	got := out.Received
	if len(got) == 0 {
		t.Fatal("the consumer received nothing")
	}
	if len(got) > n/2 {
		t.Errorf("the consumer received %d of %d messages: want far fewer (the ring drops the oldest)", len(got), n)
	}
	last := fmt.Sprintf("m-%d", n-1)
	if got[len(got)-1] != last {
		t.Errorf("the consumer's last message is %q, want the newest, %q", got[len(got)-1], last)
	}
	// When the producer finished, the ring held its newest messages; the ring counts the one
	// message in delivery (Artemis counts messageCount, delivering included), so at least the
	// newest ring-1 are what the consumer received last.
	if k := ring - 1; len(got) >= k {
		if tail, want := got[len(got)-k:], numbered("m", n)[n-k:]; !slices.Equal(tail, want) {
			t.Errorf("the consumer's last %d messages are %q, want the newest %q", k, tail, want)
		}
	}
	prev := -1
	for _, body := range got {
		var i int
		if _, err := fmt.Sscanf(body, "m-%d", &i); err != nil || i <= prev {
			t.Errorf("received %q after m-%d: want increasing order, each once", body, prev)
			break
		}
		prev = i
	}
	end := out.MonitorEnd
	checkEqual(t, 0, end.Size, "monitor API size at the end")
	checkEqual(t, uint64(n), end.Enqueued, "monitor API enqueued (a ring never refuses a SEND)")
	checkEqual(t, uint64(n), end.RingRemoved+uint64(len(got)), "ring-removed (%d) + received (%d)", end.RingRemoved, len(got))
}

// `titan queue set --ring-size` lowering a ring at run time removes nothing at once; new SENDs
// then drop from the head so the queue does not grow; once consumption empties it, the new
// size holds.
func TestRingSizeLoweredAtRunTime(t *testing.T) {
	t.Parallel()
	b := startBroker(t, yamlConfig(""))
	const dest = "/queue/shrink"
	requireCLIOK(t, b, "queue", "create", dest, "--ring-size", "10")
	s := startLiveScript(t, pythonClient, b, "session", nil)
	s.call(map[string]any{"op": "connect", "conn": "p"}, nil)
	for i := 0; i < 10; i++ {
		s.call(map[string]any{"op": "send", "conn": "p", "dest": dest, "body": fmt.Sprintf("s-%d", i)}, nil)
	}
	checkEqual(t, 10, requireQueue(t, b, dest, "").Size, "size after 10 SENDs into a ring of 10")

	r := requireCLIOK(t, b, "queue", "set", dest, "--ring-size", "4")
	checkEqual(t, "queue /queue/shrink (group default): ring size 4 (10 messages held)\n", r.stdout, "queue set stdout")
	qs := requireQueue(t, b, dest, "")
	checkEqual(t, 4, qs.RingSize, "ring size after queue set")
	checkEqual(t, 10, qs.Size, "size right after lowering the ring size (nothing removed at once)")

	s.call(map[string]any{"op": "send", "conn": "p", "dest": dest, "body": "s-10"}, nil)
	qs = requireQueue(t, b, dest, "")
	checkEqual(t, 10, qs.Size, "size after one more SEND (the queue does not grow)")
	checkEqual(t, uint64(1), qs.RingRemoved, "ring-removed after one more SEND")

	s.call(map[string]any{"op": "connect", "conn": "c"}, nil)
	var sub sessionMsgs
	s.call(map[string]any{"op": "subscribe", "conn": "c", "dest": dest}, &sub)
	var got sessionMsgs
	s.call(map[string]any{"op": "wait_messages", "conn": "c", "count": 10}, &got)
	if want := numbered("s", 11)[1:]; !slices.Equal(want, msgBodies(got.Messages)) {
		t.Errorf("consumer received %q, want %q (s-0 dropped by the SEND after lowering)", msgBodies(got.Messages), want)
	}
	eventuallyQueue(t, b, dest, "empty", func(q queueStat) bool { return q.Size == 0 })
	s.call(map[string]any{"op": "unsubscribe", "conn": "c", "id": sub.ID}, nil)

	for i := 0; i < 6; i++ {
		s.call(map[string]any{"op": "send", "conn": "p", "dest": dest, "body": fmt.Sprintf("t-%d", i)}, nil)
	}
	checkEqual(t, 4, requireQueue(t, b, dest, "").Size, "size after 6 SENDs into the emptied ring of 4")
	s.call(map[string]any{"op": "connect", "conn": "c2"}, nil)
	s.call(map[string]any{"op": "subscribe", "conn": "c2", "dest": dest}, nil)
	s.call(map[string]any{"op": "wait_messages", "conn": "c2", "count": 4}, &got)
	s.call(map[string]any{"op": "disconnect", "conn": "c2"}, nil)
	s.call(map[string]any{"op": "state", "conn": "c2"}, &got)
	if want := []string{"t-2", "t-3", "t-4", "t-5"}; !slices.Equal(want, msgBodies(got.Messages)) {
		t.Errorf("consumer received %q, want the newest 4 %q", msgBodies(got.Messages), want)
	}
	s.finish(nil)
}

// A consumer holding 4 unacknowledged messages of a ring of 3 (so messageCount 4 with
// deliveringCount 4) closes: the messages go back to the head in reverse order of consumption
// and the ring drops from the head, keeping B, C, D (reference 002's walk-through).
func TestRingRollbackOnConsumerCloseKeepsNewest(t *testing.T) {
	t.Parallel()
	b := startBroker(t, yamlConfig(""))
	const dest = "/queue/rollback-ring"
	requireCLIOK(t, b, "queue", "create", dest, "--ring-size", "3")
	s := startLiveScript(t, pythonClient, b, "session", nil)
	s.call(map[string]any{"op": "connect", "conn": "c1"}, nil)
	s.call(map[string]any{"op": "subscribe", "conn": "c1", "dest": dest, "ack": "client-individual"}, nil)
	s.call(map[string]any{"op": "connect", "conn": "p"}, nil)
	for _, body := range []string{"A", "B", "C", "D"} {
		s.call(map[string]any{"op": "send", "conn": "p", "dest": dest, "body": body}, nil)
	}
	var got sessionMsgs
	s.call(map[string]any{"op": "wait_messages", "conn": "c1", "count": 4}, &got)
	if want := []string{"A", "B", "C", "D"}; !slices.Equal(want, msgBodies(got.Messages)) {
		t.Fatalf("first consumer received %q, want %q", msgBodies(got.Messages), want)
	}
	qs := eventuallyQueue(t, b, dest, "4 delivering", func(q queueStat) bool { return q.Delivering == 4 })
	checkEqual(t, 4, qs.Size, "messageCount with 4 in delivery (exceeds the ring of 3)")

	s.call(map[string]any{"op": "disconnect", "conn": "c1"}, nil) // no ACK: all 4 cancelled back
	// The removal is counted just after the queue's lock is released (pointqueue.finish),
	// so a snapshot may show the rollback before its count.
	qs = eventuallyQueue(t, b, dest, "nothing delivering, one ring removal", func(q queueStat) bool { return q.Delivering == 0 && q.RingRemoved == 1 })
	checkEqual(t, 3, qs.Size, "messageCount after the consumer closed")
	checkEqual(t, uint64(1), qs.RingRemoved, "ring-removed after the consumer closed")

	s.call(map[string]any{"op": "connect", "conn": "c2"}, nil)
	s.call(map[string]any{"op": "subscribe", "conn": "c2", "dest": dest}, nil)
	s.call(map[string]any{"op": "wait_messages", "conn": "c2", "count": 3}, nil)
	s.call(map[string]any{"op": "disconnect", "conn": "c2"}, nil)
	s.call(map[string]any{"op": "state", "conn": "c2"}, &got)
	if want := []string{"B", "C", "D"}; !slices.Equal(want, msgBodies(got.Messages)) {
		t.Errorf("second consumer received %q, want %q (A removed from the head)", msgBodies(got.Messages), want)
	}
	for _, m := range got.Messages {
		checkEqual(t, "true", m.Headers["redelivered"], "redelivered on %v", m)
	}
	s.finish(nil)
}

// A queue created by traffic under an address setting with default-ring-size 3 is a ring of 3:
// A, B, C, D sent before anyone subscribes leave B, C, D. The monitor API names the match.
func TestRingDefaultFromAddressSettings(t *testing.T) {
	t.Parallel()
	b := startBroker(t, yamlConfigWith("", `  address-settings:
    - {match: "ring.#", default-ring-size: 3}
    - {match: "ring.unbounded", default-ring-size: -1}
`))
	dest := "/queue/ring/prices"
	before := []planSend{{Dest: dest, Body: "A"}, {Dest: dest, Body: "B"}, {Dest: dest, Body: "C"}, {Dest: dest, Body: "D"}}
	out := runPlan(t, pythonClient, b, map[string]planSub{"q": {Dest: dest}}, before, nil, map[string][]string{"q": {"B", "C", "D"}})
	if got := msgBodies(out.Received["q"]); !slices.Equal(got, []string{"B", "C", "D"}) {
		t.Errorf("received %q, want [B C D]", got)
	}
	qs := requireQueue(t, b, dest, "")
	checkEqual(t, 3, qs.RingSize, "ring size of a queue created by traffic")
	checkEqual(t, "ring.#", qs.Settings.Match, "address-setting match")
	checkEqual(t, uint64(1), qs.RingRemoved, "ring-removed")

	// The more specific match wins: ring.unbounded has no limit.
	dest = "/queue/ring/unbounded"
	before = []planSend{{Dest: dest, Body: "A"}, {Dest: dest, Body: "B"}, {Dest: dest, Body: "C"}, {Dest: dest, Body: "D"}}
	out = runPlan(t, pythonClient, b, map[string]planSub{"q": {Dest: dest}}, before, nil, map[string][]string{"q": {"A", "B", "C", "D"}})
	if got := msgBodies(out.Received["q"]); !slices.Equal(got, []string{"A", "B", "C", "D"}) {
		t.Errorf("received %q, want [A B C D]", got)
	}
	qs = requireQueue(t, b, dest, "")
	checkEqual(t, "ring.unbounded", qs.Settings.Match, "address-setting match (most specific wins)")
	if qs.RingSize > 0 {
		t.Errorf("ring size %d, want none (-1)", qs.RingSize)
	}
}

// A scheduled message counts in messageCount and scheduledCount but is not in the ring until
// due; when due it joins the head of the full ring and is removed at once (reference 002's
// 12:00–12:05 walk-through).
func TestRingScheduledMessageJoinsTheHeadWhenDue(t *testing.T) {
	t.Parallel()
	b := startBroker(t, yamlConfig(""))
	const dest = "/queue/scheduled-ring"
	requireCLIOK(t, b, "queue", "create", dest, "--ring-size", "3")
	s := startLiveScript(t, pythonClient, b, "session", nil)
	s.call(map[string]any{"op": "connect", "conn": "p"}, nil)
	s.call(map[string]any{"op": "send", "conn": "p", "dest": dest, "body": "A", "headers": map[string]string{"delay": "500"}}, nil)
	for _, body := range []string{"B", "C", "D"} {
		s.call(map[string]any{"op": "send", "conn": "p", "dest": dest, "body": body}, nil)
	}
	qs := requireQueue(t, b, dest, "")
	if qs.Size != 4 || qs.Scheduled != 1 || qs.RingRemoved != 0 {
		t.Errorf("before A is due: size %d, scheduled %d, ring-removed %d; want 4, 1, 0", qs.Size, qs.Scheduled, qs.RingRemoved)
	}
	// (a removal is counted just after the queue's lock is released: wait for both)
	qs = eventuallyQueue(t, b, dest, "A due and removed", func(q queueStat) bool { return q.Scheduled == 0 && q.RingRemoved == 1 })
	if qs.Size != 3 || qs.RingRemoved != 1 {
		t.Errorf("once A is due: size %d, ring-removed %d; want 3, 1 (A removed at once)", qs.Size, qs.RingRemoved)
	}
	s.call(map[string]any{"op": "connect", "conn": "c"}, nil)
	s.call(map[string]any{"op": "subscribe", "conn": "c", "dest": dest}, nil)
	s.call(map[string]any{"op": "wait_messages", "conn": "c", "count": 3}, nil)
	s.call(map[string]any{"op": "disconnect", "conn": "c"}, nil)
	var got sessionMsgs
	s.call(map[string]any{"op": "state", "conn": "c"}, &got)
	if want := []string{"B", "C", "D"}; !slices.Equal(want, msgBodies(got.Messages)) {
		t.Errorf("consumer received %q, want %q", msgBodies(got.Messages), want)
	}
	s.finish(nil)
}

// With prefetch-count 5 more messages are in delivery at once than the ring holds; the bound
// size <= 3 + delivering still holds throughout, nothing is delivered twice or out of order,
// and every message is either delivered or removed by the ring. (Which messages survive is
// not asserted: with every slot of the ring taken by messages in delivery, the ring may
// remove a new message at once, as Artemis does.)
func TestRingQueueBoundHoldsWithManyInDelivery(t *testing.T) {
	t.Parallel()
	b := startBroker(t, yamlConfig(""))
	const dest, n, ring, prefetch = "/queue/prices-ring-p5", 1000, 3, 5
	requireCLIOK(t, b, "queue", "create", dest, "--ring-size", "3")
	var out ringSlowOut
	pythonClient.run(t, b, "ring_slow", map[string]any{
		"dest": dest, "count": n, "ring_size": ring, "ack_delay_ms": 20, "prefetch": prefetch, "monitor": monitorURL(b),
	}, &out)
	t.Logf("produced %d messages in %.0f ms; %d monitor samples (%d while producing); received %d; max size %d, max delivering %d",
		n, out.ProduceMs, out.Stats.Samples, out.SamplesWhileProducing, len(out.Received), out.Stats.MaxSize, out.Stats.MaxDelivering)
	if len(out.Stats.Violations) > 0 {
		t.Errorf("the ring held more than %d + delivering messages: %+v", ring, out.Stats.Violations)
	}
	if out.SamplesWhileProducing < 10 {
		t.Errorf("only %d monitor samples while the producer ran: the bound was not observed", out.SamplesWhileProducing)
	}
	if out.Stats.MaxDelivering > prefetch {
		t.Errorf("monitor API showed %d messages delivering, want at most %d (prefetch-count)", out.Stats.MaxDelivering, prefetch)
	}
	if len(out.Received) == 0 || len(out.Received) > n/2 {
		t.Errorf("the consumer received %d of %d messages: want some, and far fewer than all", len(out.Received), n)
	}
	prev := -1
	for _, body := range out.Received {
		var i int
		if _, err := fmt.Sscanf(body, "m-%d", &i); err != nil || i <= prev {
			t.Errorf("received %q after m-%d: want increasing order, each once", body, prev)
			break
		}
		prev = i
	}
	end := out.MonitorEnd
	checkEqual(t, 0, end.Size, "monitor API size at the end")
	checkEqual(t, uint64(n), end.Enqueued, "monitor API enqueued (a ring never refuses a SEND)")
	checkEqual(t, uint64(n), end.RingRemoved+uint64(len(out.Received)), "ring-removed (%d) + received (%d)", end.RingRemoved, len(out.Received))
}
