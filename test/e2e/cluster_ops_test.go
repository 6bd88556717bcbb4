package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// Operating a cluster (issue 15, "Operating it"): from any node, the monitor API's
// GET /titan/monitor/cluster, `titan cluster`, `titan queue list`, /metrics and the web
// console show the whole cluster: the nodes, which node leads each stream, its replicas,
// and the queues as JetStream sees them.

// clusterView is GET /titan/monitor/cluster as these tests read it.
type clusterView struct {
	Mode       string `json:"mode"`
	Cluster    string `json:"cluster"`
	Node       string `json:"node"`
	MetaLeader string `json:"metaLeader"`
	Size       int    `json:"size"`
	Quorum     int    `json:"quorum"`
	Nodes      []struct {
		Name       string   `json:"name"`
		Up         bool     `json:"up"`
		Self       bool     `json:"self"`
		MetaLeader bool     `json:"metaLeader"`
		Leads      []string `json:"leads"`
	} `json:"nodes"`
	Streams []clusterStreamView `json:"streams"`
	Errors  []string            `json:"errors"`
}

type clusterStreamView struct {
	Name     string `json:"name"`
	Group    string `json:"group"`
	Kind     string `json:"kind"`
	Leader   string `json:"leader"`
	Messages uint64 `json:"messages"`
	LastSeq  uint64 `json:"lastSeq"`
	Replicas []struct {
		Name    string `json:"name"`
		Current bool   `json:"current"`
		Offline bool   `json:"offline"`
		Lag     uint64 `json:"lag"`
	} `json:"replicas"`
}

// stream returns the stream named name, if listed.
func (v clusterView) stream(name string) (clusterStreamView, bool) {
	for _, s := range v.Streams {
		if s.Name == name {
			return s, true
		}
	}
	return clusterStreamView{}, false
}

// nodeBroker is n as a broker of the single-node helpers (monitor and STOMP addresses).
func (n *clusterNode) broker() *broker {
	n.mu.Lock()
	defer n.mu.Unlock()
	return &broker{stompAddr: "127.0.0.1:" + strconv.Itoa(n.stompPort), stompPort: n.stompPort, monitorAddr: n.monitorAddr}
}

