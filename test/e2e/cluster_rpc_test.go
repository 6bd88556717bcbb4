package e2e

// Issue 15, commands and queries in cluster mode: three `titan serve` processes form one
// broker; every requester connects to node 1, every responder to nodes 2 and 3
// (python3-stomp on one, stompjs on the other), so every request, response and executed:false
// answer crosses nodes, and every response reaches the requester's temp-queue on node 1
// from another node. The requester runs the single-node test's whole rpc_request scenario
// (rpc_test.go) with each client library.

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

func TestClusterRequestResponse(t *testing.T) {
	t.Parallel() // a cluster test shares the parallel phase: its elections and timeouts leave CPU idle
	pythonClient.require(t)
	stompjsClient.require(t)
	nodes := startCluster(t, "")
	const (
		balancedCount = 40
		lateDelayMs   = 700
	)
	for _, requester := range allClients {
		t.Run(requester.name+" requester", func(t *testing.T) {
			tag := "crpc-" + requester.short
			ch := func(kind, name string) string { return "/" + kind + "/" + tag + "/" + name }
			command, query := ch("command", "do"), ch("query", "ask")
			balanced, silent, slow, spy := ch("command", "balanced"), ch("command", "silent"), ch("command", "slow"), ch("command", "spy")
			grouped := ch("command", "grouped")
			// Both responder nodes serve every channel; warm<N>, subscribed last, tells when
			// node 1 sees node N's responders (NATS propagates interest along each route in
			// order).
			channels := func(warm string) []map[string]any {
				return []map[string]any{
					{"dest": command, "kind": "command"},
					{"dest": query, "kind": "query"},
					{"dest": balanced, "kind": "command", "responders": 2},
					{"dest": silent, "behaviour": "ignore"},
					{"dest": slow, "behaviour": "late", "delay_ms": lateDelayMs},
					{"dest": spy, "behaviour": "spy"},
					{"dest": grouped, "kind": "command"},
					{"dest": grouped, "kind": "command", "group": "market"},
					{"dest": warm, "kind": "command"},
				}
			}
			warm := []string{ch("command", "warm2"), ch("command", "warm3")}
			servers := []*liveScript{
				startLiveScript(t, pythonClient, nodeBroker(nodes[1]), "rpc_serve", map[string]any{"channels": channels(warm[0])}),
				startLiveScript(t, stompjsClient, nodeBroker(nodes[2]), "rpc_serve", map[string]any{"channels": channels(warm[1])}),
			}
			for _, s := range servers {
				s.waitReady()
			}
			waitResponders(t, nodes[0], warm...)

			var out rpcRequestOut
			replyQueue := "/queue/" + tag + "-replies"
			requester.run(t, nodeBroker(nodes[0]), "rpc_request", map[string]any{
				"command": command, "query": query,
				"balanced": "/commands/" + tag + "/balanced", "balanced_count": balancedCount,
				"nobody": ch("command", "nobody"), "silent": silent, "slow": slow, "spy": spy,
				"reply_queue": replyQueue, "short_timeout_ms": shortTimeoutMs,
				"grouped": grouped, "grouped_count": groupedCount,
			}, &out)
			if requester.short == "py" {
				t.Run("reply-to a temp-queue on a third node", func(t *testing.T) {
					replyToThirdNode(t, nodes, command, ch("command", "nobody"))
				})
			}
			served := make([]rpcServeOut, len(servers))
			for i, s := range servers {
				s.finish(&served[i])
				if len(served[i].Errors) > 0 {
					t.Errorf("responders on node %d reported errors: %q", i+2, served[i].Errors)
				}
			}
			if len(out.Errors) > 0 {
				t.Errorf("requester got ERROR frames: %q", out.Errors)
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
			// handled returns what responder dest#i handled on each responder node.
			handled := func(dest string, i int) [2][]fullMsg {
				var h [2][]fullMsg
				for n := range served {
					h[n] = served[n].Handled[fmt.Sprintf("%s#%d", dest, i)]
				}
				return h
			}
			total := func(h [2][]fullMsg) int { return len(h[0]) + len(h[1]) }
			tempReplies := "/temp-queue/" + out.Session + "/replies"

			t.Run("command round trip across nodes", func(t *testing.T) {
				var req *fullMsg
				for _, l := range handled(command, 0) {
					for i := range l {
						if l[i].Headers["correlation-id"] == "rt-cmd" {
							if req != nil {
								t.Errorf("rt-cmd delivered to more than one responder")
							}
							req = &l[i]
						}
					}
				}
				if req == nil {
					t.Fatalf("no responder on nodes 2 and 3 received rt-cmd")
				}
				checkEqual(t, "do-it", req.Body, "request body")
				checkEqual(t, command, req.Headers["destination"], "request destination")
				checkEqual(t, tempReplies, req.Headers["reply-to"], "reply-to as the responder sees it")
				if m, ok := one("rt-cmd"); ok {
					checkEqual(t, "true", m.Headers["executed"], "executed")
					checkEqual(t, command+"#0", m.Headers["responder"], "responder")
					checkEqual(t, "/temp-queue/replies", m.Headers["destination"], "response destination as the requester named it")
					if e, has := m.header("error"); has {
						t.Errorf("successful command response carries error:%q", e)
					}
				}
			})
			t.Run("query round trip across nodes", func(t *testing.T) {
				if m, ok := one("rt-query"); ok {
					checkEqual(t, "answer:what", m.Body, "query response body")
					checkEqual(t, "text/plain", m.Headers["content-type"], "query response content-type")
				}
			})
			t.Run("generated correlation-id", func(t *testing.T) {
				if out.GeneratedCorrelationID == nil || *out.GeneratedCorrelationID == "" {
					t.Fatalf("the RECEIPT of a request without correlation-id carries none")
				}
				if m, ok := one(*out.GeneratedCorrelationID); ok {
					checkEqual(t, "true", m.Headers["executed"], "executed")
				}
			})
			t.Run("reply-to a queue", func(t *testing.T) {
				if m, ok := one("rt-queue"); ok {
					checkEqual(t, replyQueue, m.Headers["destination"], "response destination")
					checkEqual(t, "true", m.Headers["executed"], "executed")
				}
			})
			t.Run("load balanced over responders on two nodes", func(t *testing.T) {
				for i := 0; i < balancedCount; i++ {
					if m, ok := one(fmt.Sprintf("lb-%d", i)); ok {
						checkEqual(t, "true", m.Headers["executed"], "executed of lb-%d", i)
					}
				}
				perNode := [2]int{}
				for r := 0; r < 2; r++ {
					h := handled(balanced, r)
					perNode[0] += len(h[0])
					perNode[1] += len(h[1])
				}
				checkEqual(t, balancedCount, perNode[0]+perNode[1], "requests handled in all (node 2, node 3: %v)", perNode)
				// Weighted random over 4 responders: P(a node gets none of 40) = 2^-39.
				if perNode[0] == 0 || perNode[1] == 0 {
					t.Errorf("requests per responder node %v: want both nodes to get work", perNode)
				}
				t.Logf("balanced requests handled: node 2 %d, node 3 %d", perNode[0], perNode[1])
			})
			t.Run("no responder", func(t *testing.T) {
				if m, ok := one("nobody-1"); ok {
					checkEqual(t, "false", m.Headers["executed"], "executed")
					checkEqual(t, "no responder", m.Headers["error"], "error")
					checkEqual(t, "/temp-queue/replies", m.Headers["destination"], "destination as the requester named it")
				}
			})
			checkRequestFailures(t, out, resp, one, requestFailureNames{tempReplies: tempReplies, silent: silent, slow: slow, grouped: grouped},
				func(dest string) int { return total(handled(dest, 0)) })
		})
	}
}

// nodeBroker is the STOMP address of a cluster node, for the client helpers.
func nodeBroker(n *clusterNode) *broker {
	return &broker{stompPort: n.stompPort, stompAddr: fmt.Sprintf("127.0.0.1:%d", n.stompPort)}
}

// waitResponders sends commands to each of dests through n until one is answered by a
// responder (executed:true) rather than by the broker ("no responder" while the responders'
// NATS interest has not yet reached n).
func waitResponders(t *testing.T, n *clusterNode, dests ...string) {
	t.Helper()
	c := dialRaw(t, nodeBroker(n))
	c.connect()
	requireNoError(t, c.write("SUBSCRIBE\nid:probe\ndestination:/temp-queue/probe\n\n\x00"))
	seq := 0
	for _, d := range dests {
		eventually(t, 30*time.Second, func() bool {
			seq++
			corr := fmt.Sprintf("probe-%d", seq)
			requireNoError(t, c.write("SEND\ndestination:"+d+"\nreply-to:/temp-queue/probe\ncorrelation-id:"+corr+"\ntimeout:10000\n\n\x00"))
			for {
				f, err := c.readFrame(15 * time.Second)
				requireNoError(t, err, "waiting for the answer to probe %s", corr)
				if f.command == "ERROR" {
					t.Fatalf("probe of %s: %s", d, f)
				}
				if got, _ := f.get("correlation-id"); f.command == "MESSAGE" && got == corr {
					ex, _ := f.get("executed")
					return ex == "true"
				}
				if !strings.HasPrefix(f.command, "MESSAGE") {
					t.Fatalf("probe of %s: unexpected %s", d, f)
				}
			}
		}, "a responder of "+d+" visible from node "+n.name)
	}
}

// replyToThirdNode: a requester on node 1 names as reply-to the temp-queue of a connection
// on node 3; the broker's "no responder" answer (from node 1) and a responder's response
// (from node 2 or 3) both reach it there.
func replyToThirdNode(t *testing.T, nodes []*clusterNode, command, nobody string) {
	owner := dialRaw(t, nodeBroker(nodes[2]))
	session, _ := owner.connect().get("session")
	requireNoError(t, owner.write("SUBSCRIBE\nid:in\ndestination:/temp-queue/inbox\nreceipt:sub\n\n\x00"))
	expectFrame(t, owner, "RECEIPT", "receipt-id", "sub")
	req := dialRaw(t, nodeBroker(nodes[0]))
	req.connect()
	replyTo := "/temp-queue/" + session + "/inbox"
	for i, d := range []string{nobody, command} {
		corr := fmt.Sprintf("third-%d", i)
		requireNoError(t, req.write("SEND\ndestination:"+d+"\nreply-to:"+replyTo+"\ncorrelation-id:"+corr+"\ntimeout:5000\nreceipt:r"+corr+"\n\n\x00"))
		expectFrame(t, req, "RECEIPT", "receipt-id", "r"+corr)
		m := expectFrame(t, owner, "MESSAGE", "correlation-id", corr)
		got := func(k string) string { v, _ := m.get(k); return v }
		// The answer carries the name its owner subscribed to (issue 26), not the qualified
		// reply-to another connection names it by.
		checkEqual(t, "/temp-queue/inbox", got("destination"), "destination of the answer to %s", corr)
		if i == 0 {
			checkEqual(t, "false", got("executed"), "executed of the answer to %s", corr)
			checkEqual(t, "no responder", got("error"), "error of the answer to %s", corr)
		} else {
			checkEqual(t, "true", got("executed"), "executed of the response to %s", corr)
			checkEqual(t, command+"#0", got("responder"), "responder of %s", corr)
		}
	}
}

// expectFrame reads c's next frame and fails unless it is a command frame whose header key
// is value.
func expectFrame(t *testing.T, c *rawConn, command, key, value string) *rawFrame {
	t.Helper()
	f, err := c.readFrame(15 * time.Second)
	requireNoError(t, err, "waiting for %s %s:%s", command, key, value)
	if v, _ := f.get(key); f.command != command || v != value {
		t.Fatalf("got %s, want %s with %s:%s", f, command, key, value)
	}
	return f
}

// checkRequestsAcrossNodes runs request/response on a cluster in brief (the external-NATS
// test calls it): a python3-stomp responder on node 2, a raw STOMP requester on node 1 — a
// command round trip, no responder, and a timeout, each answered on the requester's
// temp-queue.
func checkRequestsAcrossNodes(t *testing.T, nodes []*clusterNode, tag string) {
	t.Helper()
	do, silent, warm := "/command/"+tag+"/do", "/command/"+tag+"/silent", "/command/"+tag+"/warm"
	srv := startLiveScript(t, pythonClient, nodeBroker(nodes[1]), "rpc_serve", map[string]any{"channels": []map[string]any{
		{"dest": do, "kind": "command"},
		{"dest": silent, "behaviour": "ignore"},
		{"dest": warm, "kind": "command"},
	}})
	srv.waitReady()
	waitResponders(t, nodes[0], warm)
	req := dialRaw(t, nodeBroker(nodes[0]))
	req.connect()
	requireNoError(t, req.write("SUBSCRIBE\nid:r\ndestination:/temp-queue/r\nreceipt:sub\n\n\x00"))
	expectFrame(t, req, "RECEIPT", "receipt-id", "sub")
	for _, c := range []struct{ dest, corr, timeout, executed, err string }{
		{do, "x-do", "10000", "true", ""},
		{"/command/" + tag + "/nobody", "x-nobody", "10000", "false", "no responder"},
		{silent, "x-silent", "300", "false", "timeout"},
	} {
		requireNoError(t, req.write("SEND\ndestination:"+c.dest+"\nreply-to:/temp-queue/r\ncorrelation-id:"+c.corr+"\ntimeout:"+c.timeout+"\n\n\x00"))
		m := expectFrame(t, req, "MESSAGE", "correlation-id", c.corr)
		got := func(k string) string { v, _ := m.get(k); return v }
		checkEqual(t, "/temp-queue/r", got("destination"), "destination of the answer to %s (the name the requester used)", c.corr)
		checkEqual(t, c.executed, got("executed"), "executed of the answer to %s", c.corr)
		checkEqual(t, c.err, got("error"), "error of the answer to %s", c.corr)
	}
	var served rpcServeOut
	srv.finish(&served)
	checkEqual(t, 1, len(served.Handled[do+"#0"]), "requests the responder on node 2 handled")
}
