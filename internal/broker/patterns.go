package broker

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/titan-broker/titan/internal/clock"
	"github.com/titan-broker/titan/internal/cluster"
	"github.com/titan-broker/titan/internal/cluster/durables"
	clusterevents "github.com/titan-broker/titan/internal/cluster/events"
	"github.com/titan-broker/titan/internal/cluster/logs"
	clusterqueues "github.com/titan-broker/titan/internal/cluster/queues"
	"github.com/titan-broker/titan/internal/cluster/requests"
	"github.com/titan-broker/titan/internal/cluster/status"
	"github.com/titan-broker/titan/internal/config"
	"github.com/titan-broker/titan/internal/delivery"
	"github.com/titan-broker/titan/internal/dest"
	"github.com/titan-broker/titan/internal/dispatch"
	"github.com/titan-broker/titan/internal/event"
	"github.com/titan-broker/titan/internal/eventlog"
	"github.com/titan-broker/titan/internal/message"
	"github.com/titan-broker/titan/internal/pointqueue"
	"github.com/titan-broker/titan/internal/router"
	"github.com/titan-broker/titan/internal/rpc"
	"github.com/titan-broker/titan/internal/topicsub"
)

// patterns are the adapters behind the router's ports, wired once by New: the shared
// Dispatcher and delivery bookkeeping, and one package per pattern. Each pattern owns the
// timers and goroutines it starts; close stops them all (see Shutdown).
type patterns struct {
	dispatcher *dispatch.Dispatcher
	deliveries *delivery.Registry
	events     *event.Pattern
	queues     *pointqueue.Pattern
	log        *eventlog.Pattern
	requests   *rpc.Pattern
	// topics are the durable topic subscriptions (single node only; nil in cluster mode).
	topics *topicsub.Registry
	// rpcOptions configured requests; cluster mode builds its request/response on them.
	rpcOptions rpc.Options
	// eventOptions configured events; cluster mode applies the same slow-consumer rules.
	eventOptions event.Options
	// cluster is set in cluster mode: the NATS JetStream node and its adapters, which
	// replace events and queues behind the router's ports (issue 15).
	cluster *clusterPatterns
}

// clusterPatterns are the cluster-mode adapters.
type clusterPatterns struct {
	node     *cluster.Node
	events   *clusterevents.Pattern
	queues   *clusterqueues.Pattern
	store    *logs.Pattern
	requests *requests.Pattern
	durables *durables.Registry // nil with an external NATS
	counters *nats.Subscription // answers status.CountersSubject
}

// durableStartTimeout bounds loading the durable topic subscriptions at start.
const durableStartTimeout = 30 * time.Second

// durableQueues is the cluster queues pattern as the durable registry's Queues port.
type durableQueues struct{ q *clusterqueues.Pattern }

func (d durableQueues) CreateQueue(ctx context.Context, id dest.Identity) (bool, error) {
	return d.q.CreateQueue(ctx, id)
}

// DropQueue deletes id's queue and its messages; a queue that does not exist is no error.
func (d durableQueues) DropQueue(ctx context.Context, id dest.Identity) error {
	if _, err := d.q.DeleteQueue(ctx, id, true); err != nil && !errors.Is(err, clusterqueues.ErrNoQueue) {
		return err
	}
	return nil
}

