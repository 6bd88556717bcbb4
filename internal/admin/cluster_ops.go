package admin

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/titan-broker/titan/internal/dest"
	"github.com/titan-broker/titan/internal/dispatch"
)

// ClusterQueues is the port the queue actions (create, delete, pause, resume, purge, browse,
// re-drive) act through in cluster mode, on the queues the cluster stores (JetStream), so
// that any node acts for the whole cluster; implemented by internal/broker over
// internal/cluster. It applies to queues-pattern identities (/queue/..., and bare
// destinations routed to queues); events dispatcher queues stay per node. Every method must
// be safe for concurrent use and bounded by ctx. Errors: dispatch.ErrNoQueue when the
// cluster holds neither messages nor a consumer for the queue, dispatch.ErrQueueNotEmpty
// (DeleteQueue without force), others for a cluster that cannot be reached.
type ClusterQueues interface {
	// CreateQueue makes the queue exist cluster-wide; created is false when it existed.
	CreateQueue(ctx context.Context, id dest.Identity) (created bool, err error)
	// DeleteQueue removes the queue (its consumer and its messages) and returns how many
	// messages were discarded.
	DeleteQueue(ctx context.Context, id dest.Identity, force bool) (discarded int, err error)
	// SetQueuePaused stops (true) or restarts (false) deliveries of the queue on every node.
	SetQueuePaused(ctx context.Context, id dest.Identity, paused bool) error
	// PurgeQueue removes the queue's stored messages and returns how many.
	PurgeQueue(ctx context.Context, id dest.Identity) (int, error)
	// BrowseQueue returns up to max stored messages of the queue, oldest first, then
	// scheduled ones, without consuming them.
	BrowseQueue(ctx context.Context, id dest.Identity, max int) ([]StoredMessage, error)
	// QueueDepth counts the messages the queue stores (not scheduled ones).
	QueueDepth(ctx context.Context, id dest.Identity) (int, error)
	// MoveQueueHead is Operator.MoveQueueHead on the cluster's copy of the queue.
	MoveQueueHead(ctx context.Context, id dest.Identity, fn func(StoredMessage) error) (moved bool, err error)
}

// CodeUnsupportedInCluster: the action cannot be expressed on the cluster's queues (HTTP
// 501); the message says why and what to do instead.
const CodeUnsupportedInCluster = "unsupported_in_cluster"

// ErrUnsupportedInCluster is the sentinel of CodeUnsupportedInCluster.
var ErrUnsupportedInCluster = errors.New("admin: not supported in cluster mode")

// clusterOpTimeout bounds one operator action on the cluster's queues (a re-drive: each
// message).
const clusterOpTimeout = 30 * time.Second

// inCluster reports whether id's actions go to the cluster's queues.
func (a *Admin) inCluster(id dest.Identity) bool {
	return a.opts.ClusterQueues != nil && id.Pattern == dest.PatternQueues
}

func clusterCtx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), clusterOpTimeout)
}

// clusterErr maps a ClusterQueues error to an *Error: not found, not empty, else
// CodeInternal with the cluster's reason (an operator needs it: no quorum, a timeout).
func (a *Admin) clusterErr(id dest.Identity, err error) error {
	var e *Error
	switch {
	case errors.As(err, &e):
		return e
	case errors.Is(err, dispatch.ErrNoQueue):
		return notFound(id, err)
	case errors.Is(err, dispatch.ErrQueueNotEmpty):
		return asError(err)
	}
	return newError(CodeInternal, "cluster: "+strings.TrimPrefix(err.Error(), "cluster: "), err)
}

// clusterInfo is id's QueueInfo as the cluster-wide queue list reports it (a bare one when
// the list does not hold it).
func (a *Admin) clusterInfo(id dest.Identity) QueueInfo {
	out := &QueueList{}
	a.clusterQueues(QueuesOptions{Group: id.Group, Destination: id.Destination()}, id, out)
	for _, q := range out.Queues {
		return q
	}
	return QueueInfo{Group: id.Group, Destination: id.Destination(), Pattern: dest.PatternQueues.String(),
		Replicas: []ClusterReplica{}, Settings: a.settingsOf(id)}
}

