package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/titan-broker/titan/internal/admin"
)

// Membership commands (issue 27). Adding a node to a NATS JetStream cluster is starting it
// with the cluster's name and routes: it joins the meta group by itself. `titan cluster
// add` prints those settings and, with --wait, confirms the join; `titan cluster replace`
// removes a dead node from the meta group and does the same for its replacement.

// errMembership is a membership command's refusal (the message says what to do).
var errMembership = errors.New("cluster membership")

// clusterPoll is how often --wait reads the cluster view.
const clusterPoll = 500 * time.Millisecond

// newClusterAddCmd is `titan cluster add NODE`.
func newClusterAddCmd(g *globalOptions) *cobra.Command {
	var wait time.Duration
	cmd := &cobra.Command{
		Use:   "add NODE",
		Short: "Print the settings a new node needs to join the cluster; --wait confirms the join",
		Long: `Add NODE to the cluster. A node joins a NATS JetStream cluster by starting with the
cluster's name and routes; this prints the settings NODE needs (from the node at --addr),
after checking that no member has the name. Start NODE with them on an empty store-dir,
then run the command again with --wait: it returns once NODE is a member, up, and every
stream's replicas are current, and prints the cluster's new size and quorum. For a member
already up it says so and exits 0; with --wait it waits until every replica is current
(the step between two nodes of a rolling restart: a restarted node has rejoined). Embedded
NATS only.`,
		Example: "  titan cluster add d\n  titan cluster add d --wait 2m",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return addNode(cmd, g, args[0], "", wait)
		},
	}
	cmd.Flags().DurationVar(&wait, "wait", 0, "wait up to this long for NODE to join and every replica to be current")
	return cmd
}

// newClusterReplaceCmd is `titan cluster replace OLD NEW`.
func newClusterReplaceCmd(g *globalOptions) *cobra.Command {
	var wait time.Duration
	cmd := &cobra.Command{
		Use:   "replace OLD NEW",
		Short: "Replace a dead node: remove OLD from the cluster, print NEW's settings; --wait confirms",
		Long: `Replace the node OLD (its disk died, its host is gone) by a new node NEW: OLD must be
down; it is removed from the JetStream meta group (as by 'titan cluster remove'), and the
settings NEW needs are printed (as by 'titan cluster add'). JetStream places OLD's stream
and consumer replicas on NEW once it joins. Run it again with --wait after starting NEW:
it returns once NEW is up and every stream's replicas are current. NEW needs a name
other than OLD's: JetStream lets a removed name rejoin only 5 minutes after its removal.
(A node started again under its own name on an empty store-dir needs no command at all:
it keeps its Raft identity and JetStream copies its replicas back.) Embedded NATS only.`,
		Example: "  titan cluster replace c c2\n  titan cluster replace c c2 --wait 2m",
		Args:    cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if args[0] == args[1] {
				return fmt.Errorf("%w: the replacement needs a new node-name (JetStream lets a removed name rejoin only 5 minutes after its removal); to bring %s back on an empty store-dir under its own name, just start it", errMembership, args[0])
			}
			return addNode(cmd, g, args[1], args[0], wait)
		},
	}
	cmd.Flags().DurationVar(&wait, "wait", 0, "wait up to this long for NEW to join and every replica to be current")
	return cmd
}

