package e2e

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The crash test (DESIGN §5, issue 5): a RECEIPT for a persistent SEND to a queue means the
// message is committed, so no SIGKILL may lose it.
const (
	crashDest      = "/queue/crash"
	crashProducers = 4
	crashKills     = 4
	crashWindow    = 16   // unanswered SENDs per producer
	crashMaxSends  = 5000 // per producer and run: bounds the final drain on a fast machine
	// The kill comes crashMinDelay..crashMaxDelay after every producer has seen its first
	// RECEIPT (and so is sending at full speed).
	crashMinDelay = 50 * time.Millisecond
	crashMaxDelay = 1000 * time.Millisecond
)

// crashConsumerRuns are the runs with a consumer: the middle ones, so the messages of the
// first and the last run wait in the store across a kill and recovered messages are consumed
// both while producers send (run 2) and by the final drain.
var crashConsumerRuns = map[int]bool{2: true, 3: true}

// crashDrainPasses bounds the final drain (see the test).
const crashDrainPasses = 3

// crashSeed is the seed of the kill timing: TITAN_CRASH_SEED replays a run.
func crashSeed(t *testing.T) uint64 {
	if s := os.Getenv("TITAN_CRASH_SEED"); s != "" {
		n, err := strconv.ParseUint(s, 10, 64)
		requireNoError(t, err, "TITAN_CRASH_SEED")
		return n
	}
	return uint64(time.Now().UnixNano())
}

// crashLedger is what every client saw over all the runs of one test.
type crashLedger struct {
	acked     map[string]int // body -> run whose producer saw its RECEIPT
	delivered map[string]int // body -> deliveries over all runs
}

// bodyRun is the broker run a crash-test body was produced in ("c<run>-p<producer>-<n>").
func bodyRun(body string) int {
	run, _, _ := strings.Cut(strings.TrimPrefix(body, "c"), "-")
	n, err := strconv.Atoi(run)
	if err != nil {
		return -1
	}
	return n
}

