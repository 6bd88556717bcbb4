package e2e

import (
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"
)

// SIGTERM of a node that cannot reach a quorum (issue 27): its in-flight publishes retry
// through leader changes for up to 30 s, but a shutdown ends them — the node exits within
// its 10 s grace period (plus the forced close of what is left), and the SEND in flight is
// answered with an ERROR, never a RECEIPT.

func TestClusterSIGTERMWithoutQuorumExitsWithinGrace(t *testing.T) {
	t.Parallel() // a cluster test shares the parallel phase: its elections and timeouts leave CPU idle
	nodes := startCluster(t, "")
	n0 := nodes[0]
	const dest = "/queue/no-quorum"
	requireEqual(t, 1, len(sendReceipted(t, n0.broker(), dest, 0, 1)), "receipted with a quorum")
	nodes[1].kill9(t)
	nodes[2].kill9(t)

	c := dialRaw(t, n0.broker())
	c.connect()
	requireNoError(t, c.write(frameOf("SEND", []string{"destination:" + dest, "persistent:true", "receipt:r-1"}, "m-1;")))
	// The SEND is in flight (no quorum to store it): no answer yet.
	requireNoError(t, c.write(frameOf("SUBSCRIBE", []string{"id:x", "destination:/topic/barrier", "receipt:barrier"}, "")))
	start := time.Now()
	requireNoError(t, n0.cmd.Process.Signal(syscall.SIGTERM))
	select {
	case <-n0.exited:
	case <-time.After(20 * time.Second):
		t.Fatalf("n0 did not exit within 20 s of SIGTERM without a quorum:\n%s", lastLines(n0.stderr.String(), 40))
	}
	t.Logf("n0 exited %v after SIGTERM", time.Since(start).Round(time.Millisecond))
	for {
		f, err := c.readFrame(5 * time.Second)
		if err != nil {
			break // closed by the shutdown
		}
		if rid, _ := f.get("receipt-id"); f.command == "RECEIPT" && rid == "r-1" {
			t.Fatalf("SEND answered with a RECEIPT without a quorum: %s", f)
		}
		t.Logf("frame: %s", strings.TrimSpace(fmt.Sprint(f.command)))
	}
}
