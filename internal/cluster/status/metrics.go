package status

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/titan-broker/titan/internal/cluster"
)

// metricsTimeout bounds the Status call of one scrape.
const metricsTimeout = 3 * time.Second

var (
	descNodes = prometheus.NewDesc("titan_cluster_nodes",
		"Nodes of the cluster known to this node (JetStream meta group peers).", nil, nil)
	descNodesUp = prometheus.NewDesc("titan_cluster_nodes_up",
		"Nodes of the cluster this node is connected to, itself included.", nil, nil)
	descMetaLeader = prometheus.NewDesc("titan_cluster_meta_leader",
		"1 when this node is the JetStream meta leader, else 0.", nil, nil)
	descStreamLeader = prometheus.NewDesc("titan_cluster_stream_leader",
		"1 when this node leads the stream, else 0.", []string{"stream"}, nil)
	descStreamMessages = prometheus.NewDesc("titan_cluster_stream_messages",
		"Messages stored in the stream (as its leader reports).", []string{"stream"}, nil)
	descReplicaLag = prometheus.NewDesc("titan_cluster_stream_replica_lag",
		"Raft operations the replica is behind the stream's leader.", []string{"stream", "replica"}, nil)
	descReplicaCurrent = prometheus.NewDesc("titan_cluster_stream_replica_current",
		"1 when the replica is current (seen recently and caught up), else 0.", []string{"stream", "replica"}, nil)
	descRaftGroups = prometheus.NewDesc("titan_cluster_raft_groups",
		"Raft groups this node takes part in: the JetStream meta group and one per stream and replicated consumer replica it hosts (embedded NATS only).", nil, nil)
	descStatusErrors = prometheus.NewDesc("titan_cluster_status_errors",
		"Parts of the cluster state the last scrape could not read (0 when all answered).", nil, nil)
)

// Collector returns node n's Prometheus collector of the cluster gauges: nodes and nodes up, meta
// leadership, and per Titan stream its leadership, messages and each replica's lag and
// currency. Each scrape reads the cluster's state as Status does, without the queues (bounded by 3 s); a scrape that cannot list the
// streams reports only the node gauges. Safe for concurrent use.
func Collector(n *cluster.Node) prometheus.Collector { return nodeCollector{n} }

type nodeCollector struct{ n *cluster.Node }

func (c nodeCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descNodes, descNodesUp, descMetaLeader, descRaftGroups, descStreamLeader, descStreamMessages, descReplicaLag, descReplicaCurrent, descStatusErrors} {
		ch <- d
	}
}

func (c nodeCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), metricsTimeout)
	defer cancel()
	st, err := read(ctx, c.n, false)
	errs := len(st.Errors)
	if err != nil {
		errs++
	}
	up := 0
	for _, ns := range st.Nodes {
		if ns.Up {
			up++
		}
	}
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	gauge(descNodes, float64(len(st.Nodes)))
	gauge(descNodesUp, float64(up))
	gauge(descMetaLeader, b2f(st.MetaLeader != "" && st.MetaLeader == st.Node))
	gauge(descStatusErrors, float64(errs))
	if c.n.Embedded() {
		gauge(descRaftGroups, float64(st.RaftGroups))
	}
	for _, s := range st.Streams {
		gauge(descStreamLeader, b2f(s.Leader == st.Node), s.Name)
		gauge(descStreamMessages, float64(s.Messages), s.Name)
		for _, r := range s.Replicas {
			gauge(descReplicaLag, float64(r.Lag), s.Name, r.Name)
			gauge(descReplicaCurrent, b2f(r.Current), s.Name, r.Name)
		}
	}
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
