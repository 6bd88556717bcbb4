package main

import (
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/titan-broker/titan/internal/admin"
)

// newClusterCmd is `titan cluster`: GET admin.PathCluster, the cluster's nodes, which node
// leads each stream, and each stream's replicas (current, lag, offline). Any node answers
// for the whole cluster.
func newClusterCmd(g *globalOptions) *cobra.Command {
	cmd := newClusterShowCmd(g)
	cmd.AddCommand(newClusterRemoveCmd(g), newClusterAddCmd(g), newClusterReplaceCmd(g))
	return cmd
}

// newClusterRemoveCmd is `titan cluster remove NODE`.
func newClusterRemoveCmd(g *globalOptions) *cobra.Command {
	return &cobra.Command{
		Use:   "remove NODE",
		Short: "Remove a node from the cluster's JetStream meta group (a dead disk, shrinking)",
		Long: `Remove NODE (a node name, or the peer id 'titan cluster' shows for a member no node
can name) from the cluster (JetStream's meta peer removal, answered by the meta leader):
the quorum is then counted without it, and JetStream places its stream and consumer
replicas on the other nodes, or on a node that joins later. NODE must be down (stopped);
removing a node that is up is refused. A removed name can rejoin only 5 minutes after its
removal, on an empty store-dir. Embedded NATS only.`,
		Example: "  titan cluster remove c\n  titan --addr http://node-a:7777 cluster remove c",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := g.newClient()
			if err != nil {
				return err
			}
			defer c.close()
			var res admin.NodeRemoval
			if _, err := c.do(cmd.Context(), http.MethodDelete, admin.PathClusterNodes, url.Values{admin.ParamNode: {args[0]}}, nil, &res); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "removed %s from the cluster\n", res.Removed)
			return nil
		},
	}
}

func newClusterShowCmd(g *globalOptions) *cobra.Command {
	return &cobra.Command{
		Use:     "cluster",
		Aliases: []string{"nodes"},
		Short:   "Show the cluster's nodes, stream leaders and replicas (lag, offline)",
		Long: `Show cluster mode's state as the node at --addr sees it: every node (up or not, the
JetStream meta leader, the streams it leads) and every Titan stream (its group, leader,
messages, and each replica: current, lag in Raft operations, or offline). Stream figures
come from each stream's leader, so any node gives the same answer. A single-node broker
says so.`,
		Example: "  titan cluster\n  titan cluster --addr http://node-b:7777 --output json",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var st admin.ClusterStatus
			if printed, err := getView(cmd, g, admin.PathCluster, nil, &st); printed || err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			return writeCluster(out, newStyler(g, out), st)
		},
	}
}

// writeCluster prints a ClusterStatus as a header line and two tables (nodes, streams).
func writeCluster(w io.Writer, st styler, s admin.ClusterStatus) error {
	if s.Mode == admin.ClusterModeSingle {
		_, err := fmt.Fprintf(w, "Single-node Titan (node %s): no cluster.\n", s.Node)
		return err
	}
	leader := s.MetaLeader
	for _, n := range s.Nodes {
		if n.Name == leader && !n.Up {
			leader = "none reachable (last: " + leader + ", down)"
		}
	}
	if leader == "" {
		leader = "none elected"
	}
	size := ""
	if s.Size > 0 {
		size = "; " + sizeText(s)
	}
	fmt.Fprintf(w, "Cluster %s (%s mode), answered by %s; meta leader %s%s\n\n", s.Cluster, s.Mode, s.Node, leader, size)
	t := newTable(w, st, "NODE", "STATE", "META", "LEADS")
	for _, n := range s.Nodes {
		state, meta := "up", ""
		if !n.Up {
			state = "down"
			if n.Cause != "" {
				state += " (" + n.Cause + ")"
			}
		}
		if n.MetaLeader {
			meta = "leader"
		}
		name := n.Name
		if n.Self {
			name += " (this node)"
		}
		t.row(name, state, meta, orDash(strings.Join(n.Leads, ", ")))
	}
	if err := t.flush(); err != nil {
		return err
	}
	fmt.Fprintln(w)
	switch {
	case len(s.Streams) == 0 && len(s.Errors) > 0:
		fmt.Fprintln(w, "Streams unavailable: JetStream did not answer (is a quorum of the nodes up?).")
	case len(s.Streams) == 0:
		fmt.Fprintln(w, "No streams yet (a group's stream is made by its first queue or events-store SEND).")
	default:
		t = newTable(w, st, "STREAM", "GROUP", "KIND", "LEADER", "MESSAGES", "LAST SEQ", "REPLICAS")
		for _, x := range s.Streams {
			t.row(x.Name, x.Group, x.Kind, orDash(x.Leader), u64(x.Messages), u64(x.LastSeq), replicaText(x.Replicas))
		}
		if err := t.flush(); err != nil {
			return err
		}
	}
	for _, e := range s.Errors {
		fmt.Fprintln(w, "warning: "+e)
	}
	return nil
}

// replicaText renders replicas as "b current, c lag 12, d offline".
func replicaText(rs []admin.ClusterReplica) string {
	if len(rs) == 0 {
		return "-"
	}
	parts := make([]string, len(rs))
	for i, r := range rs {
		switch {
		case r.Offline:
			parts[i] = r.Name + " offline"
		case r.Current && r.Lag == 0:
			parts[i] = r.Name + " current"
		default:
			parts[i] = r.Name + " lag " + strconv.FormatUint(r.Lag, 10)
		}
	}
	return strings.Join(parts, ", ")
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// writeClusterQueueTable prints queues as cluster mode reports them: JetStream's depth,
// deliveries in flight and pull requests, with the consumer's leader and replicas, and
// its state (paused: deliveries stopped cluster-wide).
func writeClusterQueueTable(w io.Writer, st styler, qs []admin.QueueInfo, sum admin.Summary) error {
	t := newTable(w, st, "GROUP", "DESTINATION", "SIZE", "DELIVERING", "PULLERS", "DISPATCHED", "LEADER", "REPLICAS", "STATE")
	for _, q := range qs {
		t.styledRow(append(cells(q.Group, q.Destination, strconv.Itoa(q.Size), strconv.Itoa(q.Delivering), strconv.Itoa(q.Consumers),
			u64(q.Dispatched), orDash(q.Leader), replicaText(q.Replicas)), queueState(st, q))...)
	}
	if err := t.flush(); err != nil {
		return err
	}
	_, err := fmt.Fprintln(w, sum.Text)
	return err
}
