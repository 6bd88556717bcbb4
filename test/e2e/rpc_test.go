package e2e

// Issue 7 end to end: commands and queries over STOMP between real client libraries —
// python3-stomp and stompjs each as requester and as responder, in every pairing — against a
// real titan process: round trips, a generated correlation-id, a reply-to queue, load
// balancing over 3 responders, no responder, timeout, a late response dropped, temp-queue
// privacy.

import (
	"bufio"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

type rpcRequestOut struct {
	Session                string    `json:"session"`
	Responses              []fullMsg `json:"responses"`
	BResponses             []fullMsg `json:"b_responses"`
	Errors                 []string  `json:"errors"`
	GeneratedCorrelationID *string   `json:"generated_correlation_id"`
	Requests               []struct {
		Dest          string            `json:"dest"`
		CorrelationID *string           `json:"correlation_id"`
		Receipt       map[string]string `json:"receipt"`
	} `json:"requests"`
	ResponseMs map[string]float64 `json:"response_ms"`
}

// byCorrelation groups responses by correlation-id, in arrival order.
func byCorrelation(ms []fullMsg) map[string][]fullMsg {
	out := map[string][]fullMsg{}
	for _, m := range ms {
		out[m.Headers["correlation-id"]] = append(out[m.Headers["correlation-id"]], m)
	}
	return out
}

type rpcServeOut struct {
	Handled map[string][]fullMsg `json:"handled"`
	Errors  []string             `json:"errors"`
}

func TestRequestResponse(t *testing.T) {
	t.Parallel()
	b := startBroker(t, yamlConfig(""))
	const (
		balancedCount = 30
		lateDelayMs   = 700
	)
	for _, responder := range allClients {
		for _, requester := range allClients {
			t.Run(requester.name+" requester, "+responder.name+" responder", func(t *testing.T) {
				tag := "rpc-" + requester.short + "-" + responder.short
				ch := func(kind, name string) string { return "/" + kind + "/" + tag + "/" + name }
				command, query := ch("command", "do"), ch("query", "ask")
				balanced, silent, slow, spy := ch("command", "balanced"), ch("command", "silent"), ch("command", "slow"), ch("command", "spy")
				grouped := ch("command", "grouped")
				srv := startLiveScript(t, responder, b, "rpc_serve", map[string]any{"channels": []map[string]any{
					{"dest": command, "kind": "command"},
					{"dest": query, "kind": "query"},
					{"dest": balanced, "kind": "command", "responders": 3},
					{"dest": silent, "behaviour": "ignore"},
					{"dest": slow, "behaviour": "late", "delay_ms": lateDelayMs},
					{"dest": spy, "behaviour": "spy"},
					{"dest": grouped, "kind": "command"},
					{"dest": grouped, "kind": "command", "group": "market"},
				}})
				srv.waitReady()
				var out rpcRequestOut
				replyQueue := "/queue/" + tag + "-replies"
				requester.run(t, b, "rpc_request", map[string]any{
					"command": command, "query": query,
					// The requester sends to the alias of the channel the responders subscribed.
					"balanced": "/commands/" + tag + "/balanced", "balanced_count": balancedCount,
					"nobody": ch("command", "nobody"), "silent": silent, "slow": slow, "spy": spy,
					"reply_queue": replyQueue, "short_timeout_ms": shortTimeoutMs,
					"grouped": grouped, "grouped_count": groupedCount,
				}, &out)
				var served rpcServeOut
				srv.finish(&served)
				if len(out.Errors) > 0 {
					t.Errorf("requester got ERROR frames: %q", out.Errors)
				}
				if len(served.Errors) > 0 {
					t.Errorf("responders reported errors: %q", served.Errors)
				}
				resp := byCorrelation(out.Responses)
				one := func(corr string) (fullMsg, bool) {
					t.Helper()
					rs := resp[corr]
					if len(rs) != 1 {
						t.Errorf("correlation-id %s: %d responses %v, want exactly 1", corr, len(rs), rs)
						return fullMsg{}, false
					}
					return rs[0], true
				}
				handled := func(dest string, i int) []fullMsg { return served.Handled[fmt.Sprintf("%s#%d", dest, i)] }
				tempReplies := "/temp-queue/" + out.Session + "/replies"

				t.Run("command round trip", func(t *testing.T) {
					reqs := handled(command, 0)
					if len(reqs) < 1 {
						t.Fatalf("the command responder handled no request")
					}
					req := reqs[0]
					checkEqual(t, "do-it", req.Body, "request body")
					checkEqual(t, "rt-cmd", req.Headers["correlation-id"], "request correlation-id")
					checkEqual(t, command, req.Headers["destination"], "request destination")
					checkEqual(t, tempReplies, req.Headers["reply-to"], "reply-to as the responder sees it")
					if m, ok := one("rt-cmd"); ok {
						checkEqual(t, "true", m.Headers["executed"], "executed")
						checkEqual(t, command+"#0", m.Headers["responder"], "responder")
						if e, has := m.header("error"); has {
							t.Errorf("successful command response carries error:%q", e)
						}
					}
				})
				t.Run("query round trip", func(t *testing.T) {
					if m, ok := one("rt-query"); ok {
						checkEqual(t, "answer:what", m.Body, "query response body")
						checkEqual(t, "text/plain", m.Headers["content-type"], "query response content-type")
					}
				})
				t.Run("generated correlation-id", func(t *testing.T) {
					if out.GeneratedCorrelationID == nil || *out.GeneratedCorrelationID == "" {
						t.Fatalf("the RECEIPT of a request without correlation-id carries none")
					}
					gen := *out.GeneratedCorrelationID
					if m, ok := one(gen); ok {
						checkEqual(t, "true", m.Headers["executed"], "executed")
					}
					found := false
					for _, r := range handled(command, 0) {
						if r.Body == "no-corr" {
							found = true
							checkEqual(t, gen, r.Headers["correlation-id"], "correlation-id the responder saw")
						}
					}
					if !found {
						t.Errorf("the responder never saw the request without correlation-id")
					}
					for _, r := range out.Requests {
						if r.Receipt != nil && r.CorrelationID != nil && r.Receipt["correlation-id"] != *r.CorrelationID {
							t.Errorf("request %s with correlation-id %s: RECEIPT correlation-id %q", r.Dest, *r.CorrelationID, r.Receipt["correlation-id"])
						}
					}
				})
				t.Run("reply-to a queue", func(t *testing.T) {
					if m, ok := one("rt-queue"); ok {
						checkEqual(t, replyQueue, m.Headers["destination"], "response destination")
						checkEqual(t, "true", m.Headers["executed"], "executed")
					}
				})
				t.Run("load balancing over 3 responders", func(t *testing.T) {
					counts := map[string]int{}
					for i := 0; i < balancedCount; i++ {
						if m, ok := one(fmt.Sprintf("lb-%d", i)); ok {
							counts[m.Headers["responder"]]++
						}
					}
					for i := 0; i < 3; i++ {
						name := fmt.Sprintf("%s#%d", balanced, i)
						checkEqual(t, balancedCount/3, counts[name], "responses from %s (all: %v)", name, counts)
						checkEqual(t, balancedCount/3, len(handled(balanced, i)), "requests handled by %s", name)
					}
				})
				t.Run("no responder", func(t *testing.T) {
					if m, ok := one("nobody-1"); ok {
						checkEqual(t, "false", m.Headers["executed"], "executed")
						checkEqual(t, "no responder", m.Headers["error"], "error")
						checkEqual(t, "/temp-queue/replies", m.Headers["destination"], "destination as the requester named it")
						checkBrokerMessageID(t, m.Headers["message-id"])
					}
				})
				checkRequestFailures(t, out, resp, one, requestFailureNames{tempReplies: tempReplies, silent: silent, slow: slow, grouped: grouped},
					func(dest string) int { return len(handled(dest, 0)) })
			})
		}
	}
	t.Run("metrics", func(t *testing.T) {
		resp, err := httpClient.Get(monitorURL(b) + "/metrics")
		requireNoError(t, err)
		defer resp.Body.Close()
		requireEqual(t, http.StatusOK, resp.StatusCode, "GET /metrics")
		body, _ := io.ReadAll(resp.Body)
		// Every pairing's silent channel timed out once, and its slow channel dropped one
		// late response.
		for _, name := range []string{"titan_rpc_timeouts_total", "titan_rpc_dropped_responses_total", "titan_rpc_no_responder_total", "titan_rpc_requests_total"} {
			if metricSum(string(body), name) < 4 {
				t.Errorf("%s sums to %v over all series, want at least 4 (one per pairing)", name, metricSum(string(body), name))
			}
		}
	})
}

// metricSum adds the values of every series of the Prometheus metric name.
func metricSum(text, name string) float64 {
	var sum float64
	sc := bufio.NewScanner(strings.NewReader(text))
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, name+"{") && !strings.HasPrefix(line, name+" ") {
			continue
		}
		f := strings.Fields(line)
		if v, err := strconv.ParseFloat(f[len(f)-1], 64); err == nil {
			sum += v
		}
	}
	return sum
}

