//go:build linux

package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// A cluster node whose disk fills (issue 27): its JetStream store lives on a small tmpfs
// that the test fills up. The node must say so — health DOWN with the cause, `titan
// cluster` and titan_cluster_nodes_up on it — within seconds, and come back UP by itself
// once space is freed, without a restart, with every receipted message delivered.

// sendReceipted sends persistent messages first..first+count-1 (body "m-<i>;") to dest on
// b and returns the ids answered with RECEIPT.
func sendReceipted(t *testing.T, b *broker, dest string, first, count int) []int {
	t.Helper()
	c := dialRaw(t, b)
	c.connect()
	defer c.conn.Close()
	var ok []int
	for i := first; i < first+count; i++ {
		f := persistentSend(t, c, dest, i, 64)
		if f.command == "RECEIPT" {
			ok = append(ok, i)
		} else {
			return ok // the connection is closed after an ERROR
		}
	}
	return ok
}

// receiveIDs subscribes to dest on b and requires every id in want among the bodies.
func receiveIDs(t *testing.T, b *broker, dest string, want []int) {
	t.Helper()
	c := dialRaw(t, b)
	c.connect()
	defer c.conn.Close()
	requireNoError(t, c.write(frameOf("SUBSCRIBE", []string{"id:1", "destination:" + dest, "ack:auto"}, "")))
	got := map[string]bool{}
	missing := func() int {
		m := 0
		for _, i := range want {
			if !got[fmt.Sprintf("m-%d", i)] {
				m++
			}
		}
		return m
	}
	deadline := time.Now().Add(60 * time.Second)
	for missing() > 0 && time.Now().Before(deadline) {
		f, err := c.readFrame(time.Until(deadline))
		requireNoError(t, err, "receiving (%d missing of %d)", missing(), len(want))
		if f.command != "MESSAGE" {
			t.Fatalf("while receiving: %s", f)
		}
		id, _, _ := strings.Cut(string(f.body), ";")
		got[id] = true
	}
	if m := missing(); m > 0 {
		t.Fatalf("%d of %d receipted messages not delivered", m, len(want))
	}
}

// healthOf is GET /titan/monitor/health on b: HTTP status and answer.
func healthOf(b *broker) (int, healthAnswer) {
	var h healthAnswer
	resp, err := httpClient.Get(monitorURL(b) + "/titan/monitor/health")
	if err != nil {
		return 0, h
	}
	defer resp.Body.Close()
	_ = json.NewDecoder(resp.Body).Decode(&h)
	return resp.StatusCode, h
}

func TestClusterDiskFullDownThenRecovers(t *testing.T) {
	t.Parallel() // a cluster test shares the parallel phase: its elections and timeouts leave CPU idle
	if delegateMounts(t) {
		return
	}
	// Mounted before the nodes start, so it is unmounted after they stopped (cleanups run
	// last-in first-out).
	mnt := mountTmpfsE2E(t, 48<<20)
	nodes := startCluster(t, "", func(i int, n *clusterNode) {
		if i == 0 {
			// Only the JetStream store (titan.cluster.store-dir, <data-dir>/jetstream): the
			// local store has its own free-space watermarks (diskfault tests).
			requireNoError(t, os.MkdirAll(filepath.Join(n.dir, "data"), 0o755))
			requireNoError(t, os.Symlink(mnt, filepath.Join(n.dir, "data", "jetstream")))
		}
	})
	n0, n1, n2 := nodes[0], nodes[1], nodes[2]
	const dest = "/queue/disk-full"
	sent := sendReceipted(t, n1.broker(), dest, 0, 50)
	requireEqual(t, 50, len(sent), "receipted before the fault")
	pid := n0.cmd.Process.Pid

	filler := fillFS(t, mnt) // to the last 4 KiB: the probe writes a block
	start := time.Now()
	var h healthAnswer
	eventually(t, 10*time.Second, func() bool {
		code, a := healthOf(n0.broker())
		h = a
		return code == http.StatusServiceUnavailable && a.Status == "DOWN"
	}, "n0's health DOWN after its disk filled (last %+v)", &h)
	t.Logf("n0 DOWN %v after its disk filled: %+v", time.Since(start).Round(time.Millisecond), h)
	requireEqual(t, "no space left on device", h.Store.Cause, "cause")
	out := requireCLIOK(t, n0.broker(), "cluster").stdout
	if !strings.Contains(out, "down (no space left on device)") {
		t.Errorf("`titan cluster` on n0 does not show it down with the cause:\n%s", out)
	}
	requireEqual(t, float64(2), metricValue(scrapeMetrics(t, n0.broker()), `titan_cluster_nodes_up{node="n0"}`), "titan_cluster_nodes_up on n0")

	// The other nodes go on storing (2 of 3 replicas are a quorum); n0's replica falls behind.
	more := sendReceipted(t, n1.broker(), dest, 1000, 500)
	sent = append(sent, more...)
	t.Logf("%d receipted on n1 while n0's disk was full", len(more))
	onFull := sendReceipted(t, n0.broker(), dest, 2000, 20) // what n0 receipts is kept too
	t.Logf("%d of 20 receipted on n0 while its disk was full", len(onFull))
	sent = append(sent, onFull...)
	requireNoError(t, os.Remove(filler))
	start = time.Now()
	eventually(t, 30*time.Second, func() bool {
		code, a := healthOf(n0.broker())
		h = a
		return code == http.StatusOK && a.Status == "UP"
	}, "n0's health UP after space was freed (last %+v)", &h)
	t.Logf("n0 UP %v after space was freed: %+v", time.Since(start).Round(time.Millisecond), h)
	requireEqual(t, pid, n0.cmd.Process.Pid, "n0 was not restarted")
	eventually(t, 30*time.Second, func() bool {
		return metricValue(scrapeMetrics(t, n0.broker()), `titan_cluster_nodes_up{node="n0"}`) == 3
	}, "titan_cluster_nodes_up 3 on n0 again")
	// Its replicas catch up: every replica of the queue stream current, as n1 sees it.
	var v clusterView
	eventually(t, 30*time.Second, func() bool {
		var ok bool
		if v, ok = getCluster(n1); !ok {
			return false
		}
		s, ok := v.stream(queueStream("default", "disk-full", 0))
		if !ok || s.Leader == "" || len(s.Replicas) != 2 {
			return false
		}
		for _, r := range s.Replicas {
			if !r.Current || r.Offline || r.Lag > 0 {
				return false
			}
		}
		return true
	}, "%s's replicas current again (last %+v)", queueStream("default", "disk-full", 0), &v)
	for _, l := range strings.Split(n0.stderr.String(), "\n") {
		if strings.Contains(l, "DISABLED") || strings.Contains(l, "re-enabl") || strings.Contains(l, "writable") {
			t.Logf("n0: %s", l)
		}
	}
	after := sendReceipted(t, n0.broker(), dest, 3000, 20)
	requireEqual(t, 20, len(after), "receipted on n0 after it recovered")
	sent = append(sent, after...)
	receiveIDs(t, n2.broker(), dest, sent)
}
