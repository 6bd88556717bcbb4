package e2e

// Issue 4 end to end: destination patterns and headers, through python3-stomp and stompjs
// against a real titan process. Wildcards and their concrete egress destination, alias
// egress, bare destinations under each default-pattern, the sanitized invalid-destination
// ERROR, the queues pattern's dead-lettering, prefetch, delay and expiry, the spoofing guard
// and native-publisher metadata.

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// planOut is what the plan scenario reports: every MESSAGE by subscriber name.
type planOut struct {
	Received       map[string][]fullMsg `json:"received"`
	Errors         map[string][]any     `json:"errors"`
	ProducerErrors []any                `json:"producer_errors"`
}

type planSend struct {
	Dest    string            `json:"dest"`
	Body    string            `json:"body"`
	Headers map[string]string `json:"headers,omitempty"`
}

type planSub struct {
	Dest    string            `json:"dest"`
	Ack     string            `json:"ack,omitempty"`
	Headers map[string]string `json:"headers,omitempty"`
}

// runPlan runs the plan scenario (see sc_plan in pyclient.py) and fails on any ERROR frame.
func runPlan(t *testing.T, c stompClient, b *broker, subs map[string]planSub, before, sends []planSend, wait map[string][]string) planOut {
	t.Helper()
	return runPlanWith(t, c, b, nil, subs, before, sends, wait)
}

// runPlanWith is runPlan with extra scenario arguments (e.g. "version").
func runPlanWith(t *testing.T, c stompClient, b *broker, extra map[string]any, subs map[string]planSub, before, sends []planSend, wait map[string][]string) planOut {
	t.Helper()
	var out planOut
	if sends == nil {
		sends = []planSend{}
	}
	if wait == nil {
		wait = map[string][]string{}
	}
	args := map[string]any{"subs": subs, "sends": sends, "wait": wait}
	for k, v := range extra {
		args[k] = v
	}
	if len(before) > 0 {
		args["before"] = before
	}
	c.run(t, b, "plan", args, &out)
	for name, errs := range out.Errors {
		if len(errs) > 0 {
			t.Errorf("subscriber %s got ERROR frames: %v", name, errs)
		}
	}
	if len(out.ProducerErrors) > 0 {
		t.Errorf("producer got ERROR frames: %v", out.ProducerErrors)
	}
	return out
}

// checkDeliveries asserts that got holds exactly the bodies of want (in any order), each once,
// with the destination want gives it.
func checkDeliveries(t *testing.T, who string, got []fullMsg, want map[string]string) {
	t.Helper()
	var wantBodies []string
	for body := range want {
		wantBodies = append(wantBodies, body)
	}
	if !slices.Equal(sorted(wantBodies), sorted(msgBodies(got))) {
		t.Errorf("%s received %q, want exactly %q", who, msgBodies(got), sorted(wantBodies))
	}
	for _, m := range got {
		if d, ok := want[m.Body]; ok && m.Headers["destination"] != d {
			t.Errorf("%s: MESSAGE %q has destination %q, want %q", who, m.Body, m.Headers["destination"], d)
		}
	}
}

