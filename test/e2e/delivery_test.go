package e2e

import (
	"fmt"
	"slices"
	"testing"
)

// delivery is one MESSAGE as a scenario recorded it (null headers decode as nil).
type delivery struct {
	Body          string  `json:"body"`
	MessageID     *string `json:"message_id"`
	Ack           *string `json:"ack"`
	Subscription  *string `json:"subscription"`
	Destination   *string `json:"destination"`
	Redelivered   *string `json:"redelivered"`
	Group         *string `json:"group"`
	ContentLength *string `json:"content_length"`
}

func (d delivery) String() string {
	s := func(p *string) string {
		if p == nil {
			return "<absent>"
		}
		return *p
	}
	return fmt.Sprintf("{body:%q destination:%s group:%s redelivered:%s message-id:%s}",
		d.Body, s(d.Destination), s(d.Group), s(d.Redelivered), s(d.MessageID))
}

func bodiesOf(ds []delivery) []string {
	out := make([]string, len(ds))
	for i, d := range ds {
		out[i] = d.Body
	}
	return out
}

func numbered(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s-%d", prefix, i)
	}
	return out
}

// Three subscribers of one topic each receive every message sent to it, exactly once.
func TestTopicFanOutReachesThreeSubscribers(t *testing.T) {
	t.Parallel()
	b := startBroker(t, yamlConfig(""))
	const n = 5
	forEachClient(t, func(t *testing.T, c stompClient) {
		var out struct {
			Received [][]string `json:"received"`
		}
		c.run(t, b, "fanout", map[string]any{"dest": "/topic/fanout-" + c.short, "subscribers": 3, "count": n}, &out)
		requireEqual(t, 3, len(out.Received), "subscriber count")
		want := sorted(numbered("fan", n))
		for i, got := range out.Received {
			if !slices.Equal(want, sorted(got)) {
				t.Errorf("subscriber %d received %q, want each of %q exactly once", i, got, want)
			}
		}
	})
}

// With two subscribers on one queue, each of 20 messages is delivered exactly once overall,
// and both subscribers get some (round-robin).
func TestQueueMessageReachesExactlyOneOfTwoSubscribers(t *testing.T) {
	t.Parallel()
	b := startBroker(t, yamlConfig(""))
	const n = 20
	forEachClient(t, func(t *testing.T, c stompClient) {
		var out struct {
			Received [][]string `json:"received"`
		}
		c.run(t, b, "queue", map[string]any{"dest": "/queue/work-" + c.short, "subscribers": 2, "count": n}, &out)
		requireEqual(t, 2, len(out.Received), "subscriber count")
		all := append(slices.Clone(out.Received[0]), out.Received[1]...)
		if want := sorted(numbered("q", n)); !slices.Equal(want, sorted(all)) {
			t.Errorf("deliveries over both subscribers = %q, want each of %q exactly once", sorted(all), want)
		}
		for i, got := range out.Received {
			if len(got) == 0 {
				t.Errorf("subscriber %d received none of the %d messages (the other got %d): not distributed between subscribers",
					i, n, len(out.Received[1-i]))
			}
		}
	})
}

// A client-individual subscriber NACKs a message; the broker delivers it again with
// redelivered:true.
func TestClientIndividualNackRedelivers(t *testing.T) {
	t.Parallel()
	b := startBroker(t, yamlConfig(""))
	forEachClient(t, func(t *testing.T, c stompClient) {
		var out struct {
			Deliveries []delivery `json:"deliveries"`
		}
		c.run(t, b, "nack", map[string]any{"dest": "/queue/nack-" + c.short}, &out)
		if len(out.Deliveries) != 2 {
			t.Fatalf("got %d deliveries %v, want the message then its redelivery", len(out.Deliveries), out.Deliveries)
		}
		first, again := out.Deliveries[0], out.Deliveries[1]
		checkEqual(t, "nack-me", first.Body, "first delivery body")
		checkEqual(t, "nack-me", again.Body, "redelivery body")
		if first.Redelivered != nil && *first.Redelivered == "true" {
			t.Errorf("first delivery %v is marked redelivered", first)
		}
		if again.Redelivered == nil || *again.Redelivered != "true" {
			t.Errorf("delivery after NACK %v lacks redelivered:true", again)
		}
	})
}

