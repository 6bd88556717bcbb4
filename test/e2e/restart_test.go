package e2e

import (
	"fmt"
	"strings"
	"testing"
)

// Restart tests (issue 5): what the embedded store keeps across a titan restart on the same
// data directory, through the real binary and python3-stomp. "SIGTERM" restarts are clean
// shutdowns; "SIGKILL" ones crash the broker, which must not matter for anything that was
// receipted (DESIGN §5).

// collected is the pyclient.py "collect" scenario's result.
type collected struct {
	SubscribeMs  int64              `json:"subscribe_ms"`
	SubscribedMs int64              `json:"subscribed_ms"`
	Messages     []collectedMessage `json:"messages"`
	ArrivalMs    []int64            `json:"arrival_ms"`
	Errors       []map[string]any   `json:"errors"`
}

type collectedMessage struct {
	Body          string  `json:"body"`
	Sequence      *string `json:"sequence"`
	Redelivered   *string `json:"redelivered"`
	Destination   *string `json:"destination"`
	Ack           *string `json:"ack"`
	ContentLength *string `json:"content_length"`
}

func (c collected) bodies() []string {
	out := make([]string, len(c.Messages))
	for i, m := range c.Messages {
		out[i] = m.Body
	}
	return out
}

func (c collected) sequences() []string {
	out := make([]string, len(c.Messages))
	for i, m := range c.Messages {
		out[i] = ptrString(m.Sequence)
	}
	return out
}

type sentBodies struct {
	BeforeMs    int64 `json:"before_ms"`
	ReceiptedMs int64 `json:"receipted_ms"`
}

// restartHow restarts node's titan with SIGTERM or SIGKILL.
type restartHow struct {
	name    string
	restart func(n *titanNode)
}

var restartKinds = []restartHow{
	{"SIGTERM", func(n *titanNode) { n.stop() }},
	{"SIGKILL", func(n *titanNode) { n.kill() }},
}

func forEachRestart(t *testing.T, fn func(t *testing.T, how restartHow)) {
	for _, how := range restartKinds {
		t.Run(how.name, func(t *testing.T) {
			t.Parallel()
			fn(t, how)
		})
	}
}

// scheduleDelaysMs are the delays TestRestartKeepsScheduledMessageDueTime tries in turn: the
// restart must finish before the message is due, and on a loaded machine a restart can take
// longer than the first (the test then tries again with the next, it does not fail).
var scheduleDelaysMs = []int64{1500, 6000, 20000}

// A SEND with a delay to a queue, receipted, then titan restarted before it is due: after
// the restart the message arrives, after its due time and not before.
func TestRestartKeepsScheduledMessageDueTime(t *testing.T) {
	t.Parallel()
	pythonClient.require(t)
	forEachRestart(t, func(t *testing.T, how restartHow) {
		dest := "/queue/scheduled"
		var (
			node     *titanNode
			p        *titanProc
			sent     sentBodies
			earliest int64
			delayMs  int64
		)
		for i, d := range scheduleDelaysMs {
			delayMs = d
			node = newTitanNode(t, pebbleConfig(t.TempDir(), ""))
			p = node.start()
			runScenario(t, pythonClient, "send_bodies", map[string]any{
				"port": p.stompPorts[0], "dest": dest, "bodies": []string{"due-later"},
				"headers": map[string]string{"delay": fmt.Sprint(delayMs)},
			}, &sent)
			// The broker stamps the due time at SEND, after before_ms: due >= earliest.
			earliest = sent.BeforeMs + delayMs
			how.restart(node)
			p = node.start()
			ms := p.readyAt.UnixMilli()
			if ms < earliest {
				break
			}
			if i == len(scheduleDelaysMs)-1 {
				t.Fatalf("titan was ready again %d ms after the message was due (delay %d ms): too slow to test a restart before the due time", ms-earliest, delayMs)
			}
			t.Logf("titan was ready again %d ms after a %d ms delay was due; trying a longer delay", ms-earliest, delayMs)
			node.stop()
		}
		var got collected
		runScenario(t, pythonClient, "collect", map[string]any{
			"port": p.stompPorts[0], "dest": dest, "count": 1,
		}, &got)
		node.stop()

		requireEqual(t, 1, len(got.Messages), "messages received after the restart (%v)", got.bodies())
		checkEqual(t, "due-later", got.Messages[0].Body, "body")
		requireEqual(t, 1, len(got.ArrivalMs), "arrival times")
		arrival := got.ArrivalMs[0]
		t.Logf("sent at %d, due at the earliest %d; restarted (ready) at %d, subscribed at %d, arrived at %d (%+d ms from the earliest due time); redelivered:%s",
			sent.BeforeMs, earliest, p.readyAt.UnixMilli(), got.SubscribedMs, arrival, arrival-earliest, ptrString(got.Messages[0].Redelivered))
		if got.SubscribedMs >= earliest {
			t.Logf("note: the subscription started only %d ms after the earliest due time", got.SubscribedMs-earliest)
		}
		if arrival < earliest {
			t.Errorf("the scheduled message arrived %d ms before it was due", earliest-arrival)
		}
		// Bounded lateness: the scenario's own wait bounds it anyway; a message that keeps its
		// due time is not seconds late.
		if late := arrival - (sent.ReceiptedMs + delayMs); late > 5000 {
			t.Errorf("the scheduled message arrived %d ms after its latest possible due time", late)
		}
	})
}