// Wildcard subscriptions (* one segment anywhere, > one or more trailing segments) receive the
// concrete canonical destination; > does not match the parent itself; slash and dot forms are
// the same channel. Checked with SEND writing straight to subscriptions and with fanout-mode.
func TestWildcardSubscriptionsReceiveConcreteDestinations(t *testing.T) {
	t.Parallel()
	for _, mode := range []struct{ name, opts string }{
		{"direct", ""},
		{"fanout-mode", `fanout-mode: "virtual"`},
	} {
		t.Run(mode.name, func(t *testing.T) {
			b := startBroker(t, yamlConfig(mode.opts))
			forEachClient(t, func(t *testing.T, c stompClient) {
				base := "/topic/wc-" + c.short
				subs := map[string]planSub{
					"star":  {Dest: base + "/*"},
					"tail":  {Dest: base + "/>"},
					"mid":   {Dest: base + "/*/paris"},
					"exact": {Dest: base},
					"alias": {Dest: "/events/wc-" + c.short + "/>"},
				}
				sends := []planSend{
					{Dest: base, Body: "to-parent"},
					{Dest: base + "/eu", Body: "to-eu"},
					{Dest: base + ".us", Body: "to-us-dotted"},
					{Dest: base + "/eu/paris", Body: "to-eu-paris"},
					{Dest: base + ".eu.lyon", Body: "to-eu-lyon"},
					{Dest: base + "/fence", Body: "fence-1"},
					{Dest: base + "/fence/paris", Body: "fence-2"},
					{Dest: base, Body: "parent-2"},
				}
				star := map[string]string{"to-eu": base + "/eu", "to-us-dotted": base + "/us", "fence-1": base + "/fence"}
				tail := map[string]string{
					"to-eu": base + "/eu", "to-us-dotted": base + "/us", "to-eu-paris": base + "/eu/paris",
					"to-eu-lyon": base + "/eu/lyon", "fence-1": base + "/fence", "fence-2": base + "/fence/paris",
				}
				mid := map[string]string{"to-eu-paris": base + "/eu/paris", "fence-2": base + "/fence/paris"}
				exact := map[string]string{"to-parent": base, "parent-2": base}
				keys := func(m map[string]string) []string {
					var out []string
					for k := range m {
						out = append(out, k)
					}
					return out
				}
				out := runPlan(t, c, b, subs, nil, sends, map[string][]string{
					"star": keys(star), "tail": keys(tail), "mid": keys(mid), "exact": keys(exact), "alias": keys(tail),
				})
				checkDeliveries(t, "SUBSCRIBE "+base+"/*", out.Received["star"], star)
				checkDeliveries(t, "SUBSCRIBE "+base+"/>", out.Received["tail"], tail)
				checkDeliveries(t, "SUBSCRIBE "+base+"/*/paris", out.Received["mid"], mid)
				checkDeliveries(t, "SUBSCRIBE "+base, out.Received["exact"], exact)
				checkDeliveries(t, "SUBSCRIBE /events/wc-"+c.short+"/>", out.Received["alias"], tail)
				for name, ms := range out.Received {
					for _, m := range ms {
						if strings.ContainsAny(m.Headers["destination"], "*>") {
							t.Errorf("%s: MESSAGE %v carries a wildcard destination, want the concrete one", name, m)
						}
						if m.Headers["subscription"] != "1" {
							t.Errorf("%s: MESSAGE %v has subscription %q, want 1 (the subscriber's id)", name, m, m.Headers["subscription"])
						}
					}
				}
			})
		})
	}
}

// A subscriber through an alias receives the primary prefix; a SEND through an alias reaches
// subscribers of the primary; /a/b and /a.b are one channel, delivered as /a/b.
func TestAliasEgressIsThePrimaryPrefix(t *testing.T) {
	t.Parallel()
	b := startBroker(t, yamlConfig(""))
	forEachClient(t, func(t *testing.T, c stompClient) {
		s := c.short
		subs := map[string]planSub{
			"events": {Dest: "/events/alias-" + s},
			"topic":  {Dest: "/topic/alias-" + s},
			"queues": {Dest: "/queues/alias-q-" + s},
			"dots":   {Dest: "/topic/dots-" + s + ".a.b"},
			"store":  {Dest: "/store/alias-s-" + s, Headers: map[string]string{"start-position": "first"}},
		}
		sends := []planSend{
			{Dest: "/topic/alias-" + s, Body: "via-topic"},
			{Dest: "/events/alias-" + s, Body: "via-events"},
			{Dest: "/queue/alias-q-" + s, Body: "via-queue"},
			{Dest: "/queues/alias-q-" + s, Body: "via-queues"},
			{Dest: "/topic/dots-" + s + "/a/b", Body: "slashes"},
			{Dest: "/events/dots-" + s + ".a/b", Body: "mixed"},
			{Dest: "/events-store/alias-s-" + s, Body: "via-events-store"},
			{Dest: "/store/alias-s-" + s, Body: "via-store"},
		}
		topic := map[string]string{"via-topic": "/topic/alias-" + s, "via-events": "/topic/alias-" + s}
		queue := map[string]string{"via-queue": "/queue/alias-q-" + s, "via-queues": "/queue/alias-q-" + s}
		dots := map[string]string{"slashes": "/topic/dots-" + s + "/a/b", "mixed": "/topic/dots-" + s + "/a/b"}
		out := runPlan(t, c, b, subs, nil, sends, map[string][]string{
			"events": {"via-topic", "via-events"}, "topic": {"via-topic", "via-events"},
			"queues": {"via-queue", "via-queues"}, "dots": {"slashes", "mixed"},
			"store": {"via-events-store", "via-store"},
		})
		checkDeliveries(t, "SUBSCRIBE /events/alias-"+s, out.Received["events"], topic)
		checkDeliveries(t, "SUBSCRIBE /topic/alias-"+s, out.Received["topic"], topic)
		checkDeliveries(t, "SUBSCRIBE /queues/alias-q-"+s, out.Received["queues"], queue)
		checkDeliveries(t, "SUBSCRIBE /topic/dots-"+s+".a.b", out.Received["dots"], dots)
		checkDeliveries(t, "SUBSCRIBE /store/alias-s-"+s, out.Received["store"], map[string]string{
			"via-events-store": "/events-store/alias-s-" + s, "via-store": "/events-store/alias-s-" + s,
		})
	})
}