// Several python3-stomp producers send persistent messages with receipts to one queue while
// titan is SIGKILLed at a random moment, four times over on one data directory; a consumer
// (client-individual acks) runs in the middle runs. After a final restart the queue is
// drained: every message whose RECEIPT a producer saw must have been delivered at some point
// (zero lost), and every message recovered by a restart carries redelivered:true on its
// first delivery after it. Duplicates (a message the consumer had received, and perhaps
// acknowledged, when the kill came is delivered again after it) are allowed and only
// counted.
func TestCrashKillNineLosesNoReceiptedMessage(t *testing.T) {
	t.Parallel()
	pythonClient.require(t)
	seed := crashSeed(t)
	t.Logf("kill-timing seed %d (TITAN_CRASH_SEED=%d replays it)", seed, seed)
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))

	node := newTitanNode(t, pebbleConfig(t.TempDir(), ""))
	led := &crashLedger{acked: map[string]int{}, delivered: map[string]int{}}
	redeliveryViolations := []string{}
	start := time.Now()

	for run := 1; run <= crashKills; run++ {
		p := node.start()
		var consumer *scenarioProc
		if crashConsumerRuns[run] {
			consumer = startScenario(t, pythonClient, "crash_consume",
				map[string]any{"port": p.stompPorts[0], "dest": crashDest, "max_seconds": 60})
			consumer.waitReady(t)
		}
		producers := make([]*scenarioProc, crashProducers)
		for i := range producers {
			producers[i] = startScenario(t, pythonClient, "crash_produce", map[string]any{
				"port": p.stompPorts[0], "dest": crashDest, "prefix": fmt.Sprintf("c%d-p%d", run, i),
				"window": crashWindow, "max": crashMaxSends,
			})
		}
		for _, pr := range producers {
			pr.waitLine(t, 30*time.Second, "a first RECEIPT", func(l json.RawMessage) bool {
				return strings.HasPrefix(string(l), `{"acked"`)
			})
		}
		delay := crashMinDelay + time.Duration(rng.Int64N(int64(crashMaxDelay-crashMinDelay)))
		<-time.After(delay) // the random kill moment, not an assertion
		node.kill()

		// The producers and the consumer see their connection drop and exit.
		runAcked, runSent := 0, 0
		for i, pr := range producers {
			if !pr.wait(15 * time.Second) {
				t.Errorf("run %d: producer %d did not exit within 15s of the kill", run, i)
			}
			for _, l := range pr.snapshot() {
				var v struct {
					Acked *string `json:"acked"`
					Sent  *int    `json:"sent"`
				}
				requireNoError(t, json.Unmarshal(l, &v), "producer line %s", l)
				if v.Acked != nil {
					if _, dup := led.acked[*v.Acked]; dup {
						t.Errorf("run %d: producer %d printed the RECEIPT of %q twice", run, i, *v.Acked)
					}
					led.acked[*v.Acked] = run
					runAcked++
				}
				if v.Sent != nil {
					runSent += *v.Sent
				}
			}
		}
		runDelivered := 0
		if consumer != nil {
			if !consumer.wait(15 * time.Second) {
				t.Errorf("run %d: consumer did not exit within 15s of the kill", run)
			}
			seen := map[string]bool{}
			for _, l := range consumer.snapshot() {
				var v struct {
					Body        *string `json:"body"`
					Redelivered *string `json:"redelivered"`
				}
				requireNoError(t, json.Unmarshal(l, &v), "consumer line %s", l)
				if v.Body == nil {
					continue
				}
				runDelivered++
				led.delivered[*v.Body]++
				if !seen[*v.Body] && bodyRun(*v.Body) < run && (v.Redelivered == nil || *v.Redelivered != "true") {
					redeliveryViolations = append(redeliveryViolations,
						fmt.Sprintf("run %d: %q (stored in run %d) first delivered with redelivered:%s", run, *v.Body, bodyRun(*v.Body), ptrString(v.Redelivered)))
				}
				seen[*v.Body] = true
			}
		}
		t.Logf("run %d: killed %v after the first receipts; producers sent %d, saw %d receipts; consumer received %d",
			run, delay.Round(time.Millisecond), runSent, runAcked, runDelivered)
		if runAcked == 0 {
			t.Fatalf("run %d: no producer saw a RECEIPT", run)
		}
	}

	// Final run: nothing but the drain, so everything it gets was recovered by the restart.
	// A drain ends at a fence sent after it subscribed; recovered messages are queued before
	// any listener opens, so one pass gets them all. Should messages still be missing, up
	// to crashDrainPasses-1 more passes look for late ones (reported separately).
	p := node.start()
	finalSeen := map[string]bool{}
	finalCount, latePasses := 0, 0
	missing := func() int {
		n := 0
		for body := range led.acked {
			if led.delivered[body] == 0 {
				n++
			}
		}
		return n
	}
	for pass := 1; pass <= crashDrainPasses; pass++ {
		fence := fmt.Sprintf("FENCE-%d", pass)
		var drained struct {
			Deliveries [][2]*string `json:"deliveries"`
		}
		runScenario(t, pythonClient, "drain", map[string]any{
			"port": p.stompPorts[0], "dest": crashDest, "fence": fence, "drain_timeout": 40,
		}, &drained)
		for _, d := range drained.Deliveries {
			if d[0] == nil || strings.HasPrefix(*d[0], "FENCE-") {
				continue
			}
			body := *d[0]
			finalCount++
			led.delivered[body]++
			if pass > 1 {
				latePasses++
			}
			if !finalSeen[body] && (d[1] == nil || *d[1] != "true") {
				redeliveryViolations = append(redeliveryViolations,
					fmt.Sprintf("final run: %q (stored in run %d) first delivered with redelivered:%s", body, bodyRun(body), ptrString(d[1])))
			}
			finalSeen[body] = true
		}
		if missing() == 0 {
			break
		}
	}
	node.stop()
	if latePasses > 0 {
		t.Errorf("%d recovered messages were delivered only after a fence sent after the drain subscribed: recovery did not queue them ahead of new messages", latePasses)
	}

	var lost []string
	for body := range led.acked {
		if led.delivered[body] == 0 {
			lost = append(lost, body)
		}
	}
	sort.Strings(lost)
	dups, unreceipted := 0, 0
	for body, n := range led.delivered {
		if n > 1 {
			dups += n - 1
		}
		if _, ok := led.acked[body]; !ok {
			unreceipted++ // sent, never receipted (in flight at the kill), yet committed
		}
	}
	t.Logf("crash summary (seed %d, %v): acknowledged (RECEIPT seen) %d, delivered %d distinct (final drain %d deliveries), lost %d, duplicate deliveries %d, delivered without a RECEIPT seen %d",
		seed, time.Since(start).Round(time.Millisecond), len(led.acked), len(led.delivered), finalCount, len(lost), dups, unreceipted)

	if len(lost) > 0 {
		t.Errorf("%d messages whose RECEIPT a producer saw were never delivered (zero lost is the bar); first: %q",
			len(lost), lost[:min(len(lost), 20)])
	}
	if len(redeliveryViolations) > 0 {
		t.Errorf("%d recovered messages lacked redelivered:true on their first delivery after a restart; first: %q",
			len(redeliveryViolations), redeliveryViolations[:min(len(redeliveryViolations), 10)])
	}
	for body := range led.delivered {
		if bodyRun(body) < 1 || bodyRun(body) > crashKills {
			t.Errorf("delivered a message nobody sent: %q", body)
		}
	}
}

func ptrString(p *string) string {
	if p == nil {
		return "<absent>"
	}
	return *p
}
