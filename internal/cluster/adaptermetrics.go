package cluster

import "github.com/prometheus/client_golang/prometheus"

var (
	descQueueDuplicates = prometheus.NewDesc("titan_cluster_queue_duplicates_total",
		"Queue SENDs through this node that JetStream answered as duplicates of a stored message (same _AMQ_DUPL_ID through any node, within the duplicate window): acknowledged, stored once.", nil, nil)
	descStoreDuplicates = prometheus.NewDesc("titan_cluster_events_store_duplicates_total",
		"Events-store SENDs through this node that JetStream answered as duplicates of a stored record (same _AMQ_DUPL_ID through any node, within the duplicate window).", nil, nil)
	descRequestsOffered = prometheus.NewDesc("titan_cluster_requests_offered_total",
		"Command and query requests this node sent to responders over NATS (each pick of a responder node counts).", nil, nil)
	descRequestsBusy = prometheus.NewDesc("titan_cluster_requests_busy_total",
		"Requests a responder node could not deliver (its responders had no credit), passed on to another pick.", nil, nil)
	descRequestsClaims = prometheus.NewDesc("titan_cluster_response_claims_total",
		"Responses sent through this node to a requester on another node, matched there against its pending request (one NATS round trip each).", nil, nil)
)

// AdapterCollector returns a Prometheus collector of the cluster adapters' counters on this
// node: queue and events-store duplicates, and requests offered, busy and claimed. Any
// adapter may be nil (its series are then not exported). The registry adds the node label.
// Safe for concurrent use (the counters are atomic).
func AdapterCollector(q *Queues, es *EventsStore, r *Requests) prometheus.Collector {
	return adapterCollector{q, es, r}
}

type adapterCollector struct {
	q  *Queues
	es *EventsStore
	r  *Requests
}

func (c adapterCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descQueueDuplicates, descStoreDuplicates, descRequestsOffered, descRequestsBusy, descRequestsClaims} {
		ch <- d
	}
}

func (c adapterCollector) Collect(ch chan<- prometheus.Metric) {
	counter := func(d *prometheus.Desc, v uint64) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v))
	}
	if c.q != nil {
		counter(descQueueDuplicates, c.q.Duplicates.Load())
	}
	if c.es != nil {
		counter(descStoreDuplicates, c.es.Duplicates.Load())
	}
	if c.r != nil {
		counter(descRequestsOffered, c.r.Offered.Load())
		counter(descRequestsBusy, c.r.Busy.Load())
		counter(descRequestsClaims, c.r.Claims.Load())
	}
}
