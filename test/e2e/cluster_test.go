package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/titan-broker/titan/internal/testport"
)

// Cluster mode (issue 15): three `titan serve` processes on loopback, each with its own
// ports and data directory, each other as seeds, form one broker on NATS JetStream.

// clusterNode is one titan process of a test cluster, restartable on its data directory.
type clusterNode struct {
	name      string
	dir       string
	cfgPath   string
	stompPort int
	natsPort  int // the embedded nats-server's client port on 127.0.0.1
	// monitorAddr is the monitor API's address from the latest run's ready line (guarded
	// by mu).
	monitorAddr string

	mu     sync.Mutex
	cmd    *exec.Cmd
	stderr *syncBuffer
	exited chan struct{}
	ready  chan struct{}
	logs   []*syncBuffer
}

// launch starts the node's process; waitReady waits for its ready line.
func (n *clusterNode) launch(t *testing.T) {
	t.Helper()
	cmd := exec.Command(titanBin, "serve", "--config", n.cfgPath)
	cmd.Dir = n.dir
	stderr := &syncBuffer{}
	cmd.Stderr = stderr
	stdout, err := cmd.StdoutPipe()
	requireNoError(t, err)
	requireNoError(t, cmd.Start(), "starting titan "+n.name)
	exited, ready := make(chan struct{}), make(chan struct{})
	n.mu.Lock()
	n.cmd, n.stderr, n.exited, n.ready = cmd, stderr, exited, ready
	n.logs = append(n.logs, stderr)
	n.mu.Unlock()
	go func() {
		sc := bufio.NewScanner(stdout)
		once := false
		for sc.Scan() {
			if !once && strings.Contains(sc.Text(), " ready: ") {
				once = true
				if m := readyLineAll.FindStringSubmatch(sc.Text()); m != nil {
					n.mu.Lock()
					n.monitorAddr = m[2]
					n.mu.Unlock()
				}
				close(ready)
			}
		}
		_ = cmd.Wait()
		close(exited)
	}()
}

func (n *clusterNode) waitReady(t *testing.T) {
	t.Helper()
	select {
	case <-n.ready:
	case <-n.exited:
		t.Fatalf("titan %s exited before it was ready:\n%s", n.name, n.stderr.String())
	case <-time.After(90 * time.Second):
		t.Fatalf("titan %s not ready within 90s:\n%s", n.name, n.stderr.String())
	}
}

// kill9 SIGKILLs the node's process and waits until it is gone.
func (n *clusterNode) kill9(t *testing.T) {
	t.Helper()
	requireNoError(t, n.cmd.Process.Signal(syscall.SIGKILL))
	<-n.exited
}

// startCluster starts three nodes with addressSettings (YAML list items, may be empty) and
// returns them once every one printed its ready line.
func startCluster(t *testing.T, addressSettings string, prepare ...func(i int, n *clusterNode)) []*clusterNode {
	t.Helper()
	routePorts := []int{testport.Free(t), testport.Free(t), testport.Free(t)}
	var routes []string
	for _, p := range routePorts {
		routes = append(routes, fmt.Sprintf("nats://127.0.0.1:%d", p))
	}
	return startNodes(t, addressSettings, func(i int, n *clusterNode) string {
		return fmt.Sprintf(`    name: titan-e2e
    node-name: %s
    listen: 127.0.0.1:%d
    client-port: %d
    routes: [%s]
`, n.name, routePorts[i], n.natsPort, strings.Join(routes, ", "))
	}, prepare...)
}

