package admin

import (
	"context"
	"github.com/titan-broker/titan/internal/store"
	"runtime"
	"runtime/metrics"
	"sort"
	"time"

	"github.com/titan-broker/titan/internal/session"
)

// Health is the answer of GET /titan/monitor/health (HTTP 503 when Status is DOWN).
type Health struct {
	// Status is "UP", "DEGRADED" (the store's background work fails; writes still commit)
	// or "DOWN" (the store refuses writes: durable SENDs are refused with the reason).
	Status string `json:"status"`
	// Version is the broker version.
	Version string `json:"version"`
	// Store is the store's condition.
	Store StoreHealth `json:"store"`
}

// StoreHealth is the store part of Health (from store.Health).
type StoreHealth struct {
	// Status is "ok", "degraded" or "down".
	Status string `json:"status"`
	// Cause is the short reason ("no space left on device"); empty when ok.
	Cause string `json:"cause,omitempty"`
	// Since is when the store entered Status.
	Since time.Time `json:"since"`
	// Changes counts state changes since start; Recoveries the returns to ok from down.
	Changes    uint64 `json:"changes"`
	Recoveries uint64 `json:"recoveries"`
}

// Health reports the broker's and its store's condition. It never fails.
func (a *Admin) Health() (*Health, error) {
	sh := a.src.StoreHealth()
	h := &Health{Status: "UP", Version: a.src.Version(), Store: StoreHealth{
		Status: sh.State.String(), Cause: store.Reason(sh.Cause), Since: sh.Since,
		Changes: sh.Changes, Recoveries: sh.Recoveries,
	}}
	switch sh.State {
	case store.StateDegraded:
		h.Status = "DEGRADED"
	case store.StateDown:
		h.Status = "DOWN"
	}
	return h, nil
}

// ServerInfo identifies the broker and how long it has run.
type ServerInfo struct {
	// Version is the broker version ("0.1.0").
	Version string `json:"version"`
	// StartTime is when the broker started.
	StartTime time.Time `json:"startTime"`
	// Now is when the snapshot was taken.
	Now time.Time `json:"now"`
	// Uptime is Now - StartTime as a Go duration string rounded to the second ("1h2m3s").
	Uptime string `json:"uptime"`
	// UptimeSeconds is the same in seconds.
	UptimeSeconds float64 `json:"uptimeSeconds"`
}

// RuntimeInfo is the Go runtime's view of the process (read with runtime/metrics, which does
// not stop the world).
type RuntimeInfo struct {
	// GoVersion is the Go release the broker was built with.
	GoVersion string `json:"goVersion"`
	// Goroutines counts live goroutines.
	Goroutines uint64 `json:"goroutines"`
	// GOMAXPROCS is the number of OS threads running Go code at once.
	GOMAXPROCS int `json:"gomaxprocs"`
	// HeapBytes is the bytes occupied by live and not-yet-swept heap objects.
	HeapBytes uint64 `json:"heapBytes"`
	// HeapGoalBytes is the heap size the GC aims for in this cycle.
	HeapGoalBytes uint64 `json:"heapGoalBytes"`
	// TotalBytes is all memory mapped by the Go runtime (close to RSS).
	TotalBytes uint64 `json:"totalBytes"`
	// GCCycles counts completed GC cycles.
	GCCycles uint64 `json:"gcCycles"`
}

var runtimeSamples = []string{
	"/sched/goroutines:goroutines",
	"/memory/classes/heap/objects:bytes",
	"/gc/heap/goal:bytes",
	"/memory/classes/total:bytes",
	"/gc/cycles/total:gc-cycles",
}

func readRuntime() RuntimeInfo {
	s := make([]metrics.Sample, len(runtimeSamples))
	for i, n := range runtimeSamples {
		s[i].Name = n
	}
	metrics.Read(s)
	u := func(i int) uint64 {
		if s[i].Value.Kind() == metrics.KindUint64 {
			return s[i].Value.Uint64()
		}
		return 0
	}
	return RuntimeInfo{
		GoVersion: runtime.Version(), Goroutines: u(0), GOMAXPROCS: runtime.GOMAXPROCS(0),
		HeapBytes: u(1), HeapGoalBytes: u(2), TotalBytes: u(3), GCCycles: u(4),
	}
}

// ConnectionInfo is one client connection.
type ConnectionInfo struct {
	// ID is the session id sent in CONNECTED.
	ID string `json:"id"`
	// RemoteAddr is the peer's host:port.
	RemoteAddr string `json:"remoteAddr"`
	// Version is the negotiated STOMP version ("1.2" until negotiation ends).
	Version string `json:"version"`
	// ConnectedAt is when the connection was accepted.
	ConnectedAt time.Time `json:"connectedAt"`
	// QueuedBytes is the connection's write buffer: bytes queued to its writer and not yet
	// written to the socket.
	QueuedBytes int64 `json:"queuedBytes"`
}

