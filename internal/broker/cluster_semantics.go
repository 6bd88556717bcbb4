package broker

import (
	"log/slog"

	"github.com/titan-broker/titan/internal/cluster"
	"github.com/titan-broker/titan/internal/cluster/pipeline"
	"github.com/titan-broker/titan/internal/config"
)

// semantics applies the address settings and duplicate detection that cluster mode keeps
// in JetStream (issue 15): the streams' Nats-Msg-Id window is the shorter of
// titan.duplicate-detection's window and cluster.BrokerIDWindow, client duplicate ids are
// kept for the whole window by cluster.Duplicates, events-store logs get their retention from the address settings (queues already
// read ring-size from them), and the returned committer is the router's transaction port,
// so a COMMIT stores its SENDs as JetStream atomic batches. Called once, before the router
// is built.
func (c *clusterPatterns) semantics(cfg config.Config, settings cluster.Settings, log *slog.Logger) *pipeline.Committer {
	w := config.Ms(cfg.DuplicateDetection.Window)
	c.queues.DuplicateWindow = w
	c.store.DuplicateWindow = w
	c.store.Settings = settings
	// Client duplicate ids (_AMQ_DUPL_ID) beyond the streams' short window (issue 28).
	ids := cluster.NewDuplicates(c.node, w)
	c.queues.DuplicateIDs, c.store.DuplicateIDs = ids, ids
	cm := pipeline.NewCommitter(c.node, c.queues, c.store, log.With("component", "cluster-commit"))
	cm.DuplicateIDs = ids
	return cm
}
