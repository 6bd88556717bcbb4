package metrics

import (
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/titan-broker/titan/internal/dest"
	"github.com/titan-broker/titan/internal/dispatch"
	"github.com/titan-broker/titan/internal/eventlog"
	"github.com/titan-broker/titan/internal/flow"
	"github.com/titan-broker/titan/internal/router"
	"github.com/titan-broker/titan/internal/rpc"
	"github.com/titan-broker/titan/internal/session"
	"github.com/titan-broker/titan/internal/store"
)

// Source is what the collector reads at scrape time. The broker implements it (through a
// small adapter in internal/broker); tests may implement it over bare patterns. Every method
// must be safe for concurrent use and cheap: it is called once per scrape.
type Source interface {
	// Version is the broker version ("0.1.0").
	Version() string
	// StartTime is when the broker started (zero before Start).
	StartTime() time.Time
	// Dispatcher holds the queues and message counters that are exported.
	Dispatcher() *dispatch.Dispatcher
	// Outbox summarises the events-store pollers.
	Outbox() eventlog.Stats
	// RPC returns the request/response counters per channel.
	RPC() []rpc.Stats
	// Router is the inbound router whose per-route counters are exported; nil exports none.
	Router() *router.Router
	// Sessions is a snapshot of the open connections; the caller owns the slice.
	Sessions() []*session.Session
	// ConnectionsAccepted counts every connection accepted since start.
	ConnectionsAccepted() uint64
	// ConnectionsClosed counts closed connections that ended for reason r.
	ConnectionsClosed(r session.CloseReason) uint64
	// StoreHealth is the store's condition (store.Store.Health); it never blocks on I/O.
	StoreHealth() store.Health
	// DuplicateIDs returns how many duplicate ids are remembered and how many SENDs were
	// recognised as duplicates since start.
	DuplicateIDs() (remembered int, duplicates uint64)
}