// addNode is add (old "") and replace: it reads the cluster view, removes old if it is
// still a member (refused while it is up), then prints node's settings, or with wait
// polls the view until node is up and the cluster whole (every replica current).
func addNode(cmd *cobra.Command, g *globalOptions, node, old string, wait time.Duration) error {
	c, err := g.newClient()
	if err != nil {
		return err
	}
	defer c.close()
	ctx, out := cmd.Context(), cmd.OutOrStdout()
	st, err := clusterView(ctx, c)
	if err != nil {
		return err
	}
	if st.Mode != admin.ClusterModeEmbedded {
		return fmt.Errorf("%w: adding a node needs cluster mode with embedded NATS (this broker: %s mode)", errMembership, st.Mode)
	}
	if old != "" {
		if n, ok := findNode(st, old); ok {
			if n.Up {
				return fmt.Errorf("%w: %s is up: stop it before replacing it", errMembership, old)
			}
			var res admin.NodeRemoval
			if _, err := c.do(ctx, http.MethodDelete, admin.PathClusterNodes, url.Values{admin.ParamNode: {old}}, nil, &res); err != nil {
				return err
			}
			fmt.Fprintf(out, "removed %s from the cluster\n", old)
			if st, err = clusterView(ctx, c); err != nil {
				return err
			}
		} else if wait == 0 {
			fmt.Fprintf(out, "%s is not a member of cluster %s (already removed?)\n", old, st.Cluster)
		}
	}
	n, member := findNode(st, node)
	member = member && n.Peer != "" // listed for a route only: not yet in the meta group
	switch {
	case member && !n.Up:
		return fmt.Errorf("%w: %s is a member and down: start it on its store-dir, or replace it with `titan cluster replace %s NEW`", errMembership, node, node)
	case member && wait == 0:
		fmt.Fprintf(out, "%s is a member of cluster %s (up); %s\n", node, st.Cluster, sizeText(st))
		return nil
	case !member && wait == 0:
		return writeJoin(out, st, node)
	}
	deadline := time.Now().Add(wait)
	for {
		// A node is a member once the meta group lists it (with its peer id) and counts it
		// (Size); a route alone comes first.
		if n, ok := findNode(st, node); ok && n.Up && n.Peer != "" && st.Size == len(st.Nodes) && whole(st, old) {
			fmt.Fprintf(out, "%s joined cluster %s: %s; every replica current\n", node, st.Cluster, sizeText(st))
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%w: %s did not join within %v (is it started with the settings `titan cluster add %s` prints?)", errMembership, node, wait, node)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(clusterPoll):
		}
		if next, err := clusterView(ctx, c); err == nil {
			st = next
		}
	}
}

// clusterView is GET admin.PathCluster.
func clusterView(ctx context.Context, c *apiClient) (admin.ClusterStatus, error) {
	var st admin.ClusterStatus
	_, err := c.do(ctx, http.MethodGet, admin.PathCluster, nil, nil, &st)
	return st, err
}

// findNode is the node named name (or with that peer id) in st.
func findNode(st admin.ClusterStatus, name string) (admin.ClusterNode, bool) {
	for _, n := range st.Nodes {
		if n.Name == name || (n.Peer != "" && n.Peer == name) {
			return n, true
		}
	}
	return admin.ClusterNode{}, false
}

// whole reports whether every node of st is up, none is named old, and every stream has a
// leader and only current replicas, none on old.
func whole(st admin.ClusterStatus, old string) bool {
	if len(st.Errors) > 0 {
		return false
	}
	for _, n := range st.Nodes {
		if !n.Up || (old != "" && n.Name == old) {
			return false
		}
	}
	for _, s := range st.Streams {
		if s.Leader == "" || s.Leader == old {
			return false
		}
		for _, r := range s.Replicas {
			if r.Offline || !r.Current || r.Lag > 0 || (old != "" && r.Name == old) {
				return false
			}
		}
	}
	return true
}

// sizeText is "4 nodes, quorum 3".
func sizeText(st admin.ClusterStatus) string {
	size := st.Size
	if size == 0 {
		size = len(st.Nodes)
	}
	return fmt.Sprintf("%d nodes, quorum %d", size, max(st.Quorum, size/2+1))
}

// writeJoin prints the settings node needs to join the cluster st describes.
func writeJoin(w io.Writer, st admin.ClusterStatus, node string) error {
	if len(st.Routes) == 0 {
		return fmt.Errorf("%w: node %s has no routes configured to give a new node; list the cluster's route addresses in its titan.cluster.routes", errMembership, st.Node)
	}
	size := max(st.Size, len(st.Nodes)) + 1
	routes := strings.Join(st.Routes, ",")
	_, err := fmt.Fprintf(w, `%s is not a member of cluster %s. Start it on an empty store-dir with:

  titan serve --cluster-name %s --cluster-node %s --cluster-listen HOST:PORT --cluster-routes %s,nats://HOST:PORT

where HOST:PORT is the route address the other nodes reach %s on (or titan.cluster in
its config file: name, node-name, listen, routes). Add it to the other nodes' routes when
they are next restarted. The cluster then has %d nodes and needs %d up for a quorum.
Then run: titan cluster add %s --wait 2m
`, node, st.Cluster, st.Cluster, node, routes, node, size, size/2+1, node)
	return err
}