// getCluster is GET /titan/monitor/cluster on n; ok is false when n does not answer 200.
func getCluster(n *clusterNode) (clusterView, bool) {
	var v clusterView
	resp, err := httpClient.Get(monitorURL(n.broker()) + "/titan/monitor/cluster")
	if err != nil {
		return v, false
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK || json.NewDecoder(resp.Body).Decode(&v) != nil {
		return v, false
	}
	return v, true
}

func TestClusterOperatorView(t *testing.T) {
	t.Parallel() // a cluster test shares the parallel phase: its elections and timeouts leave CPU idle
	pythonClient.require(t)
	nodes := startCluster(t, "")
	const dest = "/queue/ops"
	opsQ, opsES := queueStream("default", "ops", 0), logStream("default", "ops-log") // cluster_partition_test.go
	var sent struct {
		Error string `json:"error"`
	}
	pythonClient.run(t, &broker{stompPort: nodes[0].stompPort}, "send_bodies", map[string]any{"dest": dest, "bodies": []string{"a", "b", "c"}}, &sent)
	requireEqual(t, "", sent.Error, "send")
	pythonClient.run(t, &broker{stompPort: nodes[1].stompPort}, "send_bodies", map[string]any{"dest": "/events-store/ops-log", "bodies": []string{"e1"}}, &sent)
	requireEqual(t, "", sent.Error, "events-store send")
	names := []string{nodes[0].name, nodes[1].name, nodes[2].name}

	t.Run("monitor API from every node", func(t *testing.T) {
		var leaders []string
		for _, n := range nodes {
			var v clusterView
			eventually(t, 20*time.Second, func() bool {
				var ok bool
				v, ok = getCluster(n)
				if !ok || len(v.Nodes) != 3 || v.MetaLeader == "" {
					return false
				}
				for _, x := range v.Nodes {
					if !x.Up {
						return false
					}
				}
				s, ok := v.stream(opsQ)
				if !ok || s.Leader == "" || len(s.Replicas) != 2 {
					return false
				}
				for _, r := range s.Replicas {
					if !r.Current || r.Offline {
						return false
					}
				}
				return true
			}, "node %s reports 3 nodes up and %s with a leader and 2 current replicas (last %+v)", n.name, opsQ, &v)
			requireEqual(t, "embedded", v.Mode, "mode")
			requireEqual(t, "titan-e2e", v.Cluster, "cluster name")
			requireEqual(t, n.name, v.Node, "answering node")
			var got []string
			for _, x := range v.Nodes {
				got = append(got, x.Name)
				if x.Self != (x.Name == n.name) {
					t.Errorf("node %s: self flag of %s is %v", n.name, x.Name, x.Self)
				}
			}
			if !slices.Equal(names, got) {
				t.Fatalf("node %s lists nodes %q, want %q", n.name, got, names)
			}
			q, _ := v.stream(opsQ)
			requireEqual(t, "default", q.Group, "queue stream group")
			requireEqual(t, "queues", q.Kind, "queue stream kind")
			requireEqual(t, uint64(3), q.Messages, "messages stored in "+opsQ)
			es, ok := v.stream(opsES)
			if !ok || es.Kind != "events-store" || es.Messages != 1 {
				t.Errorf("node %s: events-store stream = %+v, %v", n.name, es, ok)
			}
			// The leader is listed as leading it, and is not among its replicas.
			for _, x := range v.Nodes {
				if slices.Contains(x.Leads, opsQ) != (x.Name == q.Leader) {
					t.Errorf("node %s: %s leads %q but the stream's leader is %s", n.name, x.Name, x.Leads, q.Leader)
				}
			}
			for _, r := range q.Replicas {
				if r.Name == q.Leader {
					t.Errorf("the leader %s is listed among its own replicas", q.Leader)
				}
			}
			leaders = append(leaders, q.Leader)
		}
		if leaders[0] != leaders[1] || leaders[1] != leaders[2] {
			t.Errorf("nodes disagree on %s's leader: %q", opsQ, leaders)
		}
	})

	t.Run("titan queue list and titan cluster from any node", func(t *testing.T) {
		// Every node, node 0 included: the messages entered through it, so its dispatcher
		// lists the queue too, and JetStream's figures must win there as well.
		for _, n := range nodes {
			var l queueList
			r := requireCLIOK(t, n.broker(), "queue", "list", "--output", "json")
			requireNoError(t, json.Unmarshal([]byte(r.stdout), &l), r.stdout)
			q, ok := findListed(l, dest, "default")
			if !ok || q.Size != 3 {
				t.Fatalf("node %s: queue list has %s = %+v (listed %v), want size 3 as JetStream holds it: %s", n.name, dest, q, ok, r.stdout)
			}
			var raw struct {
				Queues []struct {
					Destination string `json:"destination"`
					Leader      string `json:"leader"`
					Replicas    []any  `json:"replicas"`
				} `json:"queues"`
			}
			requireNoError(t, json.Unmarshal([]byte(r.stdout), &raw))
			for _, x := range raw.Queues {
				if x.Destination == dest && (!slices.Contains(names, x.Leader) || len(x.Replicas) != 2) {
					t.Errorf("node %s: %s has leader %q and replicas %v, want a node and 2 replicas", n.name, dest, x.Leader, x.Replicas)
				}
			}
			table := requireCLIOK(t, n.broker(), "queue", "list").stdout
			if !strings.Contains(table, "LEADER") || !regexp.MustCompile(`(?m)^default\s+/queue/ops\s+3\s`).MatchString(table) {
				t.Errorf("node %s: queue list table:\n%s", n.name, table)
			}
			out := requireCLIOK(t, n.broker(), "cluster").stdout
			for _, want := range []string{"Cluster titan-e2e (embedded mode), answered by " + n.name, opsQ, opsES, n.name + " (this node)"} {
				if !strings.Contains(out, want) {
					t.Errorf("node %s: `titan cluster` lacks %q:\n%s", n.name, want, out)
				}
			}
			if !regexp.MustCompile(`(?m)^` + opsQ + `\s+default\s+queues\s+n\d\s+3\s+3\s+n\d (current|lag \d+), n\d (current|lag \d+)\s*$`).MatchString(out) {
				t.Errorf("node %s: `titan cluster` stream row:\n%s", n.name, out)
			}
		}
	})

	// Browse reaches JetStream's copy of the queue from every node, the one whose dispatcher
	// took the SENDs included, and removes nothing (purge and re-drive: cluster_admin_test.go).
	t.Run("browse shows the stored messages from every node", func(t *testing.T) {
		for _, n := range nodes {
			if got := clusterBrowse(t, n, dest); len(got) != 3 {
				t.Errorf("node %s: browse %s = %q, want 3 messages", n.name, dest, got)
			}
		}
		var l queueList
		r := requireCLIOK(t, nodes[0].broker(), "queue", "list", "--output", "json")
		requireNoError(t, json.Unmarshal([]byte(r.stdout), &l), r.stdout)
		if q, ok := findListed(l, dest, "default"); !ok || q.Size != 3 {
			t.Fatalf("after browsing %s = %+v (listed %v), want size 3", dest, q, ok)
		}
	})

	t.Run("metrics carry the node and the cluster gauges", func(t *testing.T) {
		for _, n := range nodes {
			var scrape string
			eventually(t, 20*time.Second, func() bool {
				scrape = scrapeMetrics(t, n.broker())
				return strings.Contains(scrape, fmt.Sprintf(`titan_cluster_nodes_up{node=%q} 3`, n.name))
			}, "node %s: titan_cluster_nodes_up 3", n.name)
			for _, want := range []string{
				fmt.Sprintf(`titan_cluster_nodes{node=%q} 3`, n.name),
				fmt.Sprintf(`titan_cluster_stream_leader{node=%q,stream=%q}`, n.name, opsQ),
				fmt.Sprintf(`titan_cluster_stream_replica_lag{node=%q,replica=`, n.name),
				fmt.Sprintf(`titan_cluster_meta_leader{node=%q}`, n.name),
				fmt.Sprintf(`go_goroutines{node=%q}`, n.name),
			} {
				if !strings.Contains(scrape, want) {
					t.Errorf("node %s: /metrics lacks %s", n.name, want)
				}
			}
			// Every Titan series carries the node label.
			for _, line := range strings.Split(scrape, "\n") {
				if strings.HasPrefix(line, "titan_") && !strings.Contains(line, fmt.Sprintf(`node=%q`, n.name)) {
					t.Errorf("node %s: series without its node label: %s", n.name, line)
					break
				}
			}
		}
		// Exactly one node leads the stream.
		leading := 0
		for _, n := range nodes {
			if strings.Contains(scrapeMetrics(t, n.broker()), fmt.Sprintf(`titan_cluster_stream_leader{node=%q,stream=%q} 1`, n.name, opsQ)) {
				leading++
			}
		}
		requireEqual(t, 1, leading, "nodes reporting titan_cluster_stream_leader 1 for "+opsQ)
	})

	t.Run("console shows the nodes", func(t *testing.T) {
		chromium, err := exec.LookPath("chromium")
		if err != nil {
			t.Fatal("chromium is not installed (Debian package chromium; scripts/test installs it)")
		}
		allocOpts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(chromium), chromedp.NoSandbox,
			chromedp.WindowSize(1440, 1300), chromedp.Flag("disable-dev-shm-usage", true))
		actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), allocOpts...)
		defer cancelAlloc()
		ctx, cancelCtx := chromedp.NewContext(actx)
		defer cancelCtx()
		n := nodes[2]
		requireNoError(t, chromedp.Do(ctx, chromedp.Navigate(monitorURL(n.broker())+"/"), chromedp.WaitVisible(chromedp.ID("nodes"))), "loading the console")
		text := func(id string) string {
			return cdpEval[string](t, ctx, `document.getElementById(`+strconv.Quote(id)+`).textContent`)
		}
		eventually(t, 15*time.Second, func() bool {
			return strings.Contains(text("nodes-title"), "Nodes (3 of 3 up, cluster titan-e2e, embedded)")
		}, "the console's nodes title (last %q)", text("nodes-title"))
		rows := cdpEval[[]string](t, ctx, `Array.from(document.querySelectorAll("#nodes tbody tr")).map(function (r) { return r.textContent; })`)
		if len(rows) != 3 || !strings.Contains(strings.Join(rows, "|"), n.name+" (this node)up") {
			t.Errorf("console nodes rows = %q", rows)
		}
		// The stream's leader row and its replicas, as the API reports them.
		v, ok := getCluster(n)
		q, _ := v.stream(opsQ)
		if !ok || q.Leader == "" {
			t.Fatalf("cluster view %+v", v)
		}
		eventually(t, 15*time.Second, func() bool {
			rows := cdpEval[[]string](t, ctx, `Array.from(document.querySelectorAll("#nodes tbody tr, #streams tbody tr")).map(function (r) { return r.textContent; })`)
			all := strings.Join(rows, "|")
			return strings.Contains(all, q.Leader) && strings.Contains(all, opsQ) && strings.Contains(all, "current")
		}, "the console shows %s led by %s with current replicas", opsQ, q.Leader)
		// The destinations table lists the queue as JetStream holds it.
		eventually(t, 15*time.Second, func() bool {
			return strings.Contains(text("dests"), "/queue/ops")
		}, "the console's destinations list /queue/ops")
	})
	// Last, as it breaks the cluster: with two of three nodes killed, the survivor still
	// answers which nodes are down (JetStream itself, without a quorum, cannot answer).
	t.Run("a node without quorum still shows the nodes", func(t *testing.T) {
		nodes[0].kill9(t)
		nodes[1].kill9(t)
		var v clusterView
		eventually(t, 30*time.Second, func() bool {
			var ok bool
			v, ok = getCluster(nodes[2])
			up := 0
			for _, x := range v.Nodes {
				if x.Up {
					up++
				}
			}
			return ok && len(v.Nodes) == 3 && up == 1
		}, "node n2 reports 1 of 3 nodes up (last %+v)", &v)
		out := requireCLIOK(t, nodes[2].broker(), "cluster").stdout
		for _, want := range []string{"n0", "n1", "down", "n2 (this node)"} {
			if !strings.Contains(out, want) {
				t.Errorf("`titan cluster` without quorum lacks %q:\n%s", want, out)
			}
		}
		t.Logf("`titan cluster` on the survivor:\n%s", out)
	})
}

