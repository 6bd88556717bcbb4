package broker

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/titan-broker/titan/internal/admin"
	"github.com/titan-broker/titan/internal/cluster"
	"github.com/titan-broker/titan/internal/cluster/status"
)

// clusterAdmin adapts the cluster node to admin.ClusterSource (the monitor API's cluster
// view and the cluster-wide queue list).
type clusterAdmin struct{ n *cluster.Node }

// ClusterStatus implements admin.ClusterSource.
func (c clusterAdmin) ClusterStatus(ctx context.Context) (*admin.ClusterStatus, error) {
	// Without a quorum the stream list fails, but the nodes this node sees (and which are
	// down) are what an operator needs then: answer them, with the failure in Errors.
	st, err := status.Of(ctx, c.n)
	if err != nil && len(st.Nodes) == 0 {
		return nil, err
	}
	out := &admin.ClusterStatus{Mode: st.Mode, Cluster: st.Cluster, Node: st.Node, MetaLeader: st.MetaLeader, Errors: st.Errors,
		Size: st.Size, Quorum: st.Quorum, Routes: st.Routes}
	for _, n := range st.Nodes {
		out.Nodes = append(out.Nodes, admin.ClusterNode{Name: n.Name, Peer: n.Peer, Up: n.Up, Cause: n.Cause, MetaLeader: n.MetaLeader, Leads: n.Leads})
	}
	for _, s := range st.Streams {
		out.Streams = append(out.Streams, admin.ClusterStream{Name: s.Name, Group: s.Group, Kind: s.Kind, Leader: s.Leader,
			Replicas: adminReplicas(s.Replicas), Messages: s.Messages, Bytes: s.Bytes, LastSeq: s.LastSeq, Consumers: s.Consumers})
	}
	for _, q := range st.Queues {
		out.Queues = append(out.Queues, admin.ClusterQueue{Identity: q.Identity, Stream: q.Stream, Stored: q.Stored, Bytes: q.Bytes, Pending: q.Pending,
			Delivering: q.Delivering, Waiting: q.Waiting, Delivered: q.Delivered, Paused: q.Paused, Leader: q.Leader, Replicas: adminReplicas(q.Replicas)})
	}
	return out, nil
}

// ClusterDeadLettered implements admin.ClusterCounters: the dead-letter counts of every
// node that answers (status.GatherCounters), waiting for the live nodes at most until ctx
// ends.
func (c clusterAdmin) ClusterDeadLettered(ctx context.Context) (uint64, error) {
	peers := 1
	if c.n.Embedded() {
		peers = len(c.n.Server().ActivePeers())
	}
	sum, _, err := status.GatherCounters(ctx, c.n.Conn(), peers)
	return sum.DeadLettered, err
}

var _ admin.ClusterCounters = clusterAdmin{}

func adminReplicas(rs []status.ReplicaStatus) []admin.ClusterReplica {
	out := make([]admin.ClusterReplica, 0, len(rs))
	for _, r := range rs {
		out = append(out, admin.ClusterReplica{Name: r.Name, Current: r.Current, Offline: r.Offline, Lag: r.Lag, ActiveMs: r.Active.Milliseconds()})
	}
	return out
}

// RemoveNode implements admin.ClusterMembership (cluster.Node.RemovePeer), bounded by 4 s
// (below the CLI's default 5 s request timeout, so it gets the answer).
func (c clusterAdmin) RemoveNode(ctx context.Context, name string) error {
	ctx, cancel := context.WithTimeout(ctx, 4*time.Second)
	defer cancel()
	err := c.n.RemovePeer(ctx, name)
	switch {
	case errors.Is(err, cluster.ErrPeerUp):
		return fmt.Errorf("%w: %w", admin.ErrNodeUp, err)
	case errors.Is(err, cluster.ErrNotPeer):
		return fmt.Errorf("%w: %w", admin.ErrNotMember, err)
	}
	return err
}

// clusterNode is the cluster node in cluster mode, else nil.
func (b *Broker) clusterNode() *cluster.Node {
	if b.p == nil || b.p.cluster == nil {
		return nil
	}
	return b.p.cluster.node
}

// clusterNodeName names this Titan node in the monitor API and on /metrics: the embedded
// nats-server's name, or with an external NATS (whose servers several Titan nodes may
// share) titan.cluster.node-name, else host (the host name).
func clusterNodeName(n *cluster.Node, configured, host string) string {
	switch {
	case n.Embedded():
		return n.Name()
	case configured != "":
		return configured
	}
	return host
}