// Counters are the broker-wide totals since start.
type Counters struct {
	// ConnectionsAccepted counts connections accepted since start.
	ConnectionsAccepted uint64 `json:"connectionsAccepted"`
	// ConnectionsClosed counts closed connections by close reason (every reason present).
	ConnectionsClosed map[string]uint64 `json:"connectionsClosed"`
	// Published counts messages handed to a pattern for publication.
	Published uint64 `json:"published"`
	// EventsNoSubscriber counts events messages that matched no subscription (direct mode).
	EventsNoSubscriber uint64 `json:"eventsNoSubscriber"`
	// EventsDropped counts events deliveries dropped for a full subscriber.
	EventsDropped uint64 `json:"eventsDropped"`
	// DeadLettered counts messages moved to a dead-letter queue (in cluster mode by every
	// node that answered, since each started).
	DeadLettered uint64 `json:"deadLettered"`
	// Expired counts messages that expired before delivery.
	Expired uint64 `json:"expired"`
	// EgressHeadersDropped counts headers left out of MESSAGE frames because the
	// connection's STOMP version cannot represent them.
	EgressHeadersDropped uint64 `json:"egressHeadersDropped"`
	// EventsStoreDelivered counts events-store messages delivered by outbox pollers.
	EventsStoreDelivered uint64 `json:"eventsStoreDelivered"`
}

// Snapshot is the answer of GET /titan/monitor/snapshot: everything the dashboard and the
// console show, in one point-in-time read (per queue; not atomic across queues).
type Snapshot struct {
	// Server identifies the broker and its uptime.
	Server ServerInfo `json:"server"`
	// Runtime is the Go runtime's memory and goroutines.
	Runtime RuntimeInfo `json:"runtime"`
	// Connections are sorted by connection time, oldest first. Never nil.
	Connections []ConnectionInfo `json:"connections"`
	// Queues are sorted by group, then destination. Never nil.
	Queues []QueueInfo `json:"queues"`
	// Summary counts the queues and the groups holding them ("N queues in M groups").
	Summary Summary `json:"summary"`
	// Counters are the broker-wide totals since start.
	Counters Counters `json:"counters"`
}

// SnapshotOptions select what Snapshot reads; the zero value takes everything.
type SnapshotOptions struct {
	// OmitQueues leaves Queues empty (Summary still counts them): what the console asks
	// for (GET PathSnapshot?queues=false), which pages through PathQueues instead.
	OmitQueues bool

	// keep, set by the HTTP handler, keeps the queues the request's user may see.
	keep func(group, destination, pattern string) bool
}

// Snapshot reads the whole broker state. It does not fail today; the error is kept for
// symmetry with the other methods.
func (a *Admin) Snapshot(o SnapshotOptions) (*Snapshot, error) {
	src := a.src
	now := time.Now()
	start := src.StartTime()
	up := now.Sub(start)
	if start.IsZero() || up < 0 {
		up = 0
	}
	snap := &Snapshot{
		Server: ServerInfo{
			Version: src.Version(), StartTime: start, Now: now,
			Uptime: up.Round(time.Second).String(), UptimeSeconds: up.Seconds(),
		},
		Runtime:     readRuntime(),
		Connections: []ConnectionInfo{},
	}
	for _, s := range src.Sessions() {
		snap.Connections = append(snap.Connections, ConnectionInfo{
			ID: s.ID(), RemoteAddr: s.RemoteAddr(), Version: s.Version().String(),
			ConnectedAt: s.Created(), QueuedBytes: s.QueuedBytes(),
		})
	}
	sort.Slice(snap.Connections, func(i, j int) bool {
		ci, cj := snap.Connections[i], snap.Connections[j]
		if !ci.ConnectedAt.Equal(cj.ConnectedAt) {
			return ci.ConnectedAt.Before(cj.ConnectedAt)
		}
		return ci.ID < cj.ID
	})
	ql, _ := a.Queues(QueuesOptions{keep: o.keep, countOnly: o.OmitQueues})
	snap.Queues, snap.Summary = ql.Queues, ql.Summary
	e := src.Dispatcher()
	snap.Counters = Counters{
		ConnectionsAccepted:  src.ConnectionsAccepted(),
		ConnectionsClosed:    map[string]uint64{},
		Published:            e.Published.Load(),
		EventsNoSubscriber:   e.EventsNoSub.Load(),
		EventsDropped:        e.EventsDropped.Load(),
		DeadLettered:         e.DeadLettered.Load(),
		Expired:              e.Expired.Load(),
		EgressHeadersDropped: e.EgressHeadersDropped.Load(),
		EventsStoreDelivered: e.LogDelivered.Load(),
	}
	if cc, ok := a.opts.Cluster.(ClusterCounters); ok {
		ctx, cancel := context.WithTimeout(context.Background(), clusterCountersTimeout)
		if n, err := cc.ClusterDeadLettered(ctx); err == nil {
			snap.Counters.DeadLettered = n // every node's (issue 27)
		}
		cancel()
	}
	for _, r := range session.AllCloseReasons() {
		snap.Counters.ConnectionsClosed[r.String()] = src.ConnectionsClosed(r)
	}
	return snap, nil
}

// clusterCountersTimeout bounds gathering the cluster's counters for one snapshot.
const clusterCountersTimeout = time.Second