// A client-ack subscriber holding unacknowledged messages loses its TCP connection without
// DISCONNECT; every one of those messages is redelivered, with redelivered:true, to another
// subscriber of the queue.
func TestAbruptDisconnectRedeliversToAnotherSubscriber(t *testing.T) {
	t.Parallel()
	b := startBroker(t, yamlConfig(""))
	const n = 5
	forEachClient(t, func(t *testing.T, c stompClient) {
		var out struct {
			A           []string   `json:"a"`
			B           []delivery `json:"b"`
			BBeforeKill *int       `json:"b_before_kill"`
		}
		c.run(t, b, "abrupt", map[string]any{"dest": "/queue/abrupt-" + c.short, "count": n}, &out)
		want := sorted(numbered("abrupt", n))
		if !slices.Equal(want, sorted(out.A)) {
			t.Fatalf("subscriber A received %q before the disconnect, want %q", out.A, want)
		}
		if out.BBeforeKill == nil || *out.BBeforeKill != 0 {
			t.Errorf("subscriber B received %v messages while A still held them unacknowledged, want 0", out.BBeforeKill)
		}
		if got := sorted(bodiesOf(out.B)); !slices.Equal(want, got) {
			t.Errorf("subscriber B received %q after A's connection dropped, want each of %q once", got, want)
		}
		for _, d := range out.B {
			if d.Redelivered == nil || *d.Redelivered != "true" {
				t.Errorf("redelivery %v lacks redelivered:true", d)
			}
		}
	})
}

// A subscriber in group market never receives default-group messages and a default-group
// subscriber never receives market messages; MESSAGE carries group only for market.
func TestGroupIsolation(t *testing.T) {
	t.Parallel()
	b := startBroker(t, yamlConfig(""))
	const n = 3
	forEachClient(t, func(t *testing.T, c stompClient) {
		var out struct {
			Market  []delivery `json:"market"`
			Default []delivery `json:"default"`
		}
		c.run(t, b, "groups", map[string]any{"dest": "/topic/orders", "count": n}, &out)
		if got, want := sorted(bodiesOf(out.Market)), sorted(numbered("market", n)); !slices.Equal(want, got) {
			t.Errorf("market subscriber received %q, want exactly %q", got, want)
		}
		if got, want := sorted(bodiesOf(out.Default)), sorted(numbered("default", n)); !slices.Equal(want, got) {
			t.Errorf("default subscriber received %q, want exactly %q", got, want)
		}
		for _, d := range out.Market {
			if d.Group == nil || *d.Group != "market" {
				t.Errorf("market MESSAGE %v: want group:market", d)
			}
		}
		for _, d := range out.Default {
			if d.Group != nil {
				t.Errorf("default-group MESSAGE %v carries a group header, want none", d)
			}
		}
	})
}

// SENDs inside a transaction reach the subscriber only after COMMIT, and never after ABORT.
// Fences sent outside the transaction bound "not yet": a message the broker had delivered at
// SEND time would arrive before the fence sent after it.
func TestTransactionSendsAppearOnlyAfterCommit(t *testing.T) {
	t.Parallel()
	b := startBroker(t, yamlConfig(""))
	forEachClient(t, func(t *testing.T, c stompClient) {
		var out struct {
			BeforeCommit   []string `json:"before_commit"`
			Received       []string `json:"received"`
			ProducerErrors []any    `json:"producer_errors"`
		}
		c.run(t, b, "transaction", map[string]any{"dest": "/queue/tx-" + c.short}, &out)
		if !slices.Equal([]string{"fence-1"}, out.BeforeCommit) {
			t.Errorf("before COMMIT the subscriber had %q, want only fence-1", out.BeforeCommit)
		}
		if count(out.Received, "tx-b1") != 0 {
			t.Errorf("a SEND of an aborted transaction was delivered: %q", out.Received)
		}
		if want := sorted([]string{"fence-1", "tx-a1", "tx-a2", "fence-2"}); !slices.Equal(want, sorted(out.Received)) {
			t.Errorf("subscriber received %q, want exactly %q", out.Received, want)
		}
		if len(out.ProducerErrors) != 0 {
			t.Errorf("producer got ERROR frames: %v", out.ProducerErrors)
		}
	})
}
