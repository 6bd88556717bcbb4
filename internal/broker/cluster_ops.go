package broker

import (
	"context"
	"errors"

	"github.com/titan-broker/titan/internal/admin"
	clusterqueues "github.com/titan-broker/titan/internal/cluster/queues"
	"github.com/titan-broker/titan/internal/dest"
	"github.com/titan-broker/titan/internal/dispatch"
	"github.com/titan-broker/titan/internal/message"
)

// clusterQueues adapts the cluster's queues adapter to admin.ClusterQueues: the operator's
// queue actions act on JetStream, cluster-wide.
type clusterQueues struct{ q *clusterqueues.Pattern }

// opErr maps the cluster's sentinels to the dispatcher's, which the admin API reports.
func opErr(err error) error {
	switch {
	case errors.Is(err, clusterqueues.ErrNoQueue):
		return dispatch.ErrNoQueue
	case errors.Is(err, clusterqueues.ErrQueueNotEmpty):
		return dispatch.ErrQueueNotEmpty
	}
	return err
}

// CreateQueue implements admin.ClusterQueues.
func (c clusterQueues) CreateQueue(ctx context.Context, id dest.Identity) (bool, error) {
	created, err := c.q.CreateQueue(ctx, id)
	return created, opErr(err)
}

// DeleteQueue implements admin.ClusterQueues.
func (c clusterQueues) DeleteQueue(ctx context.Context, id dest.Identity, force bool) (int, error) {
	n, err := c.q.DeleteQueue(ctx, id, force)
	return n, opErr(err)
}

// SetQueuePaused implements admin.ClusterQueues.
func (c clusterQueues) SetQueuePaused(ctx context.Context, id dest.Identity, paused bool) error {
	return opErr(c.q.SetPaused(ctx, id, paused))
}

// PurgeQueue implements admin.ClusterQueues.
func (c clusterQueues) PurgeQueue(ctx context.Context, id dest.Identity) (int, error) {
	n, err := c.q.PurgeQueue(ctx, id)
	return n, opErr(err)
}

// BrowseQueue implements admin.ClusterQueues.
func (c clusterQueues) BrowseQueue(ctx context.Context, id dest.Identity, max int) ([]admin.StoredMessage, error) {
	ms, err := c.q.BrowseQueue(ctx, id, max)
	if err != nil {
		return nil, opErr(err)
	}
	out := make([]admin.StoredMessage, len(ms))
	for i, m := range ms {
		out[i] = stored(m.Message)
		out[i].DeliverAt = m.DeliverAt
	}
	return out, nil
}

// QueueDepth implements admin.ClusterQueues.
func (c clusterQueues) QueueDepth(ctx context.Context, id dest.Identity) (int, error) {
	n, err := c.q.QueueDepth(ctx, id)
	return n, opErr(err)
}

// MoveQueueHead implements admin.ClusterQueues.
func (c clusterQueues) MoveQueueHead(ctx context.Context, id dest.Identity, fn func(admin.StoredMessage) error) (bool, error) {
	moved, err := c.q.MoveQueueHead(ctx, id, func(m *message.Message) error { return fn(stored(m)) })
	return moved, opErr(err)
}
