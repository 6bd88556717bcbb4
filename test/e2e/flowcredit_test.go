package e2e

import (
	"fmt"
	"strings"
	"testing"
)

// Issue 11, flow control on the unacknowledged count: a client-ack events subscription at
// its prefetch does not lose messages; the messages beyond its prefetch are held for it
// (issue 30: the producer does not wait for it); one that never acknowledges is closed as
// a slow consumer after slow-consumer-timeout while the others keep receiving; DROP stays
// an explicit slow-consumer-policy.

// TestFlowControlClientAckPrefetchLosesNothing: 12 events to a topic whose client-individual
// subscriber has prefetch-count 2 and acknowledges only as the test tells it: every message
// reaches it in order (before: 10 of 12 dropped, counted), and the auto subscriber beside it.
func TestFlowControlClientAckPrefetchLosesNothing(t *testing.T) {
	pythonClient.require(t)
	b := startBroker(t, yamlConfig(""))
	const topic, n = "/topic/credit", 12
	s := startLiveScript(t, pythonClient, b, "session", nil)
	for _, c := range []string{"acker", "auto", "prod"} {
		s.call(map[string]any{"op": "connect", "conn": c}, nil)
	}
	s.call(map[string]any{"op": "subscribe", "conn": "acker", "dest": topic, "ack": "client-individual",
		"headers": map[string]any{"prefetch-count": "2"}}, nil)
	s.call(map[string]any{"op": "subscribe", "conn": "auto", "dest": topic}, nil)
	var rids []string
	for i := range n {
		var r struct{ Receipt string }
		s.call(map[string]any{"op": "send", "conn": "prod", "dest": topic, "body": fmt.Sprintf("e%d", i), "wait": false}, &r)
		rids = append(rids, r.Receipt)
	}
	// The producer is not held at the prefetch: every RECEIPT comes before the first ACK.
	for _, r := range rids {
		s.call(map[string]any{"op": "wait_receipt", "conn": "prod", "receipt": r}, nil)
	}
	for k := 1; k <= n; k++ {
		s.call(map[string]any{"op": "wait_messages", "conn": "acker", "count": k}, nil)
		s.call(map[string]any{"op": "ack", "conn": "acker", "index": k - 1}, nil)
	}
	var acker, auto sessionState
	s.call(map[string]any{"op": "state", "conn": "acker"}, &acker)
	s.call(map[string]any{"op": "wait_messages", "conn": "auto", "count": n}, &auto)
	var want []string
	for i := range n {
		want = append(want, fmt.Sprintf("e%d", i))
	}
	checkEqual(t, strings.Join(want, ","), strings.Join(msgBodies(acker.Messages), ","), "the client-ack subscriber at its prefetch received")
	checkEqual(t, strings.Join(want, ","), strings.Join(msgBodies(auto.Messages), ","), "the auto subscriber received")
	s.finish(nil)
	m := scrapeSeries(t, b)
	checkEqual(t, 0.0, m["titan_events_dropped_total"], "events dropped")
	checkEqual(t, 0.0, m["titan_producer_pauses_total"], "producer pauses")
}

// TestFlowControlNeverAckingSubscriberClosed: a client-ack subscriber that never
// acknowledges while messages are held for it gets ERROR "slow consumer" after
// slow-consumer-timeout and is closed; the producer never waits for it and the healthy
// subscriber receives everything.
func TestFlowControlNeverAckingSubscriberClosed(t *testing.T) {
	pythonClient.require(t)
	b := startBroker(t, yamlConfigWith("", "  flow-control:\n    subscriber: {slow-consumer-timeout: 1000}\n"))
	const topic, n = "/topic/credit-stuck", 6
	s := startLiveScript(t, pythonClient, b, "session", nil)
	for _, c := range []string{"stuck", "healthy", "prod"} {
		s.call(map[string]any{"op": "connect", "conn": c}, nil)
	}
	s.call(map[string]any{"op": "subscribe", "conn": "stuck", "dest": topic, "ack": "client",
		"headers": map[string]any{"prefetch-count": "1"}}, nil)
	s.call(map[string]any{"op": "subscribe", "conn": "healthy", "dest": topic}, nil)
	for i := range n {
		s.call(map[string]any{"op": "send", "conn": "prod", "dest": topic, "body": fmt.Sprintf("s%d", i)}, nil)
	}
	var healthy, stuck sessionState
	s.call(map[string]any{"op": "wait_messages", "conn": "healthy", "count": n}, &healthy)
	s.call(map[string]any{"op": "wait_closed", "conn": "stuck"}, &stuck)
	if len(stuck.Errors) != 1 || stuck.Errors[0].Headers["message"] != "slow consumer" {
		t.Fatalf("stuck subscriber errors %+v, want one ERROR message:slow consumer", stuck.Errors)
	}
	if !strings.Contains(stuck.Errors[0].Body, "slow-consumer-timeout") {
		t.Errorf("ERROR body %q does not name slow-consumer-timeout", stuck.Errors[0].Body)
	}
	checkEqual(t, "s0", strings.Join(msgBodies(stuck.Messages), ","), "the stuck subscriber got its prefetch")
	checkEqual(t, "s0,s1,s2,s3,s4,s5", strings.Join(msgBodies(healthy.Messages), ","), "the healthy subscriber received")
	s.finish(nil)
	m := scrapeSeries(t, b)
	checkEqual(t, 1.0, m["titan_slow_consumers_closed_total"], "slow-consumer closes")
	checkEqual(t, 0.0, m["titan_events_dropped_by_policy_total"], "drops by policy")
}