func (a *Admin) clusterCreate(id dest.Identity, o CreateQueueOptions) (*CreateQueueResult, error) {
	if o.MaxPendingBytes != nil || o.Capacity != nil {
		return nil, newError(CodeUnsupportedInCluster, "maxPendingBytes and capacity are not supported in cluster mode: "+
			"a queue's limits are its stream's (ring size from the address settings)", ErrUnsupportedInCluster)
	}
	if o.RingSize != nil {
		if err := a.checkRing(id, *o.RingSize); err != nil {
			return nil, err
		}
		if have := a.settingsOf(id).RingSize; max(have, 0) != max(*o.RingSize, 0) {
			return nil, newError(CodeUnsupportedInCluster, "ring size is not supported per queue in cluster mode: "+
				"it comes from the address settings (default-ring-size), the same on every node", ErrUnsupportedInCluster)
		}
	}
	ctx, cancel := clusterCtx()
	defer cancel()
	created, err := a.opts.ClusterQueues.CreateQueue(ctx, id)
	if err != nil {
		return nil, a.clusterErr(id, err)
	}
	return &CreateQueueResult{Created: created, Queue: a.clusterInfo(id)}, nil
}

func (a *Admin) clusterDelete(id dest.Identity, force bool) (*DeleteQueueResult, error) {
	ctx, cancel := clusterCtx()
	defer cancel()
	n, err := a.opts.ClusterQueues.DeleteQueue(ctx, id, force)
	if errors.Is(err, dispatch.ErrQueueNotEmpty) {
		return nil, newError(CodeQueueNotEmpty, "queue "+describe(id)+" is not empty ("+plural(n, "message", "messages")+
			"); delete with force=true to discard its messages", err)
	}
	if err != nil {
		return nil, a.clusterErr(id, err)
	}
	return &DeleteQueueResult{Group: id.Group, Destination: id.Destination(), Discarded: n}, nil
}

func (a *Admin) clusterPause(id dest.Identity, paused bool) (*QueueInfo, error) {
	ctx, cancel := clusterCtx()
	defer cancel()
	if err := a.opts.ClusterQueues.SetQueuePaused(ctx, id, paused); err != nil {
		return nil, a.clusterErr(id, err)
	}
	qi := a.clusterInfo(id)
	qi.Paused = paused // the list may read a replica that has not applied it yet
	return &qi, nil
}

func (a *Admin) clusterPurge(id dest.Identity) (*PurgeResult, error) {
	ctx, cancel := clusterCtx()
	defer cancel()
	n, err := a.opts.ClusterQueues.PurgeQueue(ctx, id)
	if err != nil {
		return nil, a.clusterErr(id, err)
	}
	return &PurgeResult{Node: a.node(), Group: id.Group, Destination: id.Destination(), Purged: n}, nil
}

func (a *Admin) clusterBrowse(id dest.Identity, limit int) ([]StoredMessage, error) {
	ctx, cancel := clusterCtx()
	defer cancel()
	ms, err := a.opts.ClusterQueues.BrowseQueue(ctx, id, limit)
	if err != nil {
		return nil, a.clusterErr(id, err)
	}
	return ms, nil
}

// clusterDepth is how many messages a re-drive of id may move (what it stores now).
func (a *Admin) clusterDepth(id dest.Identity) (int, error) {
	ctx, cancel := clusterCtx()
	defer cancel()
	n, err := a.opts.ClusterQueues.QueueDepth(ctx, id)
	if err != nil {
		return 0, a.clusterErr(id, err)
	}
	return n, nil
}

func (a *Admin) clusterMoveHead(id dest.Identity, fn func(StoredMessage) error) (bool, error) {
	ctx, cancel := clusterCtx()
	defer cancel()
	moved, err := a.opts.ClusterQueues.MoveQueueHead(ctx, id, fn)
	if err != nil {
		return false, a.clusterErr(id, err) // fn's *Error passes through
	}
	return moved, nil
}

// errRingSizeInCluster answers a run-time ring size change in cluster mode.
func errRingSizeInCluster() error {
	return newError(CodeUnsupportedInCluster, "setting a queue's ring size at run time is not supported in cluster mode: "+
		"ring size comes from the address settings (default-ring-size), the same on every node, and selects the queue's stream; "+
		"drain the queue, change the address settings on every node and restart them", ErrUnsupportedInCluster)
}