// Metric names. Queue metrics carry the labels group, destination and pattern.
const (
	NameBuildInfo           = "titan_build_info"
	NameStartTime           = "titan_start_time_seconds"
	NameConnections         = "titan_connections"
	NameConnectionsAccepted = "titan_connections_accepted_total"
	NameConnectionsClosed   = "titan_connections_closed_total"
	NameQueuedBytes         = "titan_connection_queued_bytes"
	NameRouterFrames        = "titan_router_frames_total"
	NameRouterErrors        = "titan_router_errors_total"
	NamePublished           = "titan_messages_published_total"
	NameEventsNoSubscriber  = "titan_events_no_subscriber_total"
	NameEventsDropped       = "titan_events_dropped_total"
	NameDeadLettered        = "titan_messages_dead_lettered_total"
	NameExpired             = "titan_messages_expired_total"
	NameQueues              = "titan_queues"
	NameDestinations        = "titan_destinations"
	NameDestinationsMax     = "titan_destinations_max"
	NameDestinationRefused  = "titan_destination_limit_refusals_total"
	NameDestinationsReclaim = "titan_destinations_reclaimed_total"
	NameGroups              = "titan_groups"
	NameGroupRefused        = "titan_group_limit_refusals_total"
	NameDuplicateIDs        = "titan_duplicate_ids"
	NameDuplicates          = "titan_duplicates_total"
	NameStoreState          = "titan_store_state"
	NameStoreStateChanges   = "titan_store_state_changes_total"
	NameStoreRecoveries     = "titan_store_recoveries_total"
	NameStoreWALSyncs       = "titan_store_wal_syncs_total"
	NameStoreGroupCommits   = "titan_store_group_commits_total"
	NameStoreGroupCommitSec = "titan_store_group_commit_seconds_total"
	NameStoreRecords        = "titan_store_records_appended_total"
	NameStoreUnwritten      = "titan_store_records_unwritten_total"
	NameQueueGroups         = "titan_queue_groups"
	NameQueueMessages       = "titan_queue_messages"
	NameQueuePendingBytes   = "titan_queue_pending_bytes"
	NameQueueCapacity       = "titan_queue_capacity_messages"
	NameQueueMaxPending     = "titan_queue_max_pending_bytes"
	NameQueueRingSize       = "titan_queue_ring_size"
	NameQueueDelivering     = "titan_queue_delivering_messages"
	NameQueueScheduled      = "titan_queue_scheduled_messages"
	NameQueueConsumers      = "titan_queue_consumers"
	NameQueuePaused         = "titan_queue_paused"
	NameQueueEnqueued       = "titan_queue_enqueued_total"
	NameQueueDispatched     = "titan_queue_dispatched_total"
	NameQueueAcked          = "titan_queue_acked_total"
	NameQueueDropped        = "titan_queue_dropped_total"
	NameQueueRingRemoved    = "titan_queue_ring_removed_total"
	NameQueueExpired        = "titan_queue_expired_total"
	NameQueueDeadLettered   = "titan_queue_dead_lettered_total"
	NameEgressDropped       = "titan_egress_headers_dropped_total"
	NameLogDelivered        = "titan_events_store_delivered_total"
	NameOutboxPollers       = "titan_outbox_pollers"
	NameOutboxMaxInterval   = "titan_outbox_max_interval_seconds"
	NameOutboxSheds         = "titan_outbox_sheds"
	NameOutboxSkipped       = "titan_outbox_skipped_fetches"
	NameRPCRequests         = "titan_rpc_requests_total"
	NameRPCResponses        = "titan_rpc_responses_total"
	NameRPCTimeouts         = "titan_rpc_timeouts_total"
	NameRPCNoResponder      = "titan_rpc_no_responder_total"
	NameRPCDropped          = "titan_rpc_dropped_responses_total"
	NameRPCResponseTime     = "titan_rpc_response_seconds"
	NameProducerPauses      = "titan_producer_pauses_total"
	NameProducerResumes     = "titan_producer_resumes_total"
	NameProducersPaused     = "titan_producers_paused"
	NameSlowConsumers       = "titan_slow_consumers_closed_total"
	NameEventsDroppedPolicy = "titan_events_dropped_by_policy_total"
	NameHeapCongested       = "titan_heap_over_watermark"
)

// FlowSource is implemented by a Source that has flow control (DESIGN §9); a Source without
// it exports the flow-control series as zeros.
type FlowSource interface {
	// FlowStats returns the flow-control counters.
	FlowStats() *flow.Stats
	// HeapCongested reports whether the heap is over its high watermark.
	HeapCongested() bool
}

// CommitSource is implemented by a Source whose store commits appends in groups (the Pebble
// store); without it, or when it reports ok false (the memory store, cluster mode), the
// group commit series are not exported.
type CommitSource interface {
	// StoreGroupCommits returns the store's group commit counters.
	StoreGroupCommits() (stats store.GroupCommitStats, ok bool)
}

var queueLabels = []string{"group", "destination", "pattern"}

// Collector is a prometheus.Collector over a Source. It holds no state of its own besides
// the metric descriptions; every value is read from the Source during Collect. Safe for
// concurrent use (concurrent scrapes each read the Source independently).
type Collector struct {
	src Source

	buildInfo, startTime                         *prometheus.Desc
	connections, accepted, closed, queuedBytes   *prometheus.Desc
	routed, routeErrors                          *prometheus.Desc
	published, noSub, evDropped, dead, expired   *prometheus.Desc
	queues, groups                               *prometheus.Desc
	dests, destsMax, destRefused, destReclaimed  *prometheus.Desc
	storeState, storeChanges, storeRecoveries    *prometheus.Desc
	walSyncs, groupCommits, groupCommitSeconds   *prometheus.Desc
	recordsAppended, recordsUnwritten            *prometheus.Desc
	dupIDs, duplicates                           *prometheus.Desc
	groupsAll, groupRefused                      *prometheus.Desc
	qMessages, qBytes, qCapacity, qMaxBytes      *prometheus.Desc
	qRing, qDelivering, qScheduled, qConsumers   *prometheus.Desc
	qPaused, qEnqueued, qDispatched, qAcked      *prometheus.Desc
	qDropped, qRingRemoved, qExpired, qDeadLettr *prometheus.Desc
	egressDropped, logDelivered                  *prometheus.Desc
	outboxPollers, outboxMaxInterval             *prometheus.Desc
	outboxSheds, outboxSkipped                   *prometheus.Desc
	rpcRequests, rpcResponses, rpcTimeouts       *prometheus.Desc
	rpcNoResponder, rpcDropped, rpcResponseTime  *prometheus.Desc
	pauses, resumes, paused, slow, policyDropped *prometheus.Desc
	heapOver                                     *prometheus.Desc
}