// wireCluster puts the cluster adapters behind the router's ports. Request/response
// replaces p.requests (so its counters are the ones reported); temp-queues stay on this
// node's queues pattern, reached from other nodes through requests.Pattern.
func (p *patterns) wireCluster(n *cluster.Node, settings cluster.Settings, maxDurable int, log *slog.Logger, ports *router.Ports) error {
	reqs, err := requests.New(n, p.rpcOptions, log.With("component", "cluster-rpc"))
	if err != nil {
		return err
	}
	eo := p.eventOptions // the single node's slow-consumer rules; its drop accounting is shared
	ceo := clusterevents.Options{DropPolicy: eo.DropPolicy, SlowConsumerTimeout: eo.SlowConsumerTimeout,
		MaxBufferBytes: eo.MaxBufferBytes, Drops: p.events.Drops()}
	c := &clusterPatterns{node: n, events: clusterevents.New(n, ceo), queues: clusterqueues.New(n, settings, log.With("component", "cluster-queues")),
		store: logs.New(n, log.With("component", "cluster-events-store")), requests: reqs}
	p.cluster = c
	p.requests = reqs.Pattern
	ports.Events, ports.Queues, ports.EventsStore = c.events, c.queues, c.store
	ports.Requests = reqs
	// Durable topic subscriptions: cluster queues fed by every node's topic SENDs, their
	// registry a JetStream bucket every node applies (cluster/durables). It needs the live
	// node count to confirm a change cluster-wide: embedded mode only; with an external NATS
	// they are refused (README).
	ports.DurableTopics, p.topics = nil, nil
	// Events-store durable subscriptions: listed, deleted, bounded and expired cluster-wide
	// (cluster/logs durables.go); both kinds count against one limit.
	lo := logs.DurableOptions{Max: maxDurable, Others: func() int {
		if c.durables != nil {
			return c.durables.Count()
		}
		return 0
	}}
	var peers func() int
	if n.Embedded() {
		peers = func() int { return len(n.Server().ActivePeers()) }
		lo.Peers, lo.Leader = peers, n.Server().JetStreamIsLeader
	}
	if err := c.store.ManageDurables(n.Conn(), n.Name(), lo); err != nil {
		return err
	}
	// A cluster queue's dead-letters count in titan_messages_dead_lettered_total with the
	// dispatcher's (durable topic subscriptions, local queues), and every node answers for
	// that count, so the console's is the cluster's.
	dispatcher := p.dispatcher
	c.queues.OnDeadLetter = func() { dispatcher.DeadLettered.Add(1) }
	if c.counters, err = status.ServeCounters(n.Conn(), n.Name(), func() status.Counters {
		return status.Counters{DeadLettered: dispatcher.DeadLettered.Load()}
	}); err != nil {
		return err
	}
	if n.Embedded() {
		ctx, cancel := context.WithTimeout(context.Background(), durableStartTimeout)
		reg, err := durables.Start(ctx, n, durableQueues{c.queues}, durables.Options{Max: maxDurable,
			Others: func() int {
				ctx, cancel := context.WithTimeout(context.Background(), clusterDepthTimeout)
				defer cancel()
				k, _ := c.store.DurableCount(ctx)
				return k
			},
			Peers: peers, Logger: log.With("component", "cluster-durables")})
		cancel()
		if err != nil {
			return err
		}
		c.durables, ports.DurableTopics = reg, reg
	}
	// Queues live in JetStream: /amq/queue/ creates on first use, as /queue/ (README).
	ports.ExistingQueues = nil
	ports.TempQueues = tempQueues{Publisher: reqs.Temp(), Subscriber: reqs.TempSubscriber(p.queues)}
	if ports.Destinations != nil {
		ports.Destinations = reqs.TempDestinations(ports.Destinations)
	}
	return nil
}

// spawner adapts the broker's tracked goroutines to the patterns' Spawner ports.
type spawner struct{ b *Broker }

func (s spawner) Go(name string, fn func()) bool { return s.b.goroutine(name, fn) }

// tempQueues is the temp-queue port of the router: publishing checks the owner (rpc),
// subscribing consumes like a queue (pointqueue).
type tempQueues struct {
	router.Publisher
	router.Subscriber
}

// HonoursSelectors implements router.Selecting for the queues pattern it subscribes on.
func (t tempQueues) HonoursSelectors() bool { return router.HonoursSelectors(t.Subscriber) }

// replies sends the request/response pattern's own answers through the router's publish
// ports, resolved by the reply destination's route.
type replies struct{ r **router.Router }

func (p replies) Publish(id dest.Identity, m *message.Message, cancel <-chan struct{}) (bool, error) {
	return (*p.r).Deliver(id, m, cancel)
}

