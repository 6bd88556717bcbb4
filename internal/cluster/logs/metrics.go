package logs

import "github.com/prometheus/client_golang/prometheus"

var descDuplicates = prometheus.NewDesc("titan_cluster_events_store_duplicates_total",
	"Events-store SENDs through this node that JetStream answered as duplicates of a stored record (same _AMQ_DUPL_ID through any node, within the duplicate window).", nil, nil)

// Collector returns a Prometheus collector of the adapter's counters on this node
// (events-store duplicates). The registry adds the node label. Safe for concurrent use.
func (e *Pattern) Collector() prometheus.Collector { return collector{e} }

type collector struct{ e *Pattern }

func (c collector) Describe(ch chan<- *prometheus.Desc) { ch <- descDuplicates }

func (c collector) Collect(ch chan<- prometheus.Metric) {
	ch <- prometheus.MustNewConstMetric(descDuplicates, prometheus.CounterValue, float64(c.e.Duplicates.Load()))
}