// NewCollector returns a collector reading src. The series it exports:
//
//   - titan_build_info{version} 1; titan_start_time_seconds (Unix seconds).
//   - titan_connections (open now), titan_connections_accepted_total,
//     titan_connections_closed_total{reason} (one series per session.CloseReason, zeros
//     included), titan_connection_queued_bytes (bytes queued to all connections' writers).
//   - titan_router_frames_total{route}, titan_router_errors_total{route}.
//   - titan_messages_published_total, titan_events_no_subscriber_total,
//     titan_events_dropped_total, titan_messages_dead_lettered_total,
//     titan_messages_expired_total.
//   - titan_queues, titan_queue_groups (groups holding at least one queue).
//   - titan_destinations (queues plus events-store logs), titan_destinations_max (0: no
//     limit), titan_destination_limit_refusals_total (creations refused by the broker-wide
//     or a per-connection limit), titan_destinations_reclaimed_total (idle destinations
//     removed).
//   - titan_groups (groups holding a queue or an events-store log),
//     titan_group_limit_refusals_total (creations refused by max-groups).
//   - titan_duplicate_ids (duplicate ids remembered now), titan_duplicates_total (SENDs
//     answered without being stored or delivered because their duplicate id repeated one).
//   - titan_store_state{state="ok"|"degraded"|"down"} (1 for the current state, 0 for the
//     others), titan_store_state_changes_total, titan_store_recoveries_total.
//   - with a store that commits in groups (CommitSource): titan_store_wal_syncs_total,
//     titan_store_group_commits_total, titan_store_group_commit_seconds_total,
//     titan_store_records_appended_total, titan_store_records_unwritten_total. Records per
//     fsync is the rate of (appended − unwritten) over the rate of group commits; the mean
//     commit time is the rate of the seconds over the rate of group commits.
//   - per queue {group, destination, pattern}: gauges titan_queue_messages,
//     titan_queue_pending_bytes, titan_queue_capacity_messages (0: no count limit),
//     titan_queue_max_pending_bytes (0: no byte limit), titan_queue_ring_size (<= 0: not a
//     ring), titan_queue_delivering_messages, titan_queue_scheduled_messages,
//     titan_queue_consumers, titan_queue_paused (0 or 1); counters
//     titan_queue_enqueued_total, titan_queue_dispatched_total, titan_queue_acked_total,
//     titan_queue_dropped_total, titan_queue_ring_removed_total, titan_queue_expired_total,
//     titan_queue_dead_lettered_total.
//   - flow control (DESIGN §9): titan_producer_pauses_total, titan_producer_resumes_total,
//     titan_producers_paused, titan_slow_consumers_closed_total,
//     titan_events_dropped_by_policy_total, titan_heap_over_watermark (0 or 1).
//   - titan_egress_headers_dropped_total (headers a connection's STOMP version could not
//     carry), titan_events_store_delivered_total.
//   - the events-store outbox pollers: titan_outbox_pollers, titan_outbox_max_interval_seconds
//     (the longest regulated poll interval), and the gauges titan_outbox_sheds and
//     titan_outbox_skipped_fetches summed over the live pollers (they fall when a poller ends).
//   - per request channel {group, destination, pattern}: titan_rpc_requests_total,
//     titan_rpc_responses_total, titan_rpc_timeouts_total, titan_rpc_no_responder_total,
//     titan_rpc_dropped_responses_total{reason="late"|"unknown"} and the histogram
//     titan_rpc_response_seconds.
func NewCollector(src Source) *Collector {
	d := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc(name, help, labels, nil)
	}
	q := func(name, help string) *prometheus.Desc {
		return prometheus.NewDesc(name, help, queueLabels, nil)
	}
	return &Collector{
		src:                src,
		buildInfo:          d(NameBuildInfo, "Titan build information; always 1.", "version"),
		startTime:          d(NameStartTime, "When the broker started, in Unix seconds."),
		connections:        d(NameConnections, "Client connections open now."),
		accepted:           d(NameConnectionsAccepted, "Client connections accepted since start."),
		closed:             d(NameConnectionsClosed, "Client connections closed, by close reason.", "reason"),
		queuedBytes:        d(NameQueuedBytes, "Bytes queued to connection writers and not yet written, over all connections."),
		routed:             d(NameRouterFrames, "Frames routed, by route.", "route"),
		routeErrors:        d(NameRouterErrors, "Frames that ended in an ERROR, by route.", "route"),
		published:          d(NamePublished, "Messages handed to the dispatch engine."),
		noSub:              d(NameEventsNoSubscriber, "Events messages that matched no subscription (direct mode)."),
		evDropped:          d(NameEventsDropped, "Events deliveries not made: a client-ack subscription at its prefetch, a closing connection, or slow-consumer-policy DROP."),
		dead:               d(NameDeadLettered, "Messages moved to a dead-letter queue."),
		expired:            d(NameExpired, "Messages that expired before delivery."),
		queues:             d(NameQueues, "Dispatcher queues that exist now."),
		groups:             d(NameQueueGroups, "Destination groups holding at least one queue."),
		dests:              d(NameDestinations, "Destinations that exist now: dispatcher queues plus events-store logs."),
		destsMax:           d(NameDestinationsMax, "The max-destinations limit (0: none)."),
		destRefused:        d(NameDestinationRefused, "Destination creations refused by the broker-wide or a per-connection limit."),
		destReclaimed:      d(NameDestinationsReclaim, "Idle, empty, traffic-created destinations removed."),
		groupsAll:          d(NameGroups, "Groups holding at least one destination (queue or events-store log)."),
		groupRefused:       d(NameGroupRefused, "Destination creations refused by max-groups."),
		dupIDs:             d(NameDuplicateIDs, "Duplicate ids remembered now (bounded by duplicate-detection cache-size)."),
		duplicates:         d(NameDuplicates, "SENDs recognised as duplicates: answered, not stored or delivered again."),
		storeState:         d(NameStoreState, "1 for the store's current state, 0 for the others.", "state"),
		storeChanges:       d(NameStoreStateChanges, "Store state changes since start."),
		storeRecoveries:    d(NameStoreRecoveries, "Store returns to ok from down since start."),
		walSyncs:           d(NameStoreWALSyncs, "Write-ahead-log fsyncs since start: group commits, and syncs of deletes and metadata."),
		groupCommits:       d(NameStoreGroupCommits, "Group commits that wrote records since start, one fsync each."),
		groupCommitSeconds: d(NameStoreGroupCommitSec, "Group commit times summed, from handing a group to the write-ahead log to its fsync's landing, in seconds."),
		recordsAppended:    d(NameStoreRecords, "Records appended through group commit since start."),
		recordsUnwritten:   d(NameStoreUnwritten, "Appended records deleted before their group was written (consumed and acknowledged first): no write, no delete."),
		qMessages:          q(NameQueueMessages, "Messages held by the queue (ready, delivering and scheduled)."),
		qBytes:             q(NameQueuePendingBytes, "Bytes held by the queue."),
		qCapacity:          q(NameQueueCapacity, "The queue's message-count limit (0: none)."),
		qMaxBytes:          q(NameQueueMaxPending, "The queue's max-pending-bytes limit (0: none)."),
		qRing:              q(NameQueueRingSize, "The queue's ring size (<= 0: not a ring queue)."),
		qDelivering:        q(NameQueueDelivering, "Messages delivered and awaiting acknowledgement."),
		qScheduled:         q(NameQueueScheduled, "Messages scheduled for later delivery."),
		qConsumers:         q(NameQueueConsumers, "Consumers attached to the queue."),
		qPaused:            q(NameQueuePaused, "1 when the queue is paused."),
		qEnqueued:          q(NameQueueEnqueued, "Messages enqueued."),
		qDispatched:        q(NameQueueDispatched, "Messages dispatched to consumers."),
		qAcked:             q(NameQueueAcked, "Messages acknowledged."),
		qDropped:           q(NameQueueDropped, "Messages dropped (DROP policy, or events drained with no subscriber)."),
		qRingRemoved:       q(NameQueueRingRemoved, "Messages removed from the head of a ring queue."),
		qExpired:           q(NameQueueExpired, "Messages that expired in the queue."),
		qDeadLettr:         q(NameQueueDeadLettered, "Messages dead-lettered from the queue."),

		egressDropped:     d(NameEgressDropped, "Headers left out of MESSAGE frames because the connection's STOMP version cannot represent them."),
		logDelivered:      d(NameLogDelivered, "Events-store messages delivered by outbox pollers."),
		outboxPollers:     d(NameOutboxPollers, "Events-store outbox pollers running now."),
		outboxMaxInterval: d(NameOutboxMaxInterval, "The longest current regulated outbox poll interval, in seconds."),
		outboxSheds:       d(NameOutboxSheds, "Deliveries shed by the outbound vessel, summed over live outbox pollers."),
		outboxSkipped:     d(NameOutboxSkipped, "Outbox fetches skipped while the outbound vessel was busy, summed over live pollers."),
		rpcRequests:       q(NameRPCRequests, "Requests (commands and queries) sent."),
		rpcResponses:      q(NameRPCResponses, "Responses delivered to requesters."),
		rpcTimeouts:       q(NameRPCTimeouts, "Requests that timed out without a response."),
		rpcNoResponder:    q(NameRPCNoResponder, "Requests refused because no responder was subscribed."),
		rpcDropped:        prometheus.NewDesc(NameRPCDropped, "Responses dropped: late (after the request timed out) or unknown (no pending request).", append(append([]string(nil), queueLabels...), "reason"), nil),
		rpcResponseTime:   q(NameRPCResponseTime, "Time from request to response, in seconds."),
		pauses:            d(NameProducerPauses, "Producer pauses: a producer stopped being read for a subscriber over its high watermark or for the heap."),
		resumes:           d(NameProducerResumes, "Producer resumes: ends of those pauses."),
		paused:            d(NameProducersPaused, "Producers paused now."),
		slow:              d(NameSlowConsumers, "Subscribers closed as slow consumers (ERROR message:slow consumer)."),
		policyDropped:     d(NameEventsDroppedPolicy, "Events deliveries dropped for a subscriber over its limit under slow-consumer-policy DROP."),
		heapOver:          d(NameHeapCongested, "1 while the heap is over its high watermark (every producer paused)."),
	}
}