// checkExternalClusterView checks the cluster view of titan nodes on an external NATS
// cluster (servers ext0..ext2): mode external, the NATS servers as nodes, and the queue
// stream of /queue/xq with a leader among them and two replicas.
func checkExternalClusterView(t *testing.T, nodes []*clusterNode) {
	t.Helper()
	for _, n := range nodes {
		var v clusterView
		eventually(t, 20*time.Second, func() bool {
			var ok bool
			v, ok = getCluster(n)
			s, found := v.stream(queueStream("default", "xq", 0))
			return ok && found && s.Leader != "" && len(s.Replicas) == 2 && len(v.Nodes) == 3
		}, "titan %s on external NATS: a cluster view with 3 NATS servers and %s (last %+v)", n.name, queueStream("default", "xq", 0), &v)
		requireEqual(t, "external", v.Mode, "mode")
		for _, x := range v.Nodes {
			if !strings.HasPrefix(x.Name, "ext") || !x.Up {
				t.Errorf("titan %s: node %+v, want the NATS servers ext0..ext2, up", n.name, x)
			}
		}
		scrape := scrapeMetrics(t, n.broker())
		if !strings.Contains(scrape, `titan_cluster_nodes{node=`) {
			t.Errorf("titan %s: /metrics lacks titan_cluster_nodes", n.name)
		}
	}
}
