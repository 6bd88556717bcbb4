package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/titan-broker/titan/internal/testport"
)

// Membership (issue 27): a node whose disk died is removed with `titan cluster remove`
// (JetStream's meta peer removal) from any other node; every remaining node then gives the
// same view — the two of them, no phantom peer — and the queue keeps storing SENDs.
// (Making a *new* consumer of a three-replica stream with two nodes left fails, and JetStream
// does not give the stream its third replica back when a node joins again: see the README's
// membership paragraph; not yet tested because not yet working.)

func TestClusterRemoveDeadNode(t *testing.T) {
	t.Parallel() // a cluster test shares the parallel phase: its elections and timeouts leave CPU idle
	nodes := startCluster(t, "")
	const dest = "/queue/members"
	sent := sendReceipted(t, nodes[0].broker(), dest, 0, 20)
	requireEqual(t, 20, len(sent), "receipted before the removal")
	nodes[2].kill9(t) // its disk died
	// The meta leader (which answers the removal) is one of the two left.
	eventually(t, 30*time.Second, func() bool {
		v, ok := getCluster(nodes[0])
		return ok && v.MetaLeader != "" && v.MetaLeader != "n2"
	}, "a meta leader among n0 and n1")

	r := titanCLI(t, nodes[0].broker(), "cluster", "remove", "nope")
	if r.code == 0 {
		t.Errorf("removing an unknown node succeeded: %s", r.stdout)
	}
	out := requireCLIOK(t, nodes[0].broker(), "cluster", "remove", "n2").stdout
	requireEqual(t, "removed n2 from the cluster\n", out, "remove output")

	want := []string{"n0", "n1"}
	for _, n := range nodes[:2] {
		var v clusterView
		eventually(t, 30*time.Second, func() bool {
			var ok bool
			if v, ok = getCluster(n); !ok {
				return false
			}
			var names []string
			for _, x := range v.Nodes {
				if !x.Up {
					return false
				}
				names = append(names, x.Name)
			}
			return slices.Equal(names, want) && v.MetaLeader != ""
		}, "%s lists exactly n0 and n1, both up (last %+v)", n.name, &v)
		table := requireCLIOK(t, n.broker(), "cluster").stdout
		if strings.Contains(table, "n2") || strings.Contains(table, "unknown") {
			t.Errorf("%s: `titan cluster` still shows the removed node:\n%s", n.name, table)
		}
	}
	sent = append(sent, sendReceipted(t, nodes[1].broker(), dest, 100, 20)...)
	requireEqual(t, 40, len(sent), "receipted after the removal")

}

// memberCluster is a test cluster whose nodes come and go by name (issue 27's membership
// test): every node has its own route port, STOMP port, NATS client port and directory
// under root, and the cluster name titan-e2e.
type memberCluster struct {
	t     *testing.T
	root  string
	ports map[string]int // route listen port by node name
	nodes map[string]*clusterNode
}

func newMemberCluster(t *testing.T, names ...string) *memberCluster {
	t.Helper()
	mc := &memberCluster{t: t, root: t.TempDir(), ports: map[string]int{}, nodes: map[string]*clusterNode{}}
	t.Cleanup(func() {
		for _, n := range mc.nodes {
			n.mu.Lock()
			cmd, exited := n.cmd, n.exited
			n.mu.Unlock()
			if cmd == nil {
				continue
			}
			terminate(cmd.Process, exited, 15*time.Second)
			if t.Failed() {
				for i, l := range n.logs {
					t.Logf("titan %s run %d stderr (tail):\n%s", n.name, i+1, lastLines(l.String(), 60))
				}
			}
		}
	})
	for _, name := range names {
		mc.ports[name] = testport.Free(t)
	}
	for _, name := range names {
		mc.start(name, mc.routes(names...))
	}
	for _, name := range names {
		mc.nodes[name].waitReady(t)
	}
	return mc
}

// routes are the route URLs of the named nodes.
func (mc *memberCluster) routes(names ...string) []string {
	var out []string
	for _, n := range names {
		out = append(out, mc.route(n))
	}
	return out
}

func (mc *memberCluster) route(name string) string {
	if mc.ports[name] == 0 {
		mc.ports[name] = testport.Free(mc.t)
	}
	return fmt.Sprintf("nats://127.0.0.1:%d", mc.ports[name])
}