// Bare destinations follow default-pattern. Under events (the default) a bare destination is
// a topic: nothing is retained for a later subscriber, /orders/created never falls back to
// /orders, and the egress destination stays bare. Under queues it is a queue: a message sent
// before anyone subscribed waits for the subscriber.
func TestBareDestinationsFollowDefaultPattern(t *testing.T) {
	t.Parallel()
	t.Run("events", func(t *testing.T) {
		b := startBroker(t, yamlConfig(""))
		forEachClient(t, func(t *testing.T, c stompClient) {
			base := "/orders-" + c.short
			subs := map[string]planSub{
				"created": {Dest: base + "/created"},
				"parent":  {Dest: base},
			}
			before := []planSend{{Dest: base + "/created", Body: "before-anyone-subscribed"}}
			sends := []planSend{
				{Dest: base + "/created", Body: "created-1"},
				{Dest: base + ".created", Body: "created-dotted"},
				{Dest: base, Body: "parent-1"},
			}
			out := runPlan(t, c, b, subs, before, sends, map[string][]string{
				"created": {"created-1", "created-dotted"}, "parent": {"parent-1"},
			})
			checkDeliveries(t, "SUBSCRIBE "+base+"/created", out.Received["created"],
				map[string]string{"created-1": base + "/created", "created-dotted": base + "/created"})
			checkDeliveries(t, "SUBSCRIBE "+base, out.Received["parent"], map[string]string{"parent-1": base})
		})
	})
	t.Run("queues", func(t *testing.T) {
		b := startBroker(t, yamlConfig(`default-pattern: queues`))
		forEachClient(t, func(t *testing.T, c stompClient) {
			dest := "/jobs-" + c.short + "/bare"
			before := []planSend{{Dest: dest, Body: "before-anyone-subscribed"}, {Dest: "/jobs-" + c.short + ".bare", Body: "dotted"}}
			out := runPlan(t, c, b, map[string]planSub{"q": {Dest: dest}}, before,
				[]planSend{{Dest: dest, Body: "after-subscribe"}},
				map[string][]string{"q": {"before-anyone-subscribed", "dotted", "after-subscribe"}})
			checkDeliveries(t, "SUBSCRIBE "+dest, out.Received["q"], map[string]string{
				"before-anyone-subscribed": dest, "dotted": dest, "after-subscribe": dest,
			})
			if got := msgBodies(out.Received["q"]); !slices.Equal(got, []string{"before-anyone-subscribed", "dotted", "after-subscribe"}) {
				t.Errorf("queue order: got %q, want FIFO", got)
			}
			qs := requireQueue(t, b, dest, "")
			checkEqual(t, "queues", qs.Pattern, "monitor API pattern of bare %s under default-pattern queues", dest)
			checkEqual(t, dest, qs.Destination, "monitor API destination")
		})
	})
	t.Run("events-store", func(t *testing.T) {
		b := startBroker(t, yamlConfig(`default-pattern: events-store`))
		forEachClient(t, func(t *testing.T, c stompClient) {
			dest := "/audit-" + c.short + "/log"
			before := []planSend{{Dest: dest, Body: "logged-1"}, {Dest: "/audit-" + c.short + ".log", Body: "logged-2"}}
			out := runPlan(t, c, b, map[string]planSub{
				"replay": {Dest: dest, Headers: map[string]string{"start-position": "first"}},
				"new":    {Dest: dest},
			}, before, []planSend{{Dest: dest, Body: "live"}},
				map[string][]string{"replay": {"logged-1", "logged-2", "live"}, "new": {"live"}})
			if got := msgBodies(out.Received["replay"]); !slices.Equal(got, []string{"logged-1", "logged-2", "live"}) {
				t.Errorf("start-position first subscriber received %q, want the log replayed then the live message", got)
			}
			checkDeliveries(t, "SUBSCRIBE "+dest+" (new)", out.Received["new"], map[string]string{"live": dest})
			for _, m := range out.Received["replay"] {
				checkEqual(t, dest, m.Headers["destination"], "destination of %v", m)
			}
		})
	})
}

