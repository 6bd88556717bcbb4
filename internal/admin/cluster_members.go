package admin

import (
	"context"
	"errors"
	"net/http"
)

// Codes of RemoveClusterNode's errors.
const (
	// CodeNodeUp (409): the node to remove is up; stop it first.
	CodeNodeUp = "node_up"
	// CodeNotMember (404): no member of the cluster has that name or peer id.
	CodeNotMember = "not_member"
)

// PathClusterNodes answers DELETE ?node=NAME: the node leaves the cluster's JetStream meta
// group (`titan cluster remove NAME`; a node whose disk died, or shrinking the cluster).
// NAME is a node name or a Raft peer id (ClusterNode.Peer).
const PathClusterNodes = "/titan/monitor/cluster/nodes"

// ParamNode names the node of PathClusterNodes.
const ParamNode = "node"

// ClusterMembership is the optional part of a ClusterSource that changes the cluster's
// membership (implemented by internal/broker over cluster.Node.RemovePeer). RemoveNode must
// be bounded in time and safe for concurrent use.
type ClusterMembership interface {
	RemoveNode(ctx context.Context, name string) error
}

// NodeRemoval is the answer of DELETE PathClusterNodes.
type NodeRemoval struct {
	// Removed is the node's name.
	Removed string `json:"removed"`
}

// RemoveClusterNode removes the node named name (or with that peer id) from the cluster.
// Errors: CodeInvalidParameter for an empty name, CodeUnsupportedInCluster in single-node
// mode or with an external NATS, CodeNodeUp for a node that is up, CodeNotMember for a name
// no member has, CodeInternal with JetStream's answer (a removal in progress).
func (a *Admin) RemoveClusterNode(ctx context.Context, name string) (*NodeRemoval, error) {
	if name == "" {
		return nil, invalidParam("node is required")
	}
	m, ok := a.opts.Cluster.(ClusterMembership)
	if !ok || a.opts.Cluster == nil {
		return nil, newError(CodeUnsupportedInCluster, "removing a node needs cluster mode with embedded NATS", ErrUnsupportedInCluster)
	}
	if err := m.RemoveNode(ctx, name); err != nil {
		switch {
		case errors.Is(err, ErrNodeUp):
			return nil, newError(CodeNodeUp, "node "+name+" is up: stop it before removing it", ErrNodeUp)
		case errors.Is(err, ErrNotMember):
			return nil, newError(CodeNotMember, "node "+name+" is not a member of the cluster", ErrNotMember)
		}
		return nil, newError(CodeInternal, err.Error(), err)
	}
	return &NodeRemoval{Removed: name}, nil
}

func (a *Admin) serveRemoveClusterNode(w http.ResponseWriter, r *http.Request) {
	res, err := a.RemoveClusterNode(r.Context(), r.URL.Query().Get(ParamNode))
	a.respond(w, r, http.StatusOK, res, err)
}