func (c *Collector) descs() []*prometheus.Desc {
	return []*prometheus.Desc{
		c.buildInfo, c.startTime, c.connections, c.accepted, c.closed, c.queuedBytes,
		c.routed, c.routeErrors, c.published, c.noSub, c.evDropped, c.dead, c.expired,
		c.queues, c.groups, c.dests, c.destsMax, c.destRefused, c.destReclaimed,
		c.storeState, c.storeChanges, c.storeRecoveries,
		c.walSyncs, c.groupCommits, c.groupCommitSeconds, c.recordsAppended, c.recordsUnwritten, c.dupIDs, c.duplicates, c.groupsAll, c.groupRefused, c.qMessages, c.qBytes, c.qCapacity, c.qMaxBytes, c.qRing,
		c.qDelivering, c.qScheduled, c.qConsumers, c.qPaused, c.qEnqueued, c.qDispatched,
		c.qAcked, c.qDropped, c.qRingRemoved, c.qExpired, c.qDeadLettr,
		c.egressDropped, c.logDelivered, c.outboxPollers, c.outboxMaxInterval, c.outboxSheds,
		c.outboxSkipped, c.rpcRequests, c.rpcResponses, c.rpcTimeouts, c.rpcNoResponder,
		c.rpcDropped, c.rpcResponseTime,
		c.pauses, c.resumes, c.paused, c.slow, c.policyDropped, c.heapOver,
	}
}