// default-pattern may not be commands or queries: titan serve refuses to start and says why.
func TestDefaultPatternRefusesRequestPatterns(t *testing.T) {
	t.Parallel()
	for _, p := range []string{"commands", "queries"} {
		t.Run(p, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "titan.yml")
			requireNoError(t, os.WriteFile(path, []byte(yamlConfig("default-pattern: "+p)), 0o644))
			cmd := exec.Command(titanBin, "serve", "--config", path)
			cmd.Dir = dir
			done := make(chan struct{})
			var out []byte
			var err error
			go func() { out, err = cmd.CombinedOutput(); close(done) }()
			select {
			case <-done:
			case <-time.After(brokerStartTimeout):
				_ = cmd.Process.Kill()
				<-done
				t.Fatalf("titan serve with default-pattern %s kept running; output:\n%s", p, out)
			}
			if err == nil {
				t.Fatalf("titan serve with default-pattern %s exited 0, want a refusal; output:\n%s", p, out)
			}
			if !strings.Contains(string(out), "default-pattern") || strings.Contains(string(out), " ready: ") {
				t.Errorf("titan serve with default-pattern %s: want a message naming default-pattern and no ready line, got:\n%s", p, out)
			}
		})
	}
}

type invalidResult struct {
	Command   string `json:"command"`
	Dest      string `json:"dest"`
	ReceiptID string `json:"receipt_id"`
	Receipt   bool   `json:"receipt"`
	Closed    bool   `json:"closed"`
	Errors    []struct {
		Headers map[string]string `json:"headers"`
		Body    string            `json:"body"`
	} `json:"errors"`
}

// Every invalid destination — a wildcard in a SEND, a wildcard on a non-events SUBSCRIBE, an
// empty segment, > not last, over 512 bytes — is answered by one ERROR whose message is
// exactly "invalid destination" (carrying the receipt-id asked for), and the connection
// closes. A valid wildcard SUBSCRIBE beside them gets its RECEIPT.
func TestInvalidDestinationsAreRefused(t *testing.T) {
	t.Parallel()
	b := startBroker(t, yamlConfig(""))
	long := "/topic/" + strings.Repeat("x", 512)
	cases := []map[string]string{
		{"command": "SEND", "dest": "/topic/a/*"},
		{"command": "SEND", "dest": "/topic/a/>"},
		{"command": "SUBSCRIBE", "dest": "/queue/jobs/*"},
		{"command": "SUBSCRIBE", "dest": "/queue/jobs/>"},
		{"command": "SUBSCRIBE", "dest": "/command/jobs/*"},
		{"command": "SEND", "dest": "/queue//x"},
		{"command": "SUBSCRIBE", "dest": "/queue//x"},
		{"command": "SEND", "dest": "/topic/a/"},
		{"command": "SUBSCRIBE", "dest": "/topic/a/>/b"},
		{"command": "SEND", "dest": long},
		{"command": "SUBSCRIBE", "dest": "/topic/a/*"}, // valid: the control
	}
	forEachClient(t, func(t *testing.T, c stompClient) {
		var out struct {
			Results []invalidResult `json:"results"`
		}
		c.run(t, b, "invalid", map[string]any{"cases": cases}, &out)
		requireEqual(t, len(cases), len(out.Results), "results")
		for _, r := range out.Results {
			what := r.Command + " " + truncate(r.Dest, 40)
			if r.Dest == "/topic/a/*" && r.Command == "SUBSCRIBE" {
				if !r.Receipt || len(r.Errors) > 0 {
					t.Errorf("%s (valid): want a RECEIPT and no ERROR, got receipt %v, errors %v", what, r.Receipt, r.Errors)
				}
				continue
			}
			if r.Receipt {
				t.Errorf("%s: got a RECEIPT, want ERROR invalid destination", what)
				continue
			}
			if len(r.Errors) != 1 {
				t.Errorf("%s: got %d ERROR frames %v, want 1", what, len(r.Errors), r.Errors)
				continue
			}
			e := r.Errors[0]
			checkEqual(t, "invalid destination", e.Headers["message"], "%s: ERROR message", what)
			checkEqual(t, r.ReceiptID, e.Headers["receipt-id"], "%s: ERROR receipt-id", what)
			if strings.Contains(e.Body, "invalid destination:") || strings.Contains(e.Body, r.Dest) {
				t.Errorf("%s: ERROR body %q carries detail; only the sanitized text may reach the client", what, e.Body)
			}
			if !r.Closed {
				t.Errorf("%s: connection not closed after the ERROR", what)
			}
		}
	})
}

