package queues

import "github.com/prometheus/client_golang/prometheus"

var descDuplicates = prometheus.NewDesc("titan_cluster_queue_duplicates_total",
	"Queue SENDs through this node that JetStream answered as duplicates of a stored message (same _AMQ_DUPL_ID through any node, within the duplicate window): acknowledged, stored once.", nil, nil)

// Collector returns a Prometheus collector of the adapter's counters on this node (queue
// duplicates). The registry adds the node label. Safe for concurrent use.
func (q *Pattern) Collector() prometheus.Collector { return collector{q} }

type collector struct{ q *Pattern }

func (c collector) Describe(ch chan<- *prometheus.Desc) { ch <- descDuplicates }

func (c collector) Collect(ch chan<- prometheus.Metric) {
	ch <- prometheus.MustNewConstMetric(descDuplicates, prometheus.CounterValue, float64(c.q.Duplicates.Load()))
}
