package metrics

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// NewNodeRegistry is NewRegistry for cluster mode: every series it serves carries the
// const label node=<node> (prometheus.WrapRegistererWith), so the series of a cluster's
// nodes stay apart when one Prometheus scrapes them all. A collector whose own series
// already have a "node" label makes it panic (label collision), as MustRegister does.
func NewNodeRegistry(node string, src Source, extra ...prometheus.Collector) *prometheus.Registry {
	reg := prometheus.NewRegistry()
	r := prometheus.WrapRegistererWith(prometheus.Labels{"node": node}, reg)
	r.MustRegister(
		NewCollector(src),
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	)
	for _, c := range extra {
		r.MustRegister(c)
	}
	return reg
}
