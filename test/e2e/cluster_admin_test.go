package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

// pyClusterAdmin runs clients/pycluster_admin.py (python3-stomp, on pyclient.py's helpers).
var pyClusterAdmin = stompClient{
	name:  "python3-stomp",
	short: "py",
	cmd: func(scenario, args string) (string, []string) {
		return systemPython, []string{filepath.Join("clients", "pycluster_admin.py"), scenario, args}
	},
	err: func() error { return pythonErr },
}

// clusterBrowse runs `titan queue browse DEST -o json` on n and returns the bodies.
func clusterBrowse(t *testing.T, n *clusterNode, destination string) []string {
	t.Helper()
	var res struct {
		Messages []struct {
			Body    string            `json:"body"`
			Headers map[string]string `json:"headers"`
		} `json:"messages"`
	}
	r := requireCLIOK(t, n.broker(), "queue", "browse", destination, "--output", "json")
	requireNoError(t, json.Unmarshal([]byte(r.stdout), &res), r.stdout)
	out := []string{}
	for _, m := range res.Messages {
		out = append(out, m.Body)
	}
	return out
}

// clusterListed returns destination's row of `titan queue list -o json` on n.
func clusterListed(t *testing.T, n *clusterNode, destination string) (queueStat, bool) {
	t.Helper()
	var l queueList
	r := requireCLIOK(t, n.broker(), "queue", "list", "--output", "json")
	requireNoError(t, json.Unmarshal([]byte(r.stdout), &l), r.stdout)
	return findListed(l, destination, "default")
}

// collectedBodies returns the bodies a "collect" scenario received, in order.
func collectedBodies(c collected) []string {
	var out []string
	for _, m := range c.Messages {
		out = append(out, m.Body)
	}
	return out
}