func (b *Broker) wire(fanout bool, settings dispatch.SettingsSource, clk clock.Clock, log *slog.Logger) (*patterns, router.Ports) {
	maxDest := b.cfg.Limits.MaxDestinations
	if maxDest < 0 {
		maxDest = 0
	}
	d := dispatch.New(dispatch.Options{Settings: settings, Store: b.durable, Clock: clk, MaxDestinations: maxDest, MaxGroups: max(b.cfg.Limits.MaxGroups, 0), Forget: b.durable})
	d.RegisterLog(dest.PatternEventsStore)
	p := &patterns{dispatcher: d, deliveries: &delivery.Registry{EgressDropped: &d.EgressHeadersDropped}}
	sp := spawner{b}
	eo := event.Options{FanoutMode: fanout, Spawner: sp, Flow: &b.flow, Logger: log.With("component", "events"),
		SlowConsumerTimeout: b.cfg.FlowControl.Subscriber.SlowConsumerTimeoutDuration(),
		MaxBufferBytes:      b.cfg.FlowControl.Subscriber.MaxBufferBytes}
	if r, ok := settings.(*config.Resolver); ok && r.HasDropPolicy() {
		eo.DropPolicy = r
	}
	p.events = event.New(d, eo)
	p.eventOptions = eo
	p.queues = pointqueue.New(d, pointqueue.Options{Clock: clk, Retirer: b.durable, Persister: b.durable, Logger: log.With("component", "queues")})
	p.topics = topicsub.New(topicsub.Options{Dispatcher: d, Meta: b.store, Max: b.maxDurableSubscriptions(), Others: func() int {
		n, _ := p.log.DurableCount()
		return n
	}})
	p.log = eventlog.New(d, eventlog.Options{Store: b.durable, Spawner: sp, Logger: log.With("component", "events-store"), MaxDurableSubscriptions: b.maxDurableSubscriptions(),
		OtherDurables: p.topics.Count})
	p.rpcOptions = rpc.Options{Replies: replies{&b.router}, TempQueues: p.queues, Clock: clk, Logger: log.With("component", "rpc"),
		MaxPending: max(b.cfg.Limits.MaxPendingRequests, 0), MaxPendingByClient: max(b.cfg.Limits.MaxPendingRequestsByClient, 0),
		MessageID: func() string { return message.NewID(b.idPrefix) }}
	p.requests = rpc.New(p.rpcOptions)
	ports := router.Ports{
		Deliveries:    p.deliveries,
		Events:        p.events,
		Queues:        p.queues,
		EventsStore:   p.log,
		Requests:      p.requests,
		TempQueues:    tempQueues{Publisher: p.requests.Temp(), Subscriber: p.queues},
		Destinations:  d,
		DurableTopics: p.topics,
		// RabbitMQ's /amq/queue/<name> addresses an existing queue (issue 26).
		ExistingQueues: d,
	}
	if b.heap != nil && b.heap.High > 0 { // heap watermarks: every publication may pause
		ports.Events = heapGated{ports.Events, b}
		ports.Queues = heapGated{ports.Queues, b}
		ports.EventsStore = heapGated{ports.EventsStore, b}
		ports.TempQueues = tempQueues{Publisher: heapGatedPublisher{p.requests.Temp(), b}, Subscriber: p.queues}
		ports.Requests = heapGatedRequests{p.requests, b}
	}
	return p, ports
}

// close stops everything the patterns started that could touch the store: request
// timeouts, queue timers (scheduled messages, redelivery delays) and events-store pollers
// (waited for). Producers waiting for room give up. Idempotent.
func (p *patterns) close() {
	p.dispatcher.Close()
	p.requests.Close()
	p.queues.Close()
	p.log.Close()
	if c := p.cluster; c != nil {
		if c.durables != nil {
			c.durables.Stop()
		}
		if c.counters != nil {
			_ = c.counters.Unsubscribe()
		}
		c.queues.Close()
		c.store.Close()
		c.node.Close()
	}
}
