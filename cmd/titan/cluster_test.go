package main

import (
	"strings"
	"testing"

	"github.com/titan-broker/titan/internal/admin"
)

func TestWriteCluster(t *testing.T) {
	var b strings.Builder
	if err := writeCluster(&b, styler{}, admin.ClusterStatus{Mode: admin.ClusterModeSingle, Node: "h1"}); err != nil {
		t.Fatal(err)
	}
	if got, want := b.String(), "Single-node Titan (node h1): no cluster.\n"; got != want {
		t.Fatalf("single mode: %q, want %q", got, want)
	}

	b.Reset()
	st := admin.ClusterStatus{Mode: admin.ClusterModeEmbedded, Cluster: "prod", Node: "b", MetaLeader: "a",
		Nodes: []admin.ClusterNode{
			{Name: "a", Up: true, MetaLeader: true, Leads: []string{"TITAN_default_Q"}},
			{Name: "b", Up: true, Self: true, Leads: []string{}},
			{Name: "c", Leads: []string{}},
		},
		Streams: []admin.ClusterStream{{Name: "TITAN_default_Q", Group: "default", Kind: "queues", Leader: "a", Messages: 7, LastSeq: 90,
			Replicas: []admin.ClusterReplica{{Name: "b", Current: true}, {Name: "c", Offline: true, Lag: 12}}}},
	}
	if err := writeCluster(&b, styler{}, st); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"Cluster prod (embedded mode), answered by b; meta leader a\n",
		"a              up     leader  TITAN_default_Q",
		"b (this node)  up             -",
		"c              down           -",
		"TITAN_default_Q  default  queues  a       7         90        b current, c offline",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, b.String())
		}
	}

	b.Reset()
	st.Nodes[0].Up, st.Streams, st.Errors = false, nil, []string{"listing streams: context deadline exceeded"}
	if err := writeCluster(&b, styler{}, st); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"meta leader none reachable (last: a, down)", "Streams unavailable", "warning: listing streams: context deadline exceeded"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("output without quorum lacks %q:\n%s", want, b.String())
		}
	}
}
