package metrics

import (
	"github.com/prometheus/client_golang/prometheus"
)

// Names of the latency histograms, traffic counters and events-store series (the Grafana
// dashboard docs/grafana/titan.json uses them).
const (
	NameStoreCommit       = "titan_store_commit_seconds"
	NameDeliverLatency    = "titan_publish_to_deliver_seconds"
	NameReceiptLatency    = "titan_receipt_seconds"
	NameBytesReceived     = "titan_bytes_received_total"
	NameBytesSent         = "titan_bytes_sent_total"
	NameLogMessages       = "titan_events_store_messages"
	NameLogBytes          = "titan_events_store_bytes"
	NameLogSubscriptions  = "titan_events_store_subscriptions"
	NameLogConsumerLag    = "titan_events_store_consumer_lag_messages"
	NameLogLastSequence   = "titan_events_store_last_sequence"
	NameLogMaxLagDurables = "titan_events_store_consumer_lag_max_messages"
)

// latencyBuckets span 50 µs to ~26 s (×2 each): fsyncs on fast NVMe up to a stalled disk,
// and deliveries from in-memory hand-off to a consumer that held its credit for a while.
var latencyBuckets = prometheus.ExponentialBuckets(50e-6, 2, 20)

// Instruments are the broker's histograms, created once per broker and observed on the
// message path (each Observe is a few atomic adds); they are also prometheus.Collectors
// served on /metrics. Safe for concurrent use.
type Instruments struct {
	// StoreCommit observes durable acceptance: append to fsync'd group commit, in seconds.
	StoreCommit prometheus.Histogram
	// Deliver observes publish-to-deliver latency: broker acceptance (message timestamp,
	// millisecond resolution) to the MESSAGE's hand-off to the connection writer, in seconds.
	Deliver prometheus.Histogram
	// Receipt observes RECEIPT latency: routing a frame that asked for a receipt to writing
	// the RECEIPT (durable acceptance included), in seconds.
	Receipt prometheus.Histogram
}

// NewInstruments returns fresh histograms.
func NewInstruments() *Instruments {
	h := func(name, help string) prometheus.Histogram {
		return prometheus.NewHistogram(prometheus.HistogramOpts{Name: name, Help: help, Buckets: latencyBuckets})
	}
	return &Instruments{
		StoreCommit: h(NameStoreCommit, "Durable acceptance time: store append to fsync'd group commit, in seconds."),
		Deliver:     h(NameDeliverLatency, "Publish-to-deliver latency: broker acceptance to MESSAGE hand-off to the connection, in seconds."),
		Receipt:     h(NameReceiptLatency, "RECEIPT latency: routing a frame that asked for a receipt to writing its RECEIPT, in seconds."),
	}
}

// Collectors returns the histograms as collectors.
func (i *Instruments) Collectors() []prometheus.Collector {
	return []prometheus.Collector{i.StoreCommit, i.Deliver, i.Receipt}
}

// TrafficCollectors export bytes read from and written to clients (counters read at scrape
// time through in and out).
func TrafficCollectors(in, out func() uint64) []prometheus.Collector {
	return []prometheus.Collector{
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: NameBytesReceived, Help: "Bytes read from client connections."}, func() float64 { return float64(in()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: NameBytesSent, Help: "Bytes written to client connections."}, func() float64 { return float64(out()) }),
	}
}

// LogStat is one events-store log at scrape time, for LogCollector.
type LogStat struct {
	Group, Destination string
	Messages, Bytes    int64
	LastSequence       uint64
	// Lags are the live subscriptions' lags (last sequence - position), in messages.
	Lags []uint64
}

// LogCollector exports per-log series (labels group, destination): messages and bytes held,
// last sequence, live subscriptions and the largest consumer lag. Logs beyond
// DefaultMaxDestinationSeries are left out (cardinality cap). read is called once per scrape.
type LogCollector struct {
	read                                   func() []LogStat
	messages, bytes, last, subs, lag, lags *prometheus.Desc
}

// NewLogCollector returns a LogCollector over read.
func NewLogCollector(read func() []LogStat) *LogCollector {
	l := []string{"group", "destination"}
	d := func(n, h string) *prometheus.Desc { return prometheus.NewDesc(n, h, l, nil) }
	return &LogCollector{
		read:     read,
		messages: d(NameLogMessages, "Records an events-store log holds."),
		bytes:    d(NameLogBytes, "Bytes of the records an events-store log holds."),
		last:     d(NameLogLastSequence, "Highest sequence an events-store log gave."),
		subs:     d(NameLogSubscriptions, "Live subscriptions reading an events-store log."),
		lag:      d(NameLogMaxLagDurables, "Largest consumer lag among a log's live subscriptions, in messages (last sequence - acknowledged position)."),
		lags:     d(NameLogConsumerLag, "Summed consumer lag of a log's live subscriptions, in messages."),
	}
}

// Describe implements prometheus.Collector.
func (c *LogCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.messages, c.bytes, c.last, c.subs, c.lag, c.lags} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c *LogCollector) Collect(ch chan<- prometheus.Metric) {
	for i, l := range c.read() {
		if i >= DefaultMaxDestinationSeries {
			break
		}
		var maxLag, sum uint64
		for _, x := range l.Lags {
			maxLag = max(maxLag, x)
			sum += x
		}
		g := func(d *prometheus.Desc, v float64) {
			ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, l.Group, l.Destination)
		}
		g(c.messages, float64(l.Messages))
		g(c.bytes, float64(l.Bytes))
		g(c.last, float64(l.LastSequence))
		g(c.subs, float64(len(l.Lags)))
		g(c.lag, float64(maxLag))
		g(c.lags, float64(sum))
	}
}
