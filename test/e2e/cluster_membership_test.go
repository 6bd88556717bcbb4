package e2e

import (
	"slices"
	"strings"
	"testing"
	"time"
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