type dlqOut struct {
	Deliveries []struct {
		fullMsg
		SinceNackMs *float64 `json:"since_nack_ms"`
	} `json:"deliveries"`
	DeliveriesTotal int       `json:"deliveries_total"`
	DeadLetters     []fullMsg `json:"dead_letters"`
}

// A message NACKed max-deliveries times goes to the dead-letter queue with headers saying why:
// by default /queue/DLQ.<channel> (egress /queue/DLQ/<channel with slashes>), or the
// address setting's dead-letter. Each redelivery carries redelivered:true and delivery-count,
// and waits redelivery-delay after the NACK.
func TestDeadLetterAfterMaxDeliveries(t *testing.T) {
	t.Parallel()
	b := startBroker(t, yamlConfigWith("", `  address-settings:
    - {match: "dlq.#", max-deliveries: 2, redelivery-delay: 100}
    - {match: "dlqc.py", max-deliveries: 3, dead-letter: "/queue/parking.py"}
    - {match: "dlqc.js", max-deliveries: 3, dead-letter: "/queue/parking.js"}
`))
	forEachClient(t, func(t *testing.T, c stompClient) {
		for _, tc := range []struct {
			name, dest, dlq, dlqEgress string
			max                        int
			delayMs                    float64
		}{
			{"default dead-letter", "/queue/dlq/" + c.short, "/queue/DLQ.dlq." + c.short, "/queue/DLQ/dlq/" + c.short, 2, 100},
			{"configured dead-letter", "/queue/dlqc/" + c.short, "/queue/parking/" + c.short, "/queue/parking/" + c.short, 3, 0},
		} {
			t.Run(tc.name, func(t *testing.T) {
				var out dlqOut
				c.run(t, b, "dlq", map[string]any{"dest": tc.dest, "dlq": tc.dlq}, &out)
				requireEqual(t, tc.max, len(out.Deliveries), "deliveries before dead-lettering (max-deliveries)")
				checkEqual(t, tc.max, out.DeliveriesTotal, "deliveries once the dead letter arrived (none after it)")
				for i, d := range out.Deliveries {
					n := i + 1
					checkEqual(t, "poison", d.Body, "delivery %d body", n)
					checkEqual(t, tc.dest, d.Headers["destination"], "delivery %d destination", n)
					red, dc := d.Headers["redelivered"], d.Headers["delivery-count"]
					if n == 1 {
						if red == "true" {
							t.Errorf("first delivery %v is marked redelivered", d.fullMsg)
						}
						continue
					}
					checkEqual(t, "true", red, "delivery %d redelivered", n)
					checkEqual(t, strconv.Itoa(n), dc, "delivery %d delivery-count", n)
					if d.SinceNackMs == nil || *d.SinceNackMs < tc.delayMs*0.95 {
						t.Errorf("delivery %d came %v ms after the NACK, want at least the redelivery-delay %v ms", n, d.SinceNackMs, tc.delayMs)
					}
				}
				if len(out.DeadLetters) != 1 {
					t.Fatalf("dead-letter subscriber received %v, want the one message", out.DeadLetters)
				}
				dl := out.DeadLetters[0]
				checkEqual(t, "poison", dl.Body, "dead letter body")
				checkEqual(t, tc.dlqEgress, dl.Headers["destination"], "dead letter destination")
				checkEqual(t, tc.dest, dl.Headers["dlq-original-destination"], "dlq-original-destination")
				checkEqual(t, "max-deliveries", dl.Headers["dlq-reason"], "dlq-reason")
				checkEqual(t, strconv.Itoa(tc.max), dl.Headers["dlq-delivery-count"], "dlq-delivery-count")
				checkEqual(t, "kept", dl.Headers["x-app"], "custom header on the dead letter")
				checkEqual(t, "text/plain", dl.Headers["content-type"], "content-type on the dead letter")
				qs := eventuallyQueue(t, b, tc.dest, "empty with one dead letter", func(q queueStat) bool {
					return q.Size == 0 && q.DeadLettered == 1
				})
				checkEqual(t, tc.max, qs.Settings.MaxDeliveries, "monitor API max-deliveries")
			})
		}
	})
}

type prefetchOut struct {
	Received       []string  `json:"received"`
	ReceivedFirst  int       `json:"received_first"`
	ReceivedSecond int       `json:"received_second"`
	MonitorFirst   queueStat `json:"monitor_first"`
	MonitorSecond  queueStat `json:"monitor_second"`
}

