package requests

import "github.com/prometheus/client_golang/prometheus"

var (
	descOffered = prometheus.NewDesc("titan_cluster_requests_offered_total",
		"Command and query requests this node sent to responders over NATS (each pick of a responder node counts).", nil, nil)
	descBusy = prometheus.NewDesc("titan_cluster_requests_busy_total",
		"Requests a responder node could not deliver (its responders had no credit), passed on to another pick.", nil, nil)
	descClaims = prometheus.NewDesc("titan_cluster_response_claims_total",
		"Responses sent through this node to a requester on another node, matched there against its pending request (one NATS round trip each).", nil, nil)
)

// Collector returns a Prometheus collector of the adapter's counters on this node:
// requests offered, busy and claimed. The registry adds the node label. Safe for
// concurrent use (the counters are atomic).
func (r *Pattern) Collector() prometheus.Collector { return collector{r} }

type collector struct{ r *Pattern }

func (c collector) Describe(ch chan<- *prometheus.Desc) {
	ch <- descOffered
	ch <- descBusy
	ch <- descClaims
}

func (c collector) Collect(ch chan<- prometheus.Metric) {
	counter := func(d *prometheus.Desc, v uint64) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v))
	}
	counter(descOffered, c.r.Offered.Load())
	counter(descBusy, c.r.Busy.Load())
	counter(descClaims, c.r.Claims.Load())
}