// start writes name's config with routes and launches it (on its existing directory, if
// it ran before); the caller waits for it to be ready.
func (mc *memberCluster) start(name string, routes []string) *clusterNode {
	t := mc.t
	t.Helper()
	n := mc.nodes[name]
	if n == nil {
		dir := filepath.Join(mc.root, name)
		requireNoError(t, os.MkdirAll(dir, 0o755))
		n = &clusterNode{name: name, dir: dir, cfgPath: filepath.Join(dir, "titan.yml"), stompPort: testport.Free(t), natsPort: testport.Free(t)}
		mc.nodes[name] = n
	}
	yaml := fmt.Sprintf(`titan:
  servers:
    - {name: stomp, host: 127.0.0.1, port: %d}
  monitor: {host: 127.0.0.1, port: 0}
  store: {type: pebble, data-dir: %q}
  log: {level: debug}
  cluster:
    name: titan-e2e
    node-name: %s
    listen: %s
    client-port: %d
    routes: [%s]
`, n.stompPort, filepath.Join(n.dir, "data"), name, strings.TrimPrefix(mc.route(name), "nats://"), n.natsPort, strings.Join(routes, ", "))
	requireNoError(t, os.WriteFile(n.cfgPath, []byte(yaml), 0o644))
	n.launch(t)
	return n
}

// stop SIGTERMs the node and waits until it exited.
func (mc *memberCluster) stop(name string) {
	n := mc.nodes[name]
	requireNoError(mc.t, n.cmd.Process.Signal(syscall.SIGTERM))
	<-n.exited
}

// running are the nodes whose process runs, by name.
func (mc *memberCluster) running() []*clusterNode {
	var out []*clusterNode
	for _, n := range mc.nodes {
		select {
		case <-n.exited:
		default:
			out = append(out, n)
		}
	}
	slices.SortFunc(out, func(a, b *clusterNode) int { return strings.Compare(a.name, b.name) })
	return out
}

// viewKey is a cluster view without what differs by the node asked (self) or by the
// moment (message counts, lags): the nodes, up or not, the meta leader and the size, and
// each stream's leader and replicas (offline or not).
func viewKey(v clusterView) string {
	var b strings.Builder
	fmt.Fprintf(&b, "leader=%s size=%d quorum=%d;", v.MetaLeader, v.Size, v.Quorum)
	for _, n := range v.Nodes {
		fmt.Fprintf(&b, " %s up=%v leads=%v;", n.Name, n.Up, n.Leads)
	}
	for _, s := range v.Streams {
		fmt.Fprintf(&b, " %s leader=%s replicas=", s.Name, s.Leader)
		for _, r := range s.Replicas {
			fmt.Fprintf(&b, "%s(offline=%v)", r.Name, r.Offline)
		}
		b.WriteString(";")
	}
	return b.String()
}

// requireSameView waits until every running node answers the same view (viewKey), whose
// nodes are exactly members (down: those listed in down, every other up), with a meta
// leader, the size len(members) and every stream's leader and replicas among the members
// and current unless down; then it checks `titan cluster` on each shows no unknown peer.
func (mc *memberCluster) requireSameView(step string, members, down []string) {
	t := mc.t
	t.Helper()
	var keys []string
	last := &strings.Builder{} // the views of the last poll, for the failure message
	eventually(t, 90*time.Second, func() bool {
		keys = keys[:0]
		last.Reset()
		match := true
		for _, n := range mc.running() {
			v, ok := getCluster(n)
			match = match && ok && viewMatches(v, members, down)
			keys = append(keys, viewKey(v))
			fmt.Fprintf(last, "%s: %s\n", n.name, viewKey(v))
		}
		for _, k := range keys[1:] {
			match = match && k == keys[0]
		}
		return match
	}, "%s: every node gives the same view of %v (down %v); last views:\n%s", step, members, down, last)
	for _, n := range mc.running() {
		table := requireCLIOK(t, n.broker(), "cluster").stdout
		if strings.Contains(table, "unknown") {
			t.Errorf("%s: `titan cluster` on %s lists an unknown peer:\n%s", step, n.name, table)
		}
	}
	t.Logf("%s: %d nodes agree: %s", step, len(mc.running()), keys[0])
}

// viewMatches reports whether v lists exactly members, those in down down and the others
// up, a meta leader, size len(members), and streams led by and replicated on members only,
// every replica on an up node current.
func viewMatches(v clusterView, members, down []string) bool {
	if v.MetaLeader == "" || v.Size != len(members) || len(v.Nodes) != len(members) || len(v.Errors) > 0 {
		return false
	}
	for i, n := range v.Nodes {
		if n.Name != members[i] || n.Up == slices.Contains(down, n.Name) {
			return false
		}
	}
	for _, s := range v.Streams {
		// Three replicas, or as many as there are nodes.
		if !slices.Contains(members, s.Leader) || slices.Contains(down, s.Leader) || len(s.Replicas) != min(2, len(members)-1) {
			return false
		}
		for _, r := range s.Replicas {
			if !slices.Contains(members, r.Name) || (!slices.Contains(down, r.Name) && (!r.Current || r.Offline)) {
				return false
			}
		}
	}
	return true
}

