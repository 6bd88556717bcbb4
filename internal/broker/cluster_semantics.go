package broker

import (
	"log/slog"

	"github.com/titan-broker/titan/internal/cluster"
	"github.com/titan-broker/titan/internal/cluster/pipeline"
	"github.com/titan-broker/titan/internal/config"
)

// semantics applies the address settings and duplicate detection that cluster mode keeps
// in JetStream (issue 15): the streams' Nats-Msg-Id window is titan.duplicate-detection's
// window, events-store logs get their retention from the address settings (queues already
// read ring-size from them), and the returned committer is the router's transaction port,
// so a COMMIT stores its SENDs as JetStream atomic batches. Called once, before the router
// is built.
func (c *clusterPatterns) semantics(cfg config.Config, settings cluster.Settings, log *slog.Logger) *pipeline.Committer {
	w := config.Ms(cfg.DuplicateDetection.Window)
	c.queues.DuplicateWindow = w
	c.store.DuplicateWindow = w
	c.store.Settings = settings
	return pipeline.NewCommitter(c.node, c.queues, c.store, log.With("component", "cluster-commit"))
}
