// Package metrics exposes Titan's state in the Prometheus text format.
//
// # Scrape-time collection
//
// Nothing here runs on the message path by default. Collector is a custom
// prometheus.Collector: at each scrape it reads the dispatcher's queue stats, the
// broker's connection counters and the router's per-route counters, which the broker keeps as
// atomics anyway, and turns them into const metrics. A scrape therefore costs one pass over
// the queues (each queue's lock is taken briefly by its Stats method) and allocates in
// proportion to the number of queues; publishing costs nothing extra.
//
// The one opt-in exception is DestinationStage, a router stage for SEND routes that counts
// messages and bytes per (group, destination) including events destinations that never get a
// dispatcher queue (events without fanout-mode). It is the "custom stage between route and
// fan-out" that reference 000 describes, shipped as a real one.
//
// # Series
//
// Queue series carry the labels group, destination (canonical, e.g. "/queue/orders" or a
// bare "/orders") and pattern ("events", "queues"). A queue's counters restart at zero when
// the queue is deleted and created again; Prometheus' rate() treats that as a counter reset.
// See NewCollector for the full list of metric names.
//
// # Concurrency
//
// Everything exported is safe for concurrent use. Several brokers in one process each get
// their own registry (NewRegistry); nothing registers with the global default registry.
package metrics