// startNodes starts three titan nodes whose titan.cluster section is clusterYAML(i, node)
// (indented four spaces) and returns them once every one printed its ready line.
// prepare, when given, runs on each node before any is launched (its directory exists).
func startNodes(t *testing.T, addressSettings string, clusterYAML func(i int, n *clusterNode) string, prepare ...func(i int, n *clusterNode)) []*clusterNode {
	t.Helper()
	root := t.TempDir()
	nodes := make([]*clusterNode, 3)
	for i := range nodes {
		dir := filepath.Join(root, fmt.Sprintf("n%d", i))
		requireNoError(t, os.MkdirAll(dir, 0o755))
		n := &clusterNode{name: fmt.Sprintf("n%d", i), dir: dir, cfgPath: filepath.Join(dir, "titan.yml"), stompPort: testport.Free(t), natsPort: testport.Free(t)}
		as := ""
		if addressSettings != "" {
			as = "  address-settings:\n" + addressSettings
		}
		yaml := fmt.Sprintf(`titan:
  servers:
    - {name: stomp, host: 127.0.0.1, port: %d}
  monitor: {host: 127.0.0.1, port: 0}
  store: {type: pebble, data-dir: %q}
  log: {level: debug}
%s  cluster:
%s`, n.stompPort, filepath.Join(dir, "data"), as, clusterYAML(i, n))
		requireNoError(t, os.WriteFile(n.cfgPath, []byte(yaml), 0o644))
		nodes[i] = n
	}
	t.Cleanup(func() {
		for _, n := range nodes {
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
	for i, n := range nodes {
		for _, p := range prepare {
			p(i, n)
		}
	}
	for _, n := range nodes {
		n.launch(t)
	}
	for _, n := range nodes {
		n.waitReady(t)
	}
	return nodes
}

// streamLeader returns the index of the node leading stream (asked over NATS, from any
// node that answers).
func streamLeader(t *testing.T, nodes []*clusterNode, stream string) int {
	t.Helper()
	var name string
	eventually(t, 30*time.Second, func() bool {
		for _, n := range nodes {
			nc, err := nats.Connect(fmt.Sprintf("nats://127.0.0.1:%d", n.natsPort), nats.Timeout(time.Second))
			if err != nil {
				continue
			}
			js, err := jetstream.New(nc)
			if err == nil {
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
				var s jetstream.Stream
				if s, err = js.Stream(ctx, stream); err == nil && s.CachedInfo().Cluster != nil {
					name = s.CachedInfo().Cluster.Leader
				}
				cancel()
			}
			nc.Close()
			if name != "" {
				return true
			}
		}
		return false
	}, "a leader for "+stream)
	for i, n := range nodes {
		if n.name == name {
			return i
		}
	}
	t.Fatalf("stream leader %q is none of the nodes", name)
	return -1
}

// runCluster runs a python3-stomp scenario against the cluster's STOMP ports (producer on
// the first, consumers on the others).
func runCluster(t *testing.T, nodes []*clusterNode, scenario string, args map[string]any, out any) {
	t.Helper()
	runClusterWith(t, pythonClient, nodes, scenario, args, out)
}

// runClusterWith is runCluster with client c (python3-stomp or stompjs).
func runClusterWith(t *testing.T, c stompClient, nodes []*clusterNode, scenario string, args map[string]any, out any) {
	t.Helper()
	ports := []int{nodes[0].stompPort, nodes[1].stompPort, nodes[2].stompPort}
	full := map[string]any{"ports": ports}
	for k, v := range args {
		full[k] = v
	}
	c.run(t, &broker{stompPort: ports[0]}, scenario, full, out)
}

// One three-node cluster runs every pattern test that cluster mode supports, each with a
// producer on one node and consumers on the others (python3-stomp).
func TestClusterPatternsAcrossThreeNodes(t *testing.T) {
	t.Parallel() // a cluster test shares the parallel phase: its elections and timeouts leave CPU idle
	pythonClient.require(t)
	nodes := startCluster(t, `    - {match: "dlq-x", max-deliveries: 3}
`)

	t.Run("wildcard fan-out", func(t *testing.T) {
		var out struct {
			Received [][]string `json:"received"`
			Error    string     `json:"error"`
		}
		runCluster(t, nodes, "cluster_fanout", map[string]any{"prefix": "cf", "count": 20}, &out)
		requireEqual(t, "", out.Error, "scenario error")
		want := numbered("ev", 20)
		evs := func(l []string) []string {
			return slices.DeleteFunc(slices.Clone(l), func(s string) bool { return !strings.HasPrefix(s, "ev-") })
		}
		// FIFO per destination from one producer: each subscriber sees the events in order.
		if got := evs(out.Received[0]); !slices.Equal(want, got) {
			t.Errorf("node 1 (*.x) received %q, want %q in order", got, want)
		}
		if got := evs(out.Received[1]); !slices.Equal(want, got) {
			t.Errorf("node 2 (>) received %q, want %q in order", got, want)
		}
		if slices.Contains(out.Received[0], "only-gt") {
			t.Errorf("node 1's filter cf.*.x received a message for cf.a.y")
		}
	})

	t.Run("queue round-robin with acks and NACK redelivery", func(t *testing.T) {
		var out struct {
			Acked      [][]string     `json:"acked"`
			Nacked     string         `json:"nacked"`
			Redelivery map[string]any `json:"redelivery"`
			Error      string         `json:"error"`
		}
		const n = 20
		runCluster(t, nodes, "cluster_queue", map[string]any{"dest": "/queue/cq", "count": n}, &out)
		requireEqual(t, "", out.Error, "scenario error")
		all := append(slices.Clone(out.Acked[0]), out.Acked[1]...)
		if want := sorted(numbered("q", n)); !slices.Equal(want, sorted(all)) {
			t.Fatalf("acknowledged over both consumers = %q, want each of %q exactly once", sorted(all), want)
		}
		for i, got := range out.Acked {
			if len(got) == 0 {
				t.Errorf("consumer on node %d acknowledged none of the %d messages: not distributed", i+1, n)
			}
		}
		if out.Redelivery == nil {
			t.Fatalf("the NACKed message %q was never redelivered", out.Nacked)
		}
		if out.Redelivery["redelivered"] != "true" || out.Redelivery["delivery-count"] != "2" {
			t.Errorf("redelivery of %q = %v, want redelivered:true, delivery-count:2", out.Nacked, out.Redelivery)
		}
	})

	t.Run("dead-letter after max deliveries", func(t *testing.T) {
		var out struct {
			Deliveries []string          `json:"deliveries"`
			DeadLetter map[string]string `json:"dead_letter"`
			Error      string            `json:"error"`
		}
		runCluster(t, nodes, "cluster_dlq", map[string]any{"dest": "/queue/dlq-x", "dlq": "/queue/DLQ.dlq-x"}, &out)
		requireEqual(t, "", out.Error, "scenario error")
		if want := []string{"1", "2", "3"}; !slices.Equal(want, out.Deliveries) {
			t.Errorf("delivery counts seen before dead-lettering = %q, want %q (max-deliveries 3)", out.Deliveries, want)
		}
		dl := out.DeadLetter
		if dl["dlq-reason"] != "max-deliveries" || dl["dlq-delivery-count"] != "3" || dl["dlq-original-destination"] != "/queue/dlq-x" {
			t.Errorf("dead letter headers = %v", dl)
		}
	})

	t.Run("delay", func(t *testing.T) {
		var out struct {
			Order   []string `json:"order"`
			LaterMs int      `json:"later_ms"`
			NowMs   int      `json:"now_ms"`
			Error   string   `json:"error"`
		}
		runCluster(t, nodes, "cluster_delay", map[string]any{"dest": "/queue/cdelay", "delay": 1500}, &out)
		requireEqual(t, "", out.Error, "scenario error")
		if !slices.Equal([]string{"now", "later"}, out.Order) {
			t.Errorf("order = %q, want the undelayed message first", out.Order)
		}
		if out.LaterMs < 1500 || out.LaterMs > 4000 {
			t.Errorf("delayed message arrived after %d ms, want 1500-4000 (whole-second schedule, rounded up)", out.LaterMs)
		}
		t.Logf("delay 1500 ms: delivered after %d ms (undelayed after %d ms)", out.LaterMs, out.NowMs)
	})

	t.Run("events-store start positions and durable resume", func(t *testing.T) {
		var out struct {
			First, Last, Seq3, Delta, Time, New []string
			Sequences                           []string
			DurableFirst                        []string `json:"durable_first"`
			DurableResumed                      []string `json:"durable_resumed"`
			Error                               string
		}
		runCluster(t, nodes, "cluster_store", map[string]any{"dest": "/events-store/cs"}, &out)
		requireEqual(t, "", out.Error, "scenario error")
		all := []string{"e1", "e2", "e3", "e4", "e5"}
		check := func(what string, want, got []string) {
			if !slices.Equal(want, got) {
				t.Errorf("%s read %q, want %q", what, got, want)
			}
		}
		check("start-position first", all, out.First)
		check("start-position last", []string{"e5"}, out.Last)
		check("start-position <seq of e3>", all[2:], out.Seq3)
		check("start-position delta:1h", all, out.Delta)
		check("start-position time:2000-01-01", all, out.Time)
		if len(out.New) == 0 || !strings.HasPrefix(out.New[0], "n") {
			t.Errorf("start-position new read %q, want only messages sent after it", out.New)
		}
		for i := 1; i < len(out.Sequences); i++ {
			a, _ := strconv.Atoi(out.Sequences[i-1])
			b, _ := strconv.Atoi(out.Sequences[i])
			if b <= a {
				t.Errorf("sequences %q are not increasing", out.Sequences)
			}
		}
		check("durable subscription on node 1", []string{"e1", "e2"}, out.DurableFirst)
		// The resume delivers everything not acknowledged, exactly once, and nothing that
		// was: e3..e5 and the later n*. (Messages the first subscription held unacknowledged
		// come back when its node NAKs them at detach, which may be after newer ones.)
		if want := sorted(append([]string{"e3", "e4", "e5"}, out.New...)); !slices.Equal(want, sorted(out.DurableResumed)) {
			t.Errorf("same durable-name resumed on node 2 read %q, want each of %q once", out.DurableResumed, want)
		}
	})

	t.Run("stompjs fan-out and queue", func(t *testing.T) {
		stompjsClient.require(t)
		var fan struct {
			Received [][]string `json:"received"`
			Error    string     `json:"error"`
		}
		runClusterWith(t, stompjsClient, nodes, "cluster_fanout", map[string]any{"prefix": "jf", "count": 10}, &fan)
		requireEqual(t, "", fan.Error, "fan-out scenario error")
		for i, got := range fan.Received {
			got = slices.DeleteFunc(slices.Clone(got), func(s string) bool { return !strings.HasPrefix(s, "ev-") })
			if want := numbered("ev", 10); !slices.Equal(want, got) {
				t.Errorf("stompjs subscriber on node %d received %q, want %q in order", i+1, got, want)
			}
		}
		var q struct {
			Acked      [][]string     `json:"acked"`
			Nacked     string         `json:"nacked"`
			Redelivery map[string]any `json:"redelivery"`
			Error      string         `json:"error"`
		}
		runClusterWith(t, stompjsClient, nodes, "cluster_queue", map[string]any{"dest": "/queue/jq", "count": 10}, &q)
		requireEqual(t, "", q.Error, "queue scenario error")
		all := append(slices.Clone(q.Acked[0]), q.Acked[1]...)
		if want := sorted(numbered("q", 10)); !slices.Equal(want, sorted(all)) {
			t.Errorf("stompjs: acknowledged = %q, want each of %q exactly once", sorted(all), want)
		}
		if q.Redelivery == nil || q.Redelivery["redelivered"] != "true" || q.Redelivery["delivery-count"] != "2" {
			t.Errorf("stompjs: redelivery of %q = %v, want redelivered:true, delivery-count:2", q.Nacked, q.Redelivery)
		}
	})

	t.Run("group isolation", func(t *testing.T) {
		var out struct {
			G1    []string `json:"g1"`
			G2    []string `json:"g2"`
			Error string   `json:"error"`
		}
		runCluster(t, nodes, "cluster_groups", map[string]any{"topic": "/topic/iso", "queue": "/queue/iso"}, &out)
		requireEqual(t, "", out.Error, "scenario error")
		if want := []string{"ev-g1", "q-g1"}; !slices.Equal(want, sorted(out.G1)) {
			t.Errorf("group g1 received %q, want %q", out.G1, want)
		}
		if want := []string{"ev-g2-marker", "q-g2-marker"}; !slices.Equal(want, sorted(out.G2)) {
			t.Errorf("group g2 received %q, want only its markers %q", out.G2, want)
		}
	})
}

// kill -9 of one node while producers on another wait for a RECEIPT per SEND: once the
// node is restarted, a consumer on the third node drains the queue and every receipted
// message is there (0 lost); duplicates are counted and reported.
func TestClusterKillNineLosesNoReceiptedMessage(t *testing.T) {
	t.Parallel() // a cluster test shares the parallel phase: its elections and timeouts leave CPU idle
	pythonClient.require(t)
	nodes := startCluster(t, "")
	const dest = "/queue/crash"
	// The stream exists once a message was sent; its leader is the node to kill. Producers
	// go to the next node, the consumer to the one after.
	var warm struct {
		Error string `json:"error"`
	}
	pythonClient.run(t, &broker{stompPort: nodes[0].stompPort}, "send_bodies", map[string]any{"dest": dest, "bodies": []string{"warm-up"}}, &warm)
	requireEqual(t, "", warm.Error, "warm-up send")
	stream := queueStream("default", "crash", 0)
	leader := streamLeader(t, nodes, stream)
	victim, prodNode, consNode := nodes[leader], nodes[(leader+1)%3], nodes[(leader+2)%3]
	t.Logf("stream %s is led by %s: killing it; producers on %s, consumer on %s", stream, victim.name, prodNode.name, consNode.name)
	type produced struct {
		acked []string
		at    []time.Time // when each RECEIPT line arrived
		res   map[string]any
	}
	results := make([]produced, 2)
	var mu sync.Mutex // guards results
	var wg sync.WaitGroup
	started := make(chan struct{}, 2)
	for i := range results {
		wg.Add(1)
		go func() {
			defer wg.Done()
			args, _ := json.Marshal(map[string]any{"host": "127.0.0.1", "port": prodNode.stompPort, "dest": dest,
				"prefix": "p" + strconv.Itoa(i), "window": 8, "max": 400, "timeout": 40})
			cmd := exec.Command(systemPython, filepath.Join("clients", "pyclient.py"), "crash_produce", string(args))
			stdout, err := cmd.StdoutPipe()
			if err != nil {
				t.Error(err)
				return
			}
			if err := cmd.Start(); err != nil {
				t.Error(err)
				return
			}
			sc := bufio.NewScanner(stdout)
			for sc.Scan() {
				var line map[string]any
				if json.Unmarshal(sc.Bytes(), &line) != nil {
					continue
				}
				mu.Lock()
				switch {
				case line["ready"] != nil:
					started <- struct{}{}
				case line["acked"] != nil:
					results[i].acked = append(results[i].acked, line["acked"].(string))
					results[i].at = append(results[i].at, time.Now())
				default:
					results[i].res = line
				}
				mu.Unlock()
			}
			_ = cmd.Wait()
		}()
	}
	<-started
	<-started
	// Let the producers get going, then kill -9 the stream's leader and bring it back.
	eventually(t, 60*time.Second, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(results[0].acked)+len(results[1].acked) > 0
	}, "first RECEIPT")
	killedAt := time.Now()
	victim.kill9(t)
	victim.launch(t)
	victim.waitReady(t)
	t.Logf("%s killed and back after %v", victim.name, time.Since(killedAt).Round(time.Millisecond))
	wg.Wait()
	t.Logf("stream leader after the producers finished: %s", nodes[streamLeader(t, nodes, stream)].name)
	for _, n := range nodes {
		for _, l := range n.logs {
			for _, line := range strings.Split(l.String(), "\n") {
				if strings.Contains(line, "queue publish failed") {
					t.Logf("%s: %s", n.name, line)
				}
			}
		}
	}
	var acked []string
	for i, r := range results {
		var gap time.Duration
		for j := 1; j < len(r.at); j++ {
			gap = max(gap, r.at[j].Sub(r.at[j-1]))
		}
		t.Logf("producer %d: %d receipted, longest pause between RECEIPTs %v, result %v", i, len(r.acked), gap.Round(time.Millisecond), r.res)
		if r.res["error"] != nil || r.res["disconnected"] != false {
			t.Errorf("producer %d did not ride through the node's crash: %v", i, r.res)
		}
		acked = append(acked, r.acked...)
	}
	var drained struct {
		Deliveries [][]any `json:"deliveries"`
		Error      string  `json:"error"`
	}
	pythonClient.run(t, &broker{stompPort: consNode.stompPort}, "drain", map[string]any{"dest": dest, "fence": "FENCE", "drain_timeout": 60}, &drained)
	requireEqual(t, "", drained.Error, "drain error")
	got := map[string]int{}
	for _, d := range drained.Deliveries {
		if b := d[0].(string); b != "warm-up" {
			got[b]++
		}
	}
	// FIFO per destination cluster-wide: each producer's messages reach the consumer on
	// another node in the order they were sent (first deliveries).
	last := map[string]int{}
	for _, d := range drained.Deliveries {
		b := d[0].(string)
		prefix, num, ok := strings.Cut(b, "-")
		if !ok || (prefix != "p0" && prefix != "p1") || d[1] == "true" {
			continue
		}
		n, _ := strconv.Atoi(num)
		if prev, seen := last[prefix]; seen && n <= prev {
			t.Errorf("%s delivered after %s-%d: not in send order", b, prefix, prev)
		}
		last[prefix] = n
	}
	lost, dups := 0, 0
	for _, b := range acked {
		if got[b] == 0 {
			lost++
		}
	}
	for b, c := range got {
		if c > 1 && b != "FENCE" {
			dups += c - 1
		}
	}
	t.Logf("receipted %d, delivered %d distinct, lost %d, duplicates %d", len(acked), len(got)-1, lost, dups)
	if len(acked) < 100 {
		t.Errorf("only %d messages receipted: the producers hardly ran", len(acked))
	}
	if lost > 0 {
		t.Errorf("%d receipted messages lost", lost)
	}
}

// Cluster mode against an external NATS cluster: three nats-server processes (built from
// the module) form a JetStream cluster; three titan nodes connect to it with
// titan.cluster.nats-url, one server each, and serve fan-out and queues across nodes.
func TestClusterOnExternalNATS(t *testing.T) {
	t.Parallel() // a cluster test shares the parallel phase: its elections and timeouts leave CPU idle
	pythonClient.require(t)
	dir := t.TempDir()
	bin := filepath.Join(dir, "nats-server")
	build := exec.Command("go", "build", "-o", bin, "github.com/nats-io/nats-server/v2")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building nats-server: %v\n%s", err, out)
	}
	clientPorts := startExternalNATS(t, bin, dir)
	nodes := startNodes(t, "", func(i int, n *clusterNode) string {
		return fmt.Sprintf("    nats-url: nats://127.0.0.1:%d\n", clientPorts[i])
	})
	var fan struct {
		Received [][]string `json:"received"`
		Error    string     `json:"error"`
	}
	runCluster(t, nodes, "cluster_fanout", map[string]any{"prefix": "xf", "count": 10}, &fan)
	requireEqual(t, "", fan.Error, "fan-out scenario error")
	for i, got := range fan.Received {
		got = slices.DeleteFunc(slices.Clone(got), func(s string) bool { return !strings.HasPrefix(s, "ev-") })
		if want := numbered("ev", 10); !slices.Equal(want, got) {
			t.Errorf("subscriber on node %d received %q, want %q", i+1, got, want)
		}
	}
	var q struct {
		Acked  [][]string `json:"acked"`
		Nacked string     `json:"nacked"`
		Error  string     `json:"error"`
	}
	runCluster(t, nodes, "cluster_queue", map[string]any{"dest": "/queue/xq", "count": 10}, &q)
	requireEqual(t, "", q.Error, "queue scenario error")
	all := append(slices.Clone(q.Acked[0]), q.Acked[1]...)
	if want := sorted(numbered("q", 10)); !slices.Equal(want, sorted(all)) {
		t.Errorf("acknowledged = %q, want each of %q exactly once", sorted(all), want)
	}
	checkRequestsAcrossNodes(t, nodes, "xr")
	checkExternalClusterView(t, nodes) // cluster_ops_test.go
}

// startExternalNATS starts a three-server nats-server cluster with JetStream from bin, its
// files under dir, and returns the servers' client ports. Ports come from testport.Free,
// below the ephemeral range, so no outgoing connection takes one before nats-server binds
// it; another listener still could, so a server that exits before it is ready makes all
// three start again on new ports, up to three times.
func startExternalNATS(t *testing.T, bin, dir string) []int {
	t.Helper()
	for attempt := 1; ; attempt++ {
		clientPorts := []int{testport.Free(t), testport.Free(t), testport.Free(t)}
		routePorts := []int{testport.Free(t), testport.Free(t), testport.Free(t)}
		var routes []string
		for _, p := range routePorts {
			routes = append(routes, fmt.Sprintf("nats://127.0.0.1:%d", p))
		}
		var cmds []*exec.Cmd
		var logs []*syncBuffer
		exited := make(chan int, 3)
		for i := range 3 {
			conf := filepath.Join(dir, fmt.Sprintf("nats%d.conf", i))
			requireNoError(t, os.WriteFile(conf, []byte(fmt.Sprintf(`server_name: ext%d
listen: 127.0.0.1:%d
jetstream { store_dir: %q, sync_interval: always }
cluster { name: ext, listen: 127.0.0.1:%d, routes: [%s] }
`, i, clientPorts[i], filepath.Join(dir, fmt.Sprintf("js%d-%d", i, attempt)), routePorts[i], strings.Join(routes, ", "))), 0o644))
			cmd := exec.Command(bin, "-c", conf)
			buf := &syncBuffer{}
			cmd.Stderr, cmd.Stdout = buf, buf
			requireNoError(t, cmd.Start(), "starting nats-server")
			done := make(chan struct{})
			go func() { _ = cmd.Wait(); close(done); exited <- i }()
			cmds, logs = append(cmds, cmd), append(logs, buf)
			t.Cleanup(func() {
				terminate(cmd.Process, done, 10*time.Second)
				if t.Failed() {
					t.Logf("nats-server %d (attempt %d):\n%s", i, attempt, lastLines(buf.String(), 30))
				}
			})
		}
		ready := func() bool {
			for _, l := range logs {
				if !strings.Contains(l.String(), "Server is ready") {
					return false
				}
			}
			return true
		}
		deadline := time.Now().Add(20 * time.Second)
		for !ready() && time.Now().Before(deadline) {
			select {
			case i := <-exited:
				if attempt >= 3 {
					t.Fatalf("nats-server %d exited before it was ready (attempt %d):\n%s", i, attempt, lastLines(logs[i].String(), 10))
				}
				t.Logf("nats-server %d exited before it was ready (a port taken meanwhile?); starting all three again on new ports", i)
				for _, c := range cmds {
					_ = c.Process.Kill()
				}
				deadline = time.Time{}
			case <-time.After(50 * time.Millisecond):
			}
		}
		if ready() {
			return clientPorts
		}
		if !deadline.IsZero() {
			t.Fatalf("nats-servers not ready within 20 s")
		}
	}
}