// With 20 messages queued, a subscriber with prefetch-count 5 that acknowledges nothing holds
// exactly 5 unacknowledged deliveries; acknowledging 3 (cumulatively in client mode, one by
// one in client-individual) lets exactly 3 more through.
func TestPrefetchBoundsUnackedDeliveries(t *testing.T) {
	t.Parallel()
	b := startBroker(t, yamlConfig(""))
	const n, prefetch, ackN = 20, 5, 3
	forEachClient(t, func(t *testing.T, c stompClient) {
		for _, mode := range []string{"client", "client-individual"} {
			t.Run(mode, func(t *testing.T) {
				dest := "/queue/prefetch-" + c.short + "-" + mode
				var out prefetchOut
				c.run(t, b, "prefetch", map[string]any{
					"dest": dest, "count": n, "prefetch": prefetch, "ack": mode, "ack_n": ackN, "monitor": monitorURL(b),
				}, &out)
				checkEqual(t, prefetch, out.ReceivedFirst, "deliveries with nothing acknowledged")
				checkEqual(t, prefetch, out.MonitorFirst.Delivering, "monitor API delivering with nothing acknowledged")
				checkEqual(t, n, out.MonitorFirst.Size, "monitor API size with nothing acknowledged")
				checkEqual(t, prefetch+ackN, out.ReceivedSecond, "deliveries after acknowledging %d", ackN)
				checkEqual(t, prefetch, out.MonitorSecond.Delivering, "monitor API delivering after acknowledging %d", ackN)
				checkEqual(t, uint64(ackN), out.MonitorSecond.Acked, "monitor API acked")
				checkEqual(t, n-ackN, out.MonitorSecond.Size, "monitor API size after acknowledging %d", ackN)
				if want := numbered("pf", prefetch+ackN); !slices.Equal(want, out.Received) {
					t.Errorf("received %q, want %q in order", out.Received, want)
				}
			})
		}
	})
}

type scheduleOut struct {
	Received                []fullMsg  `json:"received"`
	MonitorAfterDelayedSend *queueStat `json:"monitor_after_delayed_send"`
	MonitorEnd              queueStat  `json:"monitor_end"`
	FutureExpires           string     `json:"future_expires"`
}

// A SEND with a delay header is held (counted as scheduled) and delivered no sooner than the
// delay, after messages sent later; one whose expires is in the past is never delivered and is
// counted as expired; expires in the future passes through as a header.
func TestDelayedAndExpiredMessages(t *testing.T) {
	t.Parallel()
	b := startBroker(t, yamlConfig(""))
	const delayMs = 600
	forEachClient(t, func(t *testing.T, c stompClient) {
		dest := "/queue/sched-" + c.short
		var out scheduleOut
		c.run(t, b, "schedule", map[string]any{"dest": dest, "delay_ms": delayMs, "monitor": monitorURL(b)}, &out)
		if want := []string{"future", "plain", "delayed", "after"}; !slices.Equal(want, msgBodies(out.Received)) {
			t.Errorf("received %q, want %q (expired never; delayed after the later sends)", msgBodies(out.Received), want)
		}
		if m := out.MonitorAfterDelayedSend; m == nil || m.Scheduled != 1 || m.Size != 1 {
			t.Errorf("monitor API just after the delayed SEND: %+v, want size 1, scheduled 1", m)
		}
		got := byBody(out.Received)
		if d, ok := got["delayed"]; ok {
			if d.AtMs == nil || *d.AtMs < delayMs-20 {
				t.Errorf("delayed message arrived %v ms after its SEND, want at least %d", d.AtMs, delayMs)
			}
		}
		if f, ok := got["future"]; ok {
			checkEqual(t, out.FutureExpires, f.Headers["expires"], "expires header of a live message")
		}
		checkEqual(t, uint64(1), out.MonitorEnd.Expired, "monitor API expired count")
	})
}