// The rpc_request scenario's timeout for the requests that time out, and the number of
// requests it sends per group.
const (
	shortTimeoutMs = 300
	groupedCount   = 3
)

// requestFailureNames are the destinations checkRequestFailures looks at: the requester's
// temp-queue of replies and the silent, slow and grouped responder channels.
// brokerMessageID is the form of every message-id the broker assigns (README "Message
// ids"): titan-<boot>-<n>, and titan-<node>-<boot>-<n> in cluster mode.
var brokerMessageID = regexp.MustCompile(`^titan-([A-Za-z0-9_.-]+-)?[0-9a-z]+-[0-9]+$`)

// checkBrokerMessageID reports an id not of brokerMessageID's form.
func checkBrokerMessageID(t *testing.T, id string) {
	t.Helper()
	if !brokerMessageID.MatchString(id) {
		t.Errorf("message-id %q, want titan-<boot>-<n>", id)
	}
}

type requestFailureNames struct{ tempReplies, silent, slow, grouped string }

// checkRequestFailures asserts the answers of the rpc_request scenario that one broker and
// a cluster share: a timeout answered with executed:false no earlier than the timeout, a
// late response dropped, a response to an unknown correlation-id dropped, requests kept in
// their group, and temp-queue privacy. handledBy counts the requests responder dest#0
// received, wherever it ran.
func checkRequestFailures(t *testing.T, out rpcRequestOut, resp map[string][]fullMsg, one func(string) (fullMsg, bool), n requestFailureNames, handledBy func(dest string) int) {
	t.Helper()
	t.Run("timeout answered with executed:false", func(t *testing.T) {
		if m, ok := one("timeout-1"); ok {
			checkEqual(t, "false", m.Headers["executed"], "executed")
			checkEqual(t, "timeout", m.Headers["error"], "error")
			checkEqual(t, "/temp-queue/replies", m.Headers["destination"], "destination as the requester named it")
			checkBrokerMessageID(t, m.Headers["message-id"])
		}
		if ms, ok := out.ResponseMs["timeout-1"]; !ok || ms < shortTimeoutMs*0.95 {
			t.Errorf("timeout answer came %v ms after the request (recorded: %v), want at least the %d ms timeout", ms, ok, shortTimeoutMs)
		}
		checkEqual(t, 1, handledBy(n.silent), "requests the silent responder received")
	})
	t.Run("late response dropped", func(t *testing.T) {
		if m, ok := one("late-1"); ok {
			checkEqual(t, "false", m.Headers["executed"], "executed")
			checkEqual(t, "timeout", m.Headers["error"], "error")
		}
		if m, ok := one("late-2"); ok {
			checkEqual(t, "true", m.Headers["executed"], "executed of the request after it")
		}
		checkEqual(t, 2, handledBy(n.slow), "requests the slow responder handled")
	})
	t.Run("response to an unknown correlation-id dropped", func(t *testing.T) {
		if len(resp["unknown-1"]) > 0 {
			t.Errorf("the requester received a response nobody asked for: %v", resp["unknown-1"])
		}
	})
	t.Run("requests stay in their group", func(t *testing.T) {
		for i := 0; i < groupedCount; i++ {
			if m, ok := one(fmt.Sprintf("grp-market-%d", i)); ok {
				checkEqual(t, n.grouped+"#0@market", m.Headers["responder"], "responder of a market request")
			}
			if m, ok := one(fmt.Sprintf("grp-default-%d", i)); ok {
				checkEqual(t, n.grouped+"#0", m.Headers["responder"], "responder of a default-group request")
			}
		}
	})
	t.Run("temp-queue privacy", func(t *testing.T) {
		if m, ok := one("spy-1"); ok {
			checkEqual(t, "ERROR access refused", m.Headers["spy-result"],
				"another connection's SUBSCRIBE to the requester's reply-to %s", n.tempReplies)
		}
		var bGot []string
		for _, m := range out.BResponses {
			bGot = append(bGot, m.Headers["correlation-id"])
		}
		checkEqual(t, "[iso-b]", fmt.Sprint(bGot), "responses to the second requester's /temp-queue/replies")
		if len(resp["iso-b"]) > 0 {
			t.Errorf("the first requester received the second's response %v: temp-queues with the same name are not private", resp["iso-b"])
		}
	})
}
