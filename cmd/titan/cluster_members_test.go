package main

import (
	"errors"
	"strings"
	"testing"

	"github.com/titan-broker/titan/internal/admin"
)

func TestClusterJoinSettings(t *testing.T) {
	st := admin.ClusterStatus{Mode: admin.ClusterModeEmbedded, Cluster: "prod", Node: "a", Size: 3, Quorum: 2,
		Routes: []string{"nats://a:6222", "nats://b:6222", "nats://c:6222"},
		Nodes:  []admin.ClusterNode{{Name: "a", Peer: "A", Up: true}, {Name: "b", Peer: "B", Up: true}, {Name: "c", Peer: "C", Up: true}}}
	var b strings.Builder
	if err := writeJoin(&b, st, "d"); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"d is not a member of cluster prod.",
		"titan serve --cluster-name prod --cluster-node d --cluster-listen HOST:PORT --cluster-routes nats://a:6222,nats://b:6222,nats://c:6222,nats://HOST:PORT\n",
		"The cluster then has 4 nodes and needs 3 up for a quorum.",
		"titan cluster add d --wait 2m",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("join settings lack %q:\n%s", want, b.String())
		}
	}
	st.Routes = nil
	if err := writeJoin(&b, st, "d"); !errors.Is(err, errMembership) {
		t.Errorf("no routes to give: %v, want errMembership", err)
	}
	if got := sizeText(st); got != "3 nodes, quorum 2" {
		t.Errorf("sizeText = %q", got)
	}
}

// The cluster is whole once every node is up, old is gone, and every stream has a leader
// and only current replicas.
func TestClusterWhole(t *testing.T) {
	up := []admin.ClusterNode{{Name: "a", Up: true}, {Name: "b", Up: true}, {Name: "d", Up: true}}
	stream := func(rs ...admin.ClusterReplica) []admin.ClusterStream {
		return []admin.ClusterStream{{Name: "TITAN_default_Q", Leader: "a", Replicas: rs}}
	}
	for _, c := range []struct {
		name string
		st   admin.ClusterStatus
		want bool
	}{
		{"whole", admin.ClusterStatus{Nodes: up, Streams: stream(admin.ClusterReplica{Name: "b", Current: true}, admin.ClusterReplica{Name: "d", Current: true})}, true},
		{"a replica catching up", admin.ClusterStatus{Nodes: up, Streams: stream(admin.ClusterReplica{Name: "b", Current: true}, admin.ClusterReplica{Name: "d", Lag: 4})}, false},
		{"a replica still on old", admin.ClusterStatus{Nodes: up, Streams: stream(admin.ClusterReplica{Name: "b", Current: true}, admin.ClusterReplica{Name: "c", Current: true})}, false},
		{"old still listed", admin.ClusterStatus{Nodes: append(up[:3:3], admin.ClusterNode{Name: "c"}), Streams: nil}, false},
		{"an error", admin.ClusterStatus{Nodes: up, Errors: []string{"listing streams: timeout"}}, false},
	} {
		if got := whole(c.st, "c"); got != c.want {
			t.Errorf("%s: whole = %v, want %v", c.name, got, c.want)
		}
	}
}