// Headers named stomp.* and x-titan-metadata on SEND are stripped; the standard five and
// custom headers pass through, to queue and topic subscribers alike.
func TestSpoofedReservedHeadersAreStripped(t *testing.T) {
	t.Parallel()
	b := startBroker(t, yamlConfig(""))
	forEachClient(t, func(t *testing.T, c stompClient) {
		s := c.short
		headers := map[string]string{
			"content-type":       "text/plain",
			"correlation-id":     "corr-1",
			"reply-to":           "/queue/replies-" + s,
			"priority":           "7",
			"x-app":              "custom",
			"stomp.content-type": "application/evil",
			"stomp.priority":     "0",
			"stomp.anything":     "spoof",
			"x-titan-metadata":   `{"role":"admin"}`,
		}
		out := runPlan(t, c, b,
			map[string]planSub{"queue": {Dest: "/queue/spoof-" + s}, "topic": {Dest: "/topic/spoof-" + s}}, nil,
			[]planSend{
				{Dest: "/queue/spoof-" + s, Body: "spoofed", Headers: headers},
				{Dest: "/topic/spoof-" + s, Body: "spoofed", Headers: headers},
			},
			map[string][]string{"queue": {"spoofed"}, "topic": {"spoofed"}})
		for name, ms := range out.Received {
			if len(ms) != 1 {
				t.Errorf("%s subscriber received %v, want one message", name, ms)
				continue
			}
			m := ms[0]
			for k := range m.Headers {
				if strings.HasPrefix(k, "stomp.") || k == "x-titan-metadata" {
					t.Errorf("%s: MESSAGE carries the spoofed header %s:%q: %v", name, k, m.Headers[k], m)
				}
			}
			for _, k := range []string{"content-type", "correlation-id", "reply-to", "priority", "x-app"} {
				checkEqual(t, headers[k], m.Headers[k], "%s: header %s", name, k)
			}
		}
	})
}

// Raw frames (no client library merges repeated headers): the first of a repeated header wins
// and exactly one goes out; stomp.* and x-titan-metadata are stripped.
func TestRepeatedHeaderFirstWinsOnTheWire(t *testing.T) {
	t.Parallel()
	b := startBroker(t, yamlConfig(""))
	sub := dialRaw(t, b)
	sub.connect()
	requireNoError(t, sub.write(frameOf("SUBSCRIBE", []string{"destination:/queue/repeat", "id:1", "receipt:r-sub"}, "")))
	f, err := sub.readFrame(10 * time.Second)
	requireNoError(t, err)
	requireEqual(t, "RECEIPT", f.command, "answer to SUBSCRIBE %v", f)
	pub := dialRaw(t, b)
	pub.connect()
	requireNoError(t, pub.write(frameOf("SEND", []string{
		"destination:/queue/repeat", "receipt:r-send",
		"x-app:first", "x-app:second", "correlation-id:c-first", "correlation-id:c-second",
		"stomp.correlation-id:spoof", "x-titan-metadata:spoof",
	}, "body")))
	f, err = pub.readFrame(10 * time.Second)
	requireNoError(t, err)
	requireEqual(t, "RECEIPT", f.command, "answer to SEND %v", f)
	m, err := sub.readFrame(10 * time.Second)
	requireNoError(t, err)
	requireEqual(t, "MESSAGE", m.command, "frame %v", m)
	counts := map[string]int{}
	for _, h := range m.headers {
		counts[h[0]]++
	}
	for _, k := range []string{"x-app", "correlation-id"} {
		checkEqual(t, 1, counts[k], "MESSAGE %v: number of %s headers", m, k)
	}
	v, _ := m.get("x-app")
	checkEqual(t, "first", v, "x-app")
	v, _ = m.get("correlation-id")
	checkEqual(t, "c-first", v, "correlation-id")
	for k := range counts {
		if strings.HasPrefix(k, "stomp.") || k == "x-titan-metadata" {
			t.Errorf("MESSAGE %v carries the spoofed header %s", m, k)
		}
	}
}

