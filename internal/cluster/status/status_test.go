package status

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/titan-broker/titan/internal/cluster"
	"github.com/titan-broker/titan/internal/cluster/clustertest"
	"github.com/titan-broker/titan/internal/cluster/queues"
	"github.com/titan-broker/titan/internal/dest"
)

// A ring queue's placement (TITAN_<g>_Q_R<N>, subject kind r<N>/rb<N>) is listed as its
// group's queue, and an events-store retention class as its group's events-store.
func TestStatusKnowsRingAndRetentionPlacements(t *testing.T) {
	for _, id := range []dest.Identity{
		{Group: "g_1", Pattern: dest.PatternQueues, Channel: "orders.eu"},
		{Group: "g", Pattern: dest.PatternQueues, Channel: "a b", Bare: true},
	} {
		for _, parts := range []int{1, 12} {
			for _, ring := range []int{0, 3} {
				p := cluster.PlaceQueue(id, ring, 3, parts, 0)
				if got, ok := cluster.IdentityOfSubject(p.Subject); !ok || got != id {
					t.Errorf("cluster.IdentityOfSubject(%q) = %+v, %v; want %+v", p.Subject, got, ok, id)
				}
				if g, k := streamKind(p.Stream); g != id.Group || k != "queues" {
					t.Errorf("streamKind(%q) = %q, %q; want %q, queues", p.Stream, g, k, id.Group)
				}
			}
		}
	}
	for name, want := range map[string][2]string{
		"TITAN_a_b_ES":           {"a_b", "events-store"},
		"TITAN_a_ES_0123abcd":    {"a", "events-store"},
		"TITAN_x_Q_R10":          {"x", "queues"},
		"TITAN_x_Q_P11":          {"x", "queues"},
		"TITAN_x_Q_R10_P0":       {"x", "queues"},
		"TITAN_a_b_ES_P3":        {"a_b", "events-store"},
		"TITAN_a_ES_0123abcd_P7": {"a", "events-store"},
		"TITAN_x_R10":            {"x_R10", "other"},
		"TITAN_odd_ES_notahash":  {"odd_ES_notahash", "other"},
	} {
		if g, k := streamKind(name); g != want[0] || k != want[1] {
			t.Errorf("streamKind(%q) = %q, %q; want %q", name, g, k, want)
		}
	}
	for _, s := range []string{"t.g.rs3.abc", "t.g.r.x", "t.g.rbx.y", "t.g.qs_3.abc", "t.g.rs3_1.abc", "t.g.q_.x", "t.g.q_x.y"} {
		if _, ok := cluster.IdentityOfSubject(s); ok {
			t.Errorf("cluster.IdentityOfSubject(%q) accepted a subject that is no queue's", s)
		}
	}
}

// The Raft groups gauge (issue 27) counts the groups a node takes part in: the meta group
// and the layout bucket's stream (cluster.LayoutBucket, made at start), then one per
// replicated stream and one per replicated consumer it hosts.
func TestStatusCountsRaftGroups(t *testing.T) {
	nodes := clustertest.StartNodes(t)
	groups := func() int {
		st, _ := Of(context.Background(), nodes[0])
		return st.RaftGroups
	}
	if got := groups(); got != 2 {
		t.Fatalf("%d Raft groups before any stream, want 2 (the meta group, the layout bucket)", got)
	}
	q := queues.New(nodes[1], nil, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := q.CreateQueue(ctx, dest.Identity{Group: "raft", Pattern: dest.PatternQueues, Channel: "jobs"}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(15 * time.Second)
	for groups() != 4 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if got := groups(); got != 4 {
		t.Fatalf("%d Raft groups with one R3 queue stream and its consumer, want 4", got)
	}
	var buf strings.Builder
	reg := prometheus.NewRegistry()
	reg.MustRegister(Collector(nodes[0]))
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == "titan_cluster_raft_groups" {
			fmt.Fprint(&buf, mf.GetMetric()[0].GetGauge().GetValue())
		}
	}
	if buf.String() != "4" {
		t.Fatalf("titan_cluster_raft_groups %q, want 4", buf.String())
	}
}

// A replica on a node this node sees down reads offline, not "lag 1" and current (issue 27).
func TestReplicasOnDownNodesAreOffline(t *testing.T) {
	st := &Status{Streams: []StreamStatus{{Name: "TITAN_g_Q", Replicas: []ReplicaStatus{
		{Name: "a", Current: true}, {Name: "b", Current: true, Lag: 1},
	}}}}
	markDown(st, map[string]*NodeStatus{"a": {Name: "a", Up: true}, "b": {Name: "b"}})
	got := st.Streams[0].Replicas
	if got[0].Offline || !got[0].Current || !got[1].Offline || got[1].Current {
		t.Fatalf("replicas %+v: want a current, b offline", got)
	}
}

// A queue's bytes are its share of its stream's bytes, exact when it holds them all, and
// computed without overflow.
func TestShareOf(t *testing.T) {
	for _, c := range []struct{ bytes, part, whole, want uint64 }{
		{3000, 3, 3, 3000}, {3000, 1, 3, 1000}, {3000, 0, 3, 0}, {3000, 2, 0, 0},
		{1 << 62, 1 << 40, 1 << 41, 1 << 61},
	} {
		if got := shareOf(c.bytes, c.part, c.whole); got != c.want {
			t.Errorf("shareOf(%d, %d, %d) = %d, want %d", c.bytes, c.part, c.whole, got, c.want)
		}
	}
}