// Five SENDs to /events-store/x, titan restarted: a subscriber starting at "first" gets
// sequences 1..5 with their bodies, and the next SEND gets sequence 6.
func TestRestartKeepsEventsStoreSequences(t *testing.T) {
	t.Parallel()
	pythonClient.require(t)
	forEachRestart(t, func(t *testing.T, how restartHow) {
		node := newTitanNode(t, pebbleConfig(t.TempDir(), ""))
		p := node.start()
		dest := "/events-store/x"
		runScenario(t, pythonClient, "send_bodies", map[string]any{
			"port": p.stompPorts[0], "dest": dest, "bodies": numbered("es", 5),
		}, &sentBodies{})

		how.restart(node)
		p = node.start()
		var got collected
		runScenario(t, pythonClient, "collect", map[string]any{
			"port": p.stompPorts[0], "dest": dest, "count": 5,
			"sub_headers": map[string]string{"start-position": "first"},
			"send_after":  []string{"es-5"},
		}, &got)
		node.stop()

		wantBodies := strings.Join(append(numbered("es", 5), "es-5"), ",")
		checkEqual(t, wantBodies, strings.Join(got.bodies(), ","), "bodies replayed from first, then the new SEND")
		checkEqual(t, "1,2,3,4,5,6", strings.Join(got.sequences(), ","), "sequence headers")
	})
}

// A durable subscription (durable-name, client-individual) acknowledges the first 2 of 5,
// disconnects; titan restarts; the same durable-name resumes at sequence 3.
func TestRestartResumesDurableSubscription(t *testing.T) {
	t.Parallel()
	pythonClient.require(t)
	node := newTitanNode(t, pebbleConfig(t.TempDir(), ""))
	p := node.start()
	dest := "/events-store/x"
	sub := map[string]string{"durable-name": "resume-me"}
	var first collected
	runScenario(t, pythonClient, "collect", map[string]any{
		"port": p.stompPorts[0], "dest": dest, "count": 5, "ack": "client-individual",
		"sub_headers": sub, "send": numbered("d", 5), "ack_first": 2,
	}, &first)
	checkEqual(t, "1,2,3,4,5", strings.Join(first.sequences(), ","), "sequences before the restart")

	node.stop()
	p = node.start()
	var resumed collected
	runScenario(t, pythonClient, "collect", map[string]any{
		"port": p.stompPorts[0], "dest": dest, "count": 3, "ack": "client-individual",
		"sub_headers": sub, "send_after": []string{"d-5"},
	}, &resumed)
	node.stop()

	checkEqual(t, "3,4,5,6", strings.Join(resumed.sequences(), ","), "sequences after the restart (resume after the last acknowledged, 2)")
	checkEqual(t, "d-2,d-3,d-4,d-5", strings.Join(resumed.bodies(), ","), "bodies after the restart")
}