// In cluster mode the queue actions of the real CLI act on JetStream from any node: messages
// sent through node 0 are browsed, paused, resumed, purged, re-driven, deleted and created
// through nodes 1 and 2, and a python3-stomp consumer on another node sees the effect.
func TestClusterQueueActionsFromAnyNode(t *testing.T) {
	t.Parallel() // a cluster test shares the parallel phase: its elections and timeouts leave CPU idle
	pythonClient.require(t)
	nodes := startCluster(t, `    - {match: "cadm.dead", max-deliveries: 1}
`)
	send := func(n *clusterNode, destination string, headers map[string]string, bodies ...string) {
		t.Helper()
		var out struct {
			Error string `json:"error"`
		}
		args := map[string]any{"dest": destination, "bodies": bodies}
		if headers != nil {
			args["headers"] = headers
		}
		pythonClient.run(t, &broker{stompPort: n.stompPort}, "send_bodies", args, &out)
		requireEqual(t, "", out.Error, "send to "+destination)
	}
	const jobs = "/queue/cadm/jobs"
	send(nodes[0], jobs, nil, "a", "b", "c")

	t.Run("browse from every other node", func(t *testing.T) {
		for _, n := range nodes[1:] {
			if got := clusterBrowse(t, n, jobs); !slices.Equal(got, []string{"a", "b", "c"}) {
				t.Fatalf("node %s browses %q, want a b c in order", n.name, got)
			}
		}
		out := requireCLIOK(t, nodes[2].broker(), "queue", "browse", jobs, "--limit", "2").stdout
		if !strings.Contains(out, "2 messages shown from queue "+jobs) {
			t.Errorf("browse --limit 2 output:\n%s", out)
		}
		// Browsing consumed nothing.
		if q, ok := clusterListed(t, nodes[0], jobs); !ok || q.Size != 3 {
			t.Fatalf("after browsing the queue list shows %+v (listed %v), want size 3", q, ok)
		}
	})

	t.Run("pause on node 2 holds deliveries on node 1 until resumed", func(t *testing.T) {
		requireCLIOK(t, nodes[2].broker(), "queue", "pause", jobs)
		eventually(t, 10*time.Second, func() bool {
			q, ok := clusterListed(t, nodes[0], jobs)
			return ok && q.Paused
		}, "the queue list on node 0 shows %s paused", jobs)
		consumer := startScenario(t, pythonClient, "collect", map[string]any{"port": nodes[1].stompPort, "dest": jobs, "count": 3, "ack": "client-individual", "ack_first": 3})
		consumer.waitReady(t)
		// The consumer's node pulls (its pull request waits on the paused consumer) and
		// nothing is delivered.
		eventually(t, 10*time.Second, func() bool {
			q, ok := clusterListed(t, nodes[0], jobs)
			return ok && q.Consumers > 0
		}, "node 1's pull request on %s", jobs)
		if q, _ := clusterListed(t, nodes[2], jobs); q.Delivering != 0 || q.Size != 3 || !q.Paused {
			t.Fatalf("paused queue: %+v, want 3 stored, none delivering", q)
		}
		if lines := consumer.snapshot(); len(lines) > 1 {
			t.Fatalf("the paused queue delivered: %s", lines)
		}
		r := requireCLIOK(t, nodes[1].broker(), "queue", "resume", jobs)
		if !strings.Contains(r.stdout, "resumed queue "+jobs) {
			t.Errorf("resume output: %s", r.stdout)
		}
		var got collected
		consumer.result(t, &got)
		if !slices.Equal(collectedBodies(got), []string{"a", "b", "c"}) || len(got.Errors) != 0 {
			t.Fatalf("after resume node 1 received %q (errors %v), want a b c", collectedBodies(got), got.Errors)
		}
		eventually(t, 10*time.Second, func() bool {
			q, ok := clusterListed(t, nodes[2], jobs)
			return ok && q.Size == 0 && !q.Paused
		}, "%s empty and running after the consumer acknowledged everything", jobs)
	})

	t.Run("purge on node 1", func(t *testing.T) {
		send(nodes[0], jobs, nil, "d", "e")
		send(nodes[0], jobs, map[string]string{"delay": "3600000"}, "later")
		out := requireCLIOK(t, nodes[1].broker(), "queue", "purge", jobs).stdout
		if !strings.Contains(out, "purged 3 messages from queue "+jobs+" ") {
			t.Fatalf("purge output: %s", out)
		}
		if got := clusterBrowse(t, nodes[2], jobs); len(got) != 0 {
			t.Fatalf("after purge node 2 browses %q", got)
		}
		// The queue still works: a later message reaches a consumer on node 2.
		var got collected
		pythonClient.run(t, &broker{stompPort: nodes[2].stompPort}, "collect", map[string]any{"dest": jobs, "count": 1, "send": []string{"f"}}, &got)
		if !slices.Equal(collectedBodies(got), []string{"f"}) {
			t.Fatalf("after purge the consumer received %q, want only f", collectedBodies(got))
		}
	})

	t.Run("redrive on node 2 back to the original queue", func(t *testing.T) {
		const dead, dlq = "/queue/cadm/dead", "/queue/DLQ.cadm.dead"
		// Node 1 NACKs each message once (max-deliveries 1): the queues pattern dead-letters
		// them with their dlq-* headers.
		var nacked struct {
			Seen   []string `json:"seen"`
			Errors []any    `json:"errors"`
			Error  string   `json:"error"`
		}
		runClusterWith(t, pyClusterAdmin, nodes, "dead_letter", map[string]any{"dest": dead, "bodies": []string{"p1", "p2", "p3"}, "headers": map[string]string{"x-app": "kept"}}, &nacked)
		requireEqual(t, "", nacked.Error, "dead_letter scenario")
		var dl []string
		eventually(t, 10*time.Second, func() bool {
			dl = clusterBrowse(t, nodes[1], dlq)
			return len(dl) == 3
		}, "3 dead letters browsed on node 1 (last %q)", &dl)
		if !slices.Equal(dl, []string{"p1", "p2", "p3"}) {
			t.Fatalf("node 1 browses the DLQ as %q, want p1 p2 p3", dl)
		}
		// The NACKing subscriber is gone; wait until its node's last pull request expired, so
		// the re-driven messages go to the next subscriber rather than to that request.
		eventually(t, 10*time.Second, func() bool {
			q, ok := clusterListed(t, nodes[0], dead)
			return ok && q.Consumers == 0 && q.Delivering == 0
		}, "no pull request nor delivery left on %s", dead)
		var res struct {
			From  string         `json:"from"`
			Moved int            `json:"moved"`
			To    map[string]int `json:"to"`
		}
		r := requireCLIOK(t, nodes[2].broker(), "queue", "redrive", dlq, "--output", "json")
		requireNoError(t, json.Unmarshal([]byte(r.stdout), &res), r.stdout)
		if res.Moved != 3 || res.To[dead] != 3 || res.From != "/queue/DLQ/cadm/dead" {
			t.Fatalf("redrive = %+v, want 3 moved from /queue/DLQ/cadm/dead to %s", res, dead)
		}
		if got := clusterBrowse(t, nodes[0], dlq); len(got) != 0 {
			t.Fatalf("after redrive the DLQ holds %q", got)
		}
		// Back on their queue in order, without the dlq-* headers, their own headers kept.
		var back struct {
			Messages []struct {
				Body    string            `json:"body"`
				Headers map[string]string `json:"headers"`
			} `json:"messages"`
		}
		r = requireCLIOK(t, nodes[0].broker(), "queue", "browse", dead, "--output", "json")
		requireNoError(t, json.Unmarshal([]byte(r.stdout), &back), r.stdout)
		if len(back.Messages) != 3 {
			t.Fatalf("after redrive %s holds %s", dead, r.stdout)
		}
		for i, m := range back.Messages {
			if want := fmt.Sprint("p", i+1); m.Body != want || m.Headers["x-app"] != "kept" || m.Headers["dlq-original-destination"] != "" || m.Headers["dlq-reason"] != "" {
				t.Errorf("re-driven message %d = %q %v, want %s with x-app and no dlq-* headers", i, m.Body, m.Headers, want)
			}
		}
		var got collected
		pythonClient.run(t, &broker{stompPort: nodes[1].stompPort}, "collect", map[string]any{"dest": dead, "count": 3}, &got)
		if !slices.Equal(collectedBodies(got), []string{"p1", "p2", "p3"}) {
			t.Log(requireCLIOK(t, nodes[0].broker(), "queue", "list").stdout)
			for _, n := range nodes {
				n.mu.Lock()
				t.Logf("%s: %s", n.name, grepLines(n.logs[len(n.logs)-1].String(), "cluster-queues"))
				n.mu.Unlock()
			}
			t.Fatalf("the consumer of %s on node 1 received %q, want p1 p2 p3", dead, collectedBodies(got))
		}
	})

	t.Run("delete on node 2, create on node 1, set refused", func(t *testing.T) {
		send(nodes[0], jobs, nil, "g", "h")
		requireCLIFail(t, nodes[2].broker(), "titan: queue "+jobs+" is not empty (use --force)\n", "queue", "delete", jobs)
		out := requireCLIOK(t, nodes[2].broker(), "queue", "delete", jobs, "--force").stdout
		if !strings.HasPrefix(out, "deleted queue "+jobs+" ") || !strings.HasSuffix(out, ", discarding 2 messages\n") {
			t.Fatalf("delete output: %s", out)
		}
		if _, ok := clusterListed(t, nodes[0], jobs); ok {
			t.Fatalf("node 0 still lists %s after delete", jobs)
		}
		requireCLIFail(t, nodes[1].broker(), "titan: no queue "+jobs+" (see `titan queue list`)\n", "queue", "delete", jobs)
		requireCLIFail(t, nodes[1].broker(), "titan: no queue /queue/cadm/jobs in group nogroup (see `titan queue list`)\n", "queue", "purge", jobs, "--group", "nogroup")

		// A node still subscribed to a deleted (paused) queue goes on with a fresh consumer:
		// the discarded messages never arrive, the next SEND does.
		const live = "/queue/cadm/live"
		send(nodes[0], live, nil, "old1", "old2")
		requireCLIOK(t, nodes[2].broker(), "queue", "pause", live)
		consumer := startScenario(t, pythonClient, "collect", map[string]any{"port": nodes[1].stompPort, "dest": live, "count": 1})
		consumer.waitReady(t)
		eventually(t, 10*time.Second, func() bool {
			q, ok := clusterListed(t, nodes[0], live)
			return ok && q.Consumers > 0
		}, "node 1's pull request on %s", live)
		if out := requireCLIOK(t, nodes[2].broker(), "queue", "delete", live, "--force").stdout; !strings.HasSuffix(out, ", discarding 2 messages\n") {
			t.Fatalf("delete output: %s", out)
		}
		send(nodes[0], live, nil, "fresh")
		var got collected
		consumer.result(t, &got)
		if !slices.Equal(collectedBodies(got), []string{"fresh"}) {
			t.Fatalf("the subscriber of the deleted queue received %q, want only fresh", collectedBodies(got))
		}

		const made = "/queue/cadm/made"
		requireCLIOK(t, nodes[1].broker(), "queue", "create", made)
		if q, ok := clusterListed(t, nodes[2], made); !ok || q.Size != 0 {
			t.Fatalf("node 2 lists the created queue as %+v (listed %v)", q, ok)
		}
		r := titanCLI(t, nodes[2].broker(), "queue", "set", made, "--ring-size", "5")
		if r.code == 0 || !strings.Contains(r.stderr, "not supported in cluster mode") {
			t.Fatalf("queue set in cluster mode: %v", r)
		}
		resp, err := httpClient.Post(monitorURL(nodes[0].broker())+"/titan/monitor/queues/ring-size?destination=/queue/cadm/made&size=5", "", nil)
		requireNoError(t, err)
		var body struct {
			Code string `json:"code"`
		}
		requireNoError(t, json.NewDecoder(resp.Body).Decode(&body))
		resp.Body.Close()
		if resp.StatusCode != http.StatusNotImplemented || body.Code != "unsupported_in_cluster" {
			t.Fatalf("POST ring-size in cluster mode: HTTP %d %q, want 501 unsupported_in_cluster", resp.StatusCode, body.Code)
		}
		r = titanCLI(t, nodes[2].broker(), "queue", "create", "/queue/cadm/limited", "--max-pending-bytes", "1024")
		if r.code == 0 || !strings.Contains(r.stderr, "not supported in cluster mode") {
			t.Fatalf("queue create --max-pending-bytes in cluster mode: %v", r)
		}
	})

	t.Run("adapter counters on /metrics", func(t *testing.T) {
		dupl := map[string]string{"_AMQ_DUPL_ID": "cadm-1"}
		send(nodes[0], "/queue/cadm/dupl", dupl, "once")
		send(nodes[1], "/queue/cadm/dupl", dupl, "once")
		send(nodes[0], "/events-store/cadm-log", dupl, "once")
		send(nodes[1], "/events-store/cadm-log", dupl, "once")
		scrape := scrapeMetrics(t, nodes[1].broker())
		for _, want := range []string{
			`titan_cluster_queue_duplicates_total{node="n1"} 1`,
			`titan_cluster_events_store_duplicates_total{node="n1"} 1`,
			`titan_cluster_requests_offered_total{node="n1"} 0`,
			`titan_cluster_requests_busy_total{node="n1"} 0`,
			`titan_cluster_response_claims_total{node="n1"} 0`,
		} {
			if !strings.Contains(scrape, want+"\n") {
				t.Errorf("node 1's /metrics lacks %q:\n%s", want, grepLines(scrape, "titan_cluster_"))
			}
		}
		// JetStream, not the node's local store, made those SENDs durable: the local
		// store's group commit series would mislead, so they are not exported.
		if strings.Contains(scrape, "titan_store_group_commits_total") || strings.Contains(scrape, "titan_store_records_appended_total") {
			t.Errorf("cluster mode exports the local store's group commit series:\n%s", grepLines(scrape, "titan_store_"))
		}
		if s := scrapeMetrics(t, nodes[0].broker()); !regexp.MustCompile(`(?m)^titan_cluster_queue_duplicates_total\{node="n0"\} 0$`).MatchString(s) {
			t.Errorf("node 0 (first SEND, not a duplicate) counts:\n%s", grepLines(s, "duplicates"))
		}
	})
}

// grepLines returns the lines of s containing sub.
func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