// Describe implements prometheus.Collector.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range c.descs() {
		ch <- d
	}
}

// Collect implements prometheus.Collector: it reads the Source once and emits every series.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	counter := func(d *prometheus.Desc, v uint64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), labels...)
	}
	src := c.src
	gauge(c.buildInfo, 1, src.Version())
	if st := src.StartTime(); !st.IsZero() {
		gauge(c.startTime, float64(st.UnixNano())/1e9)
	}

	sessions := src.Sessions()
	var queued int64
	for _, s := range sessions {
		queued += s.QueuedBytes()
	}
	gauge(c.connections, float64(len(sessions)))
	gauge(c.queuedBytes, float64(queued))
	counter(c.accepted, src.ConnectionsAccepted())
	for _, r := range session.AllCloseReasons() {
		counter(c.closed, src.ConnectionsClosed(r), r.String())
	}

	if rt := src.Router(); rt != nil {
		for i := range len(rt.Routed) {
			name := router.Route(i).String()
			counter(c.routed, rt.Routed[i].Load(), name)
			counter(c.routeErrors, rt.Errors[i].Load(), name)
		}
	}

	e := src.Dispatcher()
	counter(c.published, e.Published.Load())
	counter(c.noSub, e.EventsNoSub.Load())
	counter(c.evDropped, e.EventsDropped.Load())
	fs, heapOver := new(flow.Stats), 0.0
	if f, ok := src.(FlowSource); ok {
		fs = f.FlowStats()
		if f.HeapCongested() {
			heapOver = 1
		}
	}
	counter(c.pauses, fs.Pauses.Load())
	counter(c.resumes, fs.Resumes.Load())
	gauge(c.paused, float64(fs.Paused.Load()))
	counter(c.slow, fs.SlowConsumers.Load())
	counter(c.policyDropped, fs.Dropped.Load())
	gauge(c.heapOver, heapOver)
	counter(c.dead, e.DeadLettered.Load())
	counter(c.expired, e.Expired.Load())
	counter(c.egressDropped, e.EgressHeadersDropped.Load())
	counter(c.logDelivered, e.LogDelivered.Load())
	gauge(c.dests, float64(e.Destinations()))
	gauge(c.destsMax, float64(e.MaxDestinations()))
	counter(c.destRefused, e.DestinationRefusals.Load())
	counter(c.destReclaimed, e.Reclaimed.Load())
	sh := src.StoreHealth()
	for _, st := range []store.State{store.StateOK, store.StateDegraded, store.StateDown} {
		v := 0.0
		if sh.State == st {
			v = 1
		}
		gauge(c.storeState, v, st.String())
	}
	gauge(c.groupsAll, float64(e.GroupCount()))
	counter(c.groupRefused, e.GroupRefusals.Load())
	remembered, dups := src.DuplicateIDs()
	gauge(c.dupIDs, float64(remembered))
	counter(c.duplicates, dups)
	counter(c.storeChanges, sh.Changes)
	counter(c.storeRecoveries, sh.Recoveries)
	if cs, ok := src.(CommitSource); ok {
		if gc, ok := cs.StoreGroupCommits(); ok {
			counter(c.walSyncs, gc.Syncs)
			counter(c.groupCommits, gc.Groups)
			ch <- prometheus.MustNewConstMetric(c.groupCommitSeconds, prometheus.CounterValue, gc.GroupTime.Seconds())
			counter(c.recordsAppended, gc.Records)
			counter(c.recordsUnwritten, gc.Unwritten)
		}
	}
	ob := src.Outbox()
	gauge(c.outboxPollers, float64(ob.Pollers))
	gauge(c.outboxMaxInterval, ob.MaxInterval.Seconds())
	gauge(c.outboxSheds, float64(ob.Sheds))
	gauge(c.outboxSkipped, float64(ob.Skipped))
	for _, st := range src.RPC() {
		l := []string{st.Group, rpcDestination(st), st.Pattern}
		counter(c.rpcRequests, st.Requests, l...)
		counter(c.rpcResponses, st.Responses, l...)
		counter(c.rpcTimeouts, st.Timeouts, l...)
		counter(c.rpcNoResponder, st.NoResponder, l...)
		counter(c.rpcDropped, st.Late, append(l, "late")...)
		counter(c.rpcDropped, st.Unknown, append(l[:3:3], "unknown")...)
		buckets := make(map[float64]uint64, len(st.Bounds))
		for i, b := range st.Bounds {
			if i < len(st.Buckets) {
				buckets[b] = st.Buckets[i]
			}
		}
		ch <- prometheus.MustNewConstHistogram(c.rpcResponseTime, st.Count, st.Sum, buckets, l...)
	}

	qs := e.Queues()
	groups := make(map[string]struct{})
	for _, q := range qs {
		st := q.Stats()
		groups[st.Group] = struct{}{}
		l := []string{st.Group, st.Destination, st.Pattern}
		gauge(c.qMessages, float64(st.Messages), l...)
		gauge(c.qBytes, float64(st.PendingBytes), l...)
		gauge(c.qCapacity, float64(st.Settings.Capacity), l...)
		gauge(c.qMaxBytes, float64(st.Settings.MaxPendingBytes), l...)
		gauge(c.qRing, float64(st.Settings.RingSize), l...)
		gauge(c.qDelivering, float64(st.Delivering), l...)
		gauge(c.qScheduled, float64(st.Scheduled), l...)
		gauge(c.qConsumers, float64(st.Consumers), l...)
		paused := 0.0
		if st.Paused {
			paused = 1
		}
		gauge(c.qPaused, paused, l...)
		counter(c.qEnqueued, st.Enqueued, l...)
		counter(c.qDispatched, st.Dispatched, l...)
		counter(c.qAcked, st.Acked, l...)
		counter(c.qDropped, st.Dropped, l...)
		counter(c.qRingRemoved, st.RingRemoved, l...)
		counter(c.qExpired, st.Expired, l...)
		counter(c.qDeadLettr, st.DeadLettered, l...)
	}
	gauge(c.queues, float64(len(qs)))
	gauge(c.groups, float64(len(groups)))
}

// rpcDestination renders an rpc.Stats channel as its canonical destination.
func rpcDestination(st rpc.Stats) string {
	p, ok := dest.ParsePattern(st.Pattern)
	if !ok {
		return st.Channel
	}
	return dest.Identity{Group: st.Group, Pattern: p, Channel: st.Channel}.Destination()
}

// NewRegistry returns a fresh registry holding a Collector over src, the Go runtime and
// process collectors, and any extra collectors (for example a DestinationStage). It panics,
// like prometheus.MustRegister, if two collectors export the same series.
func NewRegistry(src Source, extra ...prometheus.Collector) *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(
		NewCollector(src),
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	)
	for _, c := range extra {
		reg.MustRegister(c)
	}
	return reg
}

// Handler serves reg in the Prometheus text (or negotiated OpenMetrics) format. Collection
// errors are reported in the response rather than failing the whole scrape.
func Handler(reg *prometheus.Registry) http.Handler {
	return promhttp.HandlerFor(reg, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError})
}
