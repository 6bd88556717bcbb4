package status

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/titan-broker/titan/internal/cluster"
	"github.com/titan-broker/titan/internal/cluster/clustertest"
)

// Membership (issue 27): the view carries the meta group's size and quorum and every
// member's peer id; PeerNames names every member from the cluster's answers; a removal is
// refused for a node that is up and for a name no member has.
func TestMembershipViewAndRemovalRefusals(t *testing.T) {
	nodes := clustertest.StartNodes(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	names, err := nodes[0].PeerNames(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range nodes {
		if id := n.PeerID(); id == "" || names[id] != n.Name() {
			t.Errorf("PeerNames()[%q] = %q, want %q (all: %v)", id, names[id], n.Name(), names)
		}
	}

	var st *Status
	deadline := time.Now().Add(15 * time.Second)
	for {
		st, _ = Of(ctx, nodes[1])
		if (len(st.Nodes) == 3 && st.Size == 3) || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if st.Size != 3 || st.Quorum != 2 || len(st.Nodes) != 3 {
		t.Fatalf("size %d, quorum %d, nodes %+v; want 3, 2 and three nodes", st.Size, st.Quorum, st.Nodes)
	}
	for _, ns := range st.Nodes {
		if names[ns.Peer] != ns.Name || !ns.Up {
			t.Errorf("node %+v: want up, with its peer id", ns)
		}
	}

	for _, peer := range []string{nodes[0].Name(), nodes[0].PeerID(), nodes[1].Name(), nodes[2].PeerID()} {
		if err := nodes[0].RemovePeer(ctx, peer); !errors.Is(err, cluster.ErrPeerUp) {
			t.Errorf("RemovePeer(%q) of a node that is up: %v, want ErrPeerUp", peer, err)
		}
	}
	if err := nodes[0].RemovePeer(ctx, "nope"); !errors.Is(err, cluster.ErrNotPeer) {
		t.Errorf("RemovePeer(nope): %v, want ErrNotPeer", err)
	}
}

// A joining node's routes: the configured ones, and this node's own unless it listens on
// every interface or is listed already.
func TestJoinRoutes(t *testing.T) {
	routes := []string{"nats://a:6222", "nats://b:6222"}
	for _, c := range []struct {
		listen string
		want   []string
	}{
		{"0.0.0.0:6222", routes},
		{"[::]:6222", routes},
		{"a:6222", routes},
		{"c:6222", append(slices.Clone(routes), "nats://c:6222")},
		{"10.0.0.3:7000", append(slices.Clone(routes), "nats://10.0.0.3:7000")},
	} {
		if got := joinRoutes(c.listen, routes); !slices.Equal(got, c.want) {
			t.Errorf("joinRoutes(%q) = %v, want %v", c.listen, got, c.want)
		}
	}
	if !cluster.UnknownName("Server name unknown at this time (peerID: 44jzkV9D)") || cluster.UnknownName("n2") {
		t.Error("UnknownName does not tell nats-server's placeholder from a name")
	}
}