// POST /publish on the monitor port lets a native producer set metadata: stomp.<standard>
// becomes that header and wins over the bare header of the same name (exactly one goes out);
// the rest arrives as one read-only x-titan-metadata header holding a JSON object. Reserved
// names in the request's headers are stripped as on SEND.
func TestPublishMetadataReachesStompClients(t *testing.T) {
	t.Parallel()
	b := startBroker(t, yamlConfig(""))
	publish := func(t *testing.T, dest string) {
		t.Helper()
		status, body := postPublish(t, b, map[string]any{
			"destination": dest,
			"headers": map[string]string{
				"content-type": "text/plain", "correlation-id": "bare-corr", "priority": "1", "x-app": "custom",
				"stomp.reply-to": "/queue/spoofed", "x-titan-metadata": `{"spoof":"yes"}`,
			},
			"metadata": map[string]string{
				"stomp.correlation-id": "meta-corr", "stomp.priority": "4", "tenant": "acme", "trace": "t-1",
			},
			"body": "from-http",
		})
		if status != 200 {
			t.Fatalf("POST /publish %s: HTTP %d: %s", dest, status, body)
		}
	}
	check := func(t *testing.T, m fullMsg, dest string) {
		t.Helper()
		checkEqual(t, "from-http", m.Body, "body")
		checkEqual(t, dest, m.Headers["destination"], "destination")
		checkEqual(t, "meta-corr", m.Headers["correlation-id"], "correlation-id (stomp.correlation-id metadata wins)")
		checkEqual(t, "4", m.Headers["priority"], "priority (stomp.priority metadata wins)")
		checkEqual(t, "text/plain", m.Headers["content-type"], "content-type")
		checkEqual(t, "custom", m.Headers["x-app"], "custom header")
		if v, ok := m.header("reply-to"); ok {
			t.Errorf("reply-to %q: a stomp.reply-to request header became a header", v)
		}
		for k := range m.Headers {
			if strings.HasPrefix(k, "stomp.") {
				t.Errorf("MESSAGE carries %s:%q", k, m.Headers[k])
			}
		}
		var md map[string]string
		if err := json.Unmarshal([]byte(m.Headers["x-titan-metadata"]), &md); err != nil {
			t.Fatalf("x-titan-metadata %q is not a JSON object: %v", m.Headers["x-titan-metadata"], err)
		}
		if fmt.Sprint(md) != fmt.Sprint(map[string]string{"tenant": "acme", "trace": "t-1"}) {
			t.Errorf("x-titan-metadata = %v, want exactly the non-standard metadata {tenant:acme trace:t-1}", md)
		}
	}
	forEachClient(t, func(t *testing.T, c stompClient) {
		dest := "/queue/meta-" + c.short
		publish(t, dest)
		out := runPlan(t, c, b, map[string]planSub{"q": {Dest: dest}}, nil, nil, map[string][]string{"q": {"from-http"}})
		if len(out.Received["q"]) != 1 {
			t.Fatalf("received %v, want the one published message", out.Received["q"])
		}
		check(t, out.Received["q"][0], dest)
	})
	t.Run("on the wire", func(t *testing.T) {
		publish(t, "/queue/meta-raw")
		sub := dialRaw(t, b)
		sub.connect()
		requireNoError(t, sub.write(frameOf("SUBSCRIBE", []string{"destination:/queue/meta-raw", "id:1"}, "")))
		m, err := sub.readFrame(10 * time.Second)
		requireNoError(t, err)
		requireEqual(t, "MESSAGE", m.command, "frame %v", m)
		counts := map[string]int{}
		for _, h := range m.headers {
			counts[h[0]]++
		}
		for _, k := range []string{"correlation-id", "priority", "content-type", "x-titan-metadata"} {
			checkEqual(t, 1, counts[k], "MESSAGE %v: number of %s headers", m, k)
		}
		v, _ := m.get("correlation-id")
		checkEqual(t, "meta-corr", v, "correlation-id")
	})
}

// Egress drops a header the negotiated version cannot represent rather than corrupt the frame:
// a value holding a newline reaches a STOMP 1.2 subscriber (escaped) but not a 1.0 one, whose
// frame is otherwise intact.
func TestEgressDropsHeadersUnrepresentableInSTOMP10(t *testing.T) {
	t.Parallel()
	b := startBroker(t, yamlConfig(""))
	forEachClient(t, func(t *testing.T, c stompClient) {
		for _, v := range []string{"1.0", "1.2"} {
			t.Run(v, func(t *testing.T) {
				dest := "/queue/egress-" + c.short + "-" + v
				status, body := postPublish(t, b, map[string]any{
					"destination": dest, "body": "payload",
					"headers": map[string]string{"x-multi": "line1\nline2", "x-ok": "fine", "x-colon": "a:b"},
				})
				if status != 200 {
					t.Fatalf("POST /publish: HTTP %d: %s", status, body)
				}
				out := runPlanWith(t, c, b, map[string]any{"version": v}, map[string]planSub{"q": {Dest: dest}}, nil, nil,
					map[string][]string{"q": {"payload"}})
				if len(out.Received["q"]) != 1 {
					t.Fatalf("received %v, want the one message", out.Received["q"])
				}
				m := out.Received["q"][0]
				checkEqual(t, "payload", m.Body, "body")
				checkEqual(t, "fine", m.Headers["x-ok"], "x-ok")
				checkEqual(t, "a:b", m.Headers["x-colon"], "x-colon")
				got, has := m.header("x-multi")
				if v == "1.0" {
					if has {
						t.Errorf("STOMP 1.0 MESSAGE carries x-multi:%q, want the header dropped", got)
					}
				} else {
					checkEqual(t, "line1\nline2", got, "x-multi on STOMP 1.2")
				}
			})
		}
	})
}