// joinRoutes is the --cluster-routes value `titan cluster add|replace` printed, without
// its placeholder for the new node's own address.
func joinRoutes(t *testing.T, out string) []string {
	t.Helper()
	_, after, ok := strings.Cut(out, "--cluster-routes ")
	if !ok {
		t.Fatalf("no --cluster-routes in:\n%s", out)
	}
	list, _, _ := strings.Cut(after, " ")
	list, _, _ = strings.Cut(list, "\n")
	routes := strings.Split(list, ",")
	requireEqual(t, "nats://HOST:PORT", routes[len(routes)-1], "the printed routes end with the new node's own address")
	return routes[:len(routes)-1]
}

// Membership as an operation (issue 27) on real `titan serve` processes: three nodes; a
// fourth added with the settings `titan cluster add` prints and confirmed by `add --wait`;
// removed again (refused while it is up); then a node's disk dies (SIGKILL, data directory
// deleted) and a node restarted meanwhile must still name it (no phantom "Server name
// unknown" peer); `titan cluster replace` puts a new node in its place. At every step every
// running node gives the same view, and every message receipted before is delivered.
func TestClusterMembershipAddRemoveReplace(t *testing.T) {
	t.Parallel() // a cluster test shares the parallel phase: its elections and timeouts leave CPU idle
	mc := newMemberCluster(t, "n0", "n1", "n2")
	node := func(name string) *broker { return mc.nodes[name].broker() }
	const dest = "/queue/membership"
	sent := sendReceipted(t, node("n0"), dest, 0, 20)
	requireEqual(t, 20, len(sent), "receipted with three nodes")
	mc.requireSameView("three nodes", []string{"n0", "n1", "n2"}, nil)

	// Add a fourth node.
	out := requireCLIOK(t, node("n1"), "cluster", "add", "n3").stdout
	routes := joinRoutes(t, out)
	requireEqual(t, true, strings.Contains(out, "The cluster then has 4 nodes and needs 3 up for a quorum."), "add's output: %s", out)
	mc.start("n3", append(routes, mc.route("n3"))).waitReady(t)
	out = requireCLIOK(t, node("n2"), "cluster", "add", "n3", "--wait", "90s").stdout
	requireEqual(t, "n3 joined cluster titan-e2e: 4 nodes, quorum 3; every replica current\n", out, "add --wait")
	mc.requireSameView("fourth node added", []string{"n0", "n1", "n2", "n3"}, nil)
	sent = append(sent, sendReceipted(t, node("n3"), dest, 100, 20)...)
	requireEqual(t, 40, len(sent), "receipted through the fourth node")

	// Shrink back to three.
	r := titanCLI(t, node("n0"), "cluster", "remove", "n3")
	if r.code == 0 || !strings.Contains(r.stderr, "node n3 is up: stop it before removing it") {
		t.Fatalf("removing a node that is up: %v", r)
	}
	mc.stop("n3")
	requireEqual(t, "removed n3 from the cluster\n", requireCLIOK(t, node("n0"), "cluster", "remove", "n3").stdout, "remove")
	mc.requireSameView("fourth node removed", []string{"n0", "n1", "n2"}, nil)

	// n2's disk dies. n0 restarts meanwhile: it never hears from n2 again, yet names it as
	// n1 does.
	mc.nodes["n2"].kill9(t)
	requireNoError(t, os.RemoveAll(filepath.Join(mc.nodes["n2"].dir, "data")))
	mc.stop("n0")
	mc.start("n0", mc.routes("n0", "n1", "n2")).waitReady(t)
	mc.requireSameView("n2's disk died, n0 restarted", []string{"n0", "n1", "n2"}, []string{"n2"})

	// Replace n2 by n4.
	r = titanCLI(t, node("n0"), "cluster", "replace", "n1", "n4")
	if r.code == 0 || !strings.Contains(r.stderr, "n1 is up: stop it before replacing it") {
		t.Fatalf("replacing a node that is up: %v", r)
	}
	out = requireCLIOK(t, node("n1"), "cluster", "replace", "n2", "n4").stdout
	requireEqual(t, true, strings.HasPrefix(out, "removed n2 from the cluster\nn4 is not a member of cluster titan-e2e."), "replace's output: %s", out)
	mc.requireSameView("n2 removed", []string{"n0", "n1"}, nil)
	mc.start("n4", append(joinRoutes(t, out), mc.route("n4"))).waitReady(t)
	out = requireCLIOK(t, node("n0"), "cluster", "replace", "n2", "n4", "--wait", "90s").stdout
	requireEqual(t, "n4 joined cluster titan-e2e: 3 nodes, quorum 2; every replica current\n", out, "replace --wait")
	mc.requireSameView("n2 replaced by n4", []string{"n0", "n1", "n4"}, nil)

	receiveIDs(t, node("n4"), dest, sent)
}
