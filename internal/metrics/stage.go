package metrics

import (
	"strings"
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/titan-broker/titan/internal/dest"
	"github.com/titan-broker/titan/internal/router"
)

// DefaultMaxDestinationSeries bounds the (group, destination) pairs a DestinationStage tracks
// when NewDestinationStage is given no positive bound.
const DefaultMaxDestinationSeries = 10000

// OverflowLabel is the group and destination label of the series that counts SENDs to pairs
// beyond a DestinationStage's bound.
const OverflowLabel = "_other"

// Names of the series a DestinationStage exports, labelled group, destination, pattern.
const (
	NameDestinationMessages = "titan_destination_sent_messages_total"
	NameDestinationBytes    = "titan_destination_sent_bytes_total"
)

// DestinationStage is a router stage for SEND routes (install it with
// broker.Options.SendStages, or embed.Config.DestinationMetrics) that counts the messages and
// body bytes published per (group, destination). It runs between the route stage and
// publication (reference 000's custom-handler slot), so it sees events destinations that
// never get a dispatcher queue as well as queues; SENDs inside a transaction are counted
// when the COMMIT replays them. It is also a prometheus.Collector exporting
// titan_destination_sent_messages_total and titan_destination_sent_bytes_total.
//
// Cardinality is bounded: after maxSeries distinct pairs, further new pairs are counted under
// group and destination "_other". Pairs are never forgotten (counters must not go backwards).
//
// Cost on the message path: one read-locked map lookup and two atomic adds; a new pair takes
// the write lock once. Safe for concurrent use.
type DestinationStage struct {
	maxSeries int
	messages  *prometheus.Desc
	bytes     *prometheus.Desc

	mu     sync.RWMutex                    // guards series
	series map[dest.Identity]*destCounters // never shrinks
	other  destCounters
}

type destCounters struct {
	group, destination, pattern string
	messages, bytes             atomic.Uint64
}

// NewDestinationStage returns a stage tracking at most maxSeries (group, destination) pairs
// (<= 0: DefaultMaxDestinationSeries).
func NewDestinationStage(maxSeries int) *DestinationStage {
	if maxSeries <= 0 {
		maxSeries = DefaultMaxDestinationSeries
	}
	s := &DestinationStage{
		maxSeries: maxSeries,
		messages:  prometheus.NewDesc(NameDestinationMessages, "Messages sent (SEND routed to publication), by group and destination.", queueLabels, nil),
		bytes:     prometheus.NewDesc(NameDestinationBytes, "Body bytes sent, by group and destination.", queueLabels, nil),
		series:    make(map[dest.Identity]*destCounters),
	}
	s.other.group, s.other.destination = OverflowLabel, OverflowLabel
	return s
}

// Apply implements router.Stage. It records and never fails the frame.
func (s *DestinationStage) Apply(c *router.Context) {
	if c.Message == nil {
		return
	}
	dc := s.counters(c.Identity)
	dc.messages.Add(1)
	dc.bytes.Add(uint64(len(c.Message.Body)))
}

func (s *DestinationStage) counters(id dest.Identity) *destCounters {
	s.mu.RLock()
	dc, ok := s.series[id]
	s.mu.RUnlock()
	if ok {
		return dc
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if dc, ok = s.series[id]; ok {
		return dc
	}
	if len(s.series) >= s.maxSeries {
		return &s.other
	}
	id.Group, id.Channel = strings.Clone(id.Group), strings.Clone(id.Channel)
	dc = &destCounters{group: id.Group, destination: id.Destination(), pattern: id.Pattern.String()}
	s.series[id] = dc
	return dc
}

// Describe implements prometheus.Collector.
func (s *DestinationStage) Describe(ch chan<- *prometheus.Desc) {
	ch <- s.messages
	ch <- s.bytes
}

// Collect implements prometheus.Collector.
func (s *DestinationStage) Collect(ch chan<- prometheus.Metric) {
	s.mu.RLock()
	all := make([]*destCounters, 0, len(s.series)+1)
	for _, dc := range s.series {
		all = append(all, dc)
	}
	s.mu.RUnlock()
	if s.other.messages.Load() > 0 {
		all = append(all, &s.other)
	}
	for _, dc := range all {
		ch <- prometheus.MustNewConstMetric(s.messages, prometheus.CounterValue, float64(dc.messages.Load()), dc.group, dc.destination, dc.pattern)
		ch <- prometheus.MustNewConstMetric(s.bytes, prometheus.CounterValue, float64(dc.bytes.Load()), dc.group, dc.destination, dc.pattern)
	}
}

var (
	_ router.Stage         = (*DestinationStage)(nil)
	_ prometheus.Collector = (*DestinationStage)(nil)
	_ prometheus.Collector = (*Collector)(nil)
)
