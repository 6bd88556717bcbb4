package admin

import (
	"context"
	"net/http"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/titan-broker/titan/internal/dest"
	"github.com/titan-broker/titan/internal/metrics"
)

// PathCluster answers GET with a ClusterStatus: the cluster's nodes, which node leads each
// stream, and each stream's replicas (current, lag, offline). In single-node mode the mode
// is "single" and the only node is this one.
const PathCluster = "/titan/monitor/cluster"

// Cluster modes of ClusterStatus.Mode.
const (
	// ClusterModeSingle is single-node Titan (no titan.cluster section).
	ClusterModeSingle = "single"
	// ClusterModeEmbedded is cluster mode with an embedded, clustered nats-server.
	ClusterModeEmbedded = "embedded"
	// ClusterModeExternal is cluster mode on a NATS cluster run by its operators.
	ClusterModeExternal = "external"
)

// ClusterSource is the port the admin API reads cluster mode's state through (implemented
// by internal/broker over internal/cluster). Nil in single-node mode. ClusterStatus must be
// safe for concurrent use and bounded in time; it returns an error only when the cluster
// cannot be read at all (no JetStream meta leader).
type ClusterSource interface {
	ClusterStatus(ctx context.Context) (*ClusterStatus, error)
}

// ClusterCounters is implemented by a ClusterSource that sums the message counters of
// every node (cluster mode), declared here by its consumer: the snapshot's (and the
// console's) dead-letter count is then the cluster's, not this node's.
type ClusterCounters interface {
	// ClusterDeadLettered returns the messages moved to a dead-letter queue by every node
	// that answered, since each started. Errors: the request's.
	ClusterDeadLettered(ctx context.Context) (uint64, error)
}

// ClusterStatus is the answer of GET /titan/monitor/cluster. Stream and queue figures come
// from each stream's (consumer's) leader, so every node answers the same.
type ClusterStatus struct {
	// Mode is "single", "embedded" or "external".
	Mode string `json:"mode"`
	// Cluster is the cluster's name ("" in single-node mode).
	Cluster string `json:"cluster,omitempty"`
	// Node is the name of the node that answered.
	Node string `json:"node"`
	// MetaLeader names the JetStream meta leader ("" while none is elected).
	MetaLeader string `json:"metaLeader,omitempty"`
	// Nodes are the cluster's nodes sorted by name. Never nil.
	Nodes []ClusterNode `json:"nodes"`
	// Streams are Titan's JetStream streams sorted by name. Never nil.
	Streams []ClusterStream `json:"streams"`
	// Errors name the parts that could not be read (a stream without a leader during an
	// election, for example); everything else is still reported.
	Errors []string `json:"errors,omitempty"`
	// Queues are the queues as JetStream sees them (served through GET
	// /titan/monitor/queues, not here).
	Queues []ClusterQueue `json:"-"`
	// Size is the number of nodes in the JetStream meta group and Quorum how many must be
	// up for it to work (Size/2+1); 0 with an external NATS.
	Size   int `json:"size,omitempty"`
	Quorum int `json:"quorum,omitempty"`
	// Routes are the route URLs a node joining the cluster lists (`titan cluster add`):
	// the answering node's routes and its own route address.
	Routes []string `json:"routes,omitempty"`
}

// ClusterNode is one node of the cluster.
type ClusterNode struct {
	// Name is the node's name (titan.cluster.node-name); "unknown peer <peer>" for a
	// member no node that is up can name.
	Name string `json:"name"`
	// Peer is its JetStream Raft peer id (`titan cluster remove` takes it too).
	Peer string `json:"peer,omitempty"`
	// Up is true when the answering node is connected to it (or it is that node), and
	// false for a node that cannot write its JetStream store (a full or read-only disk).
	Up bool `json:"up"`
	// Cause is why the answering node itself is down ("no space left on device"); empty
	// otherwise.
	Cause string `json:"cause,omitempty"`
	// Self is true for the node that answered.
	Self bool `json:"self,omitempty"`
	// MetaLeader is true for the JetStream meta leader.
	MetaLeader bool `json:"metaLeader,omitempty"`
	// Leads are the streams it leads. Never nil.
	Leads []string `json:"leads"`
}

// ClusterReplica is one replica of a stream (or a queue's consumer) as its leader reports
// it.
type ClusterReplica struct {
	// Name is the replica's node.
	Name string `json:"name"`
	// Current is true when it was seen recently and is caught up.
	Current bool `json:"current"`
	// Offline is true when it was not seen recently.
	Offline bool `json:"offline,omitempty"`
	// Lag is how many Raft operations it is behind the leader.
	Lag uint64 `json:"lag"`
	// ActiveMs is the time since the leader last heard from it, in milliseconds.
	ActiveMs int64 `json:"activeMs"`
}

// ClusterStream is one of Titan's JetStream streams: a group's queues (TITAN_<group>_Q)
// or events-store logs (TITAN_<group>_ES).
type ClusterStream struct {
	// Name is the stream's name.
	Name string `json:"name"`
	// Group is the destination group it holds.
	Group string `json:"group"`
	// Kind is "queues" or "events-store".
	Kind string `json:"kind"`
	// Leader names the node leading it ("" during an election).
	Leader string `json:"leader"`
	// Replicas are its other replicas. Never nil.
	Replicas []ClusterReplica `json:"replicas"`
	// Messages and Bytes are what it stores.
	Messages uint64 `json:"messages"`
	Bytes    uint64 `json:"bytes"`
	// LastSeq is the sequence of its last message (the stream's total traffic).
	LastSeq uint64 `json:"lastSeq"`
	// Consumers counts its JetStream consumers.
	Consumers int `json:"consumers"`
}

// ClusterQueue is one queue as JetStream sees it: its durable consumer.
type ClusterQueue struct {
	// Identity is the queue's (group, destination).
	Identity dest.Identity
	// Stream is the stream holding it.
	Stream string
	// Stored counts the messages the stream holds for it (ready and delivering).
	Stored uint64
	// Bytes is its share of the bytes its stream stores (exact when it holds every message
	// of its stream, else in proportion to its messages: JetStream counts bytes per stream).
	Bytes uint64
	// Pending counts messages stored and not yet delivered.
	Pending uint64
	// Delivering counts messages delivered and not yet acknowledged.
	Delivering int
	// Waiting counts waiting pull requests (nodes whose subscribers have credit).
	Waiting int
	// Delivered counts deliveries.
	Delivered uint64
	// Paused is true while the queue's deliveries are paused cluster-wide.
	Paused bool
	// Leader names the node leading the consumer.
	Leader string
	// Replicas are the consumer's other replicas.
	Replicas []ClusterReplica
}

// Cluster returns the cluster's state: in cluster mode as the ClusterSource reads it
// (Errors: CodeInternal, 500, when the cluster cannot be read at all); in single-node mode
// {mode: single} with this node alone.
func (a *Admin) Cluster(ctx context.Context) (*ClusterStatus, error) {
	if a.opts.Cluster == nil {
		return &ClusterStatus{Mode: ClusterModeSingle, Node: a.node(),
			Nodes:   []ClusterNode{{Name: a.node(), Up: true, Self: true, Leads: []string{}}},
			Streams: []ClusterStream{}}, nil
	}
	st, err := a.opts.Cluster.ClusterStatus(ctx)
	if err != nil {
		return nil, newError(CodeInternal, "cluster state unavailable: "+err.Error(), err)
	}
	if st.Nodes == nil {
		st.Nodes = []ClusterNode{}
	}
	if st.Streams == nil {
		st.Streams = []ClusterStream{}
	}
	for i := range st.Nodes {
		st.Nodes[i].Self = st.Nodes[i].Name == st.Node
		if st.Nodes[i].Leads == nil {
			st.Nodes[i].Leads = []string{}
		}
	}
	for i := range st.Streams {
		if st.Streams[i].Replicas == nil {
			st.Streams[i].Replicas = []ClusterReplica{}
		}
	}
	return st, nil
}

func (a *Admin) serveCluster(w http.ResponseWriter, r *http.Request) {
	st, err := a.Cluster(r.Context())
	a.respond(w, r, http.StatusOK, st, err)
}

// clusterQueues appends to out the queues JetStream holds (cluster mode) that o selects.
// They replace this node's dispatcher entries of queues-pattern queues (local shells). A
// cluster that cannot be read adds nothing: the list then shows this node's state only.
func (a *Admin) clusterQueues(o QueuesOptions, want dest.Identity, out *QueueList) {
	if a.opts.Cluster == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st, err := a.opts.Cluster.ClusterStatus(ctx)
	if err != nil {
		a.log.Warn("cluster queues unavailable", "err", err)
		return
	}
	// Queues-pattern queues live in JetStream: this node's dispatcher entries for them are
	// local shells (no messages, no state an operator acts on), so the cluster's view
	// replaces them. Other entries (events dispatcher queues) stay.
	kept := out.Queues[:0]
	for _, q := range out.Queues {
		if q.Pattern != dest.PatternQueues.String() {
			kept = append(kept, q)
		}
	}
	out.Queues = kept
	var match []string
	if o.Match != "" {
		if d, err := dest.ParseFilter(strings.Replace(o.Match, "/queue/", "/topic/", 1), dest.PatternEvents); err == nil {
			match = strings.Split(d.Channel, ".")
		}
	}
	g := o.Group
	if g == "" && o.Match != "" {
		g = dest.DefaultGroup
	}
	for _, cq := range st.Queues {
		id := cq.Identity
		switch {
		case g != "" && id.Group != g,
			o.Destination != "" && (id.Channel != want.Channel || id.Bare != want.Bare || want.Pattern != dest.PatternQueues),
			match != nil && !matchChannel(match, strings.Split(id.Channel, ".")):
			continue
		}
		s := a.settingsOf(id)
		qi := QueueInfo{Group: id.Group, Destination: id.Destination(), Pattern: dest.PatternQueues.String(),
			Size: int(cq.Stored), PendingBytes: int64(cq.Bytes), Consumers: cq.Waiting, Delivering: cq.Delivering, Paused: cq.Paused,
			Dispatched: cq.Delivered, Leader: cq.Leader, Replicas: cq.Replicas, Settings: s}
		if qi.Replicas == nil {
			qi.Replicas = []ClusterReplica{}
		}
		out.Queues = append(out.Queues, qi)
	}
}

// settingsOf is id's effective settings when the dispatcher can say (its address
// settings), else the zero settings.
func (a *Admin) settingsOf(id dest.Identity) QueueSettings {
	d := a.src.Dispatcher()
	if d == nil {
		return QueueSettings{}
	}
	s := d.Settings(id)
	return QueueSettings{
		Capacity: s.Capacity, MaxPendingBytes: s.MaxPendingBytes, AddressFullPolicy: s.FullPolicy.String(),
		BlockTimeoutMs: s.BlockTimeoutInForce().Milliseconds(), RingSize: s.RingSize, MaxDeliveries: s.MaxDeliveries,
		DeadLetter: s.DeadLetter, RedeliveryDelayMs: s.RedeliveryDelay.Milliseconds(), Match: s.Match,
	}
}

// matchChannel reports whether channel segments ch match filter segments f (`*` one
// segment, `>` one or more trailing segments).
func matchChannel(f, ch []string) bool {
	for i, s := range f {
		if s == ">" {
			return len(ch) > i
		}
		if i >= len(ch) || (s != "*" && s != ch[i]) {
			return false
		}
	}
	return len(f) == len(ch)
}

// registry is the Prometheus registry of /metrics: in cluster mode every series carries
// the const label node=<this node's name>, so one scrape config covers every node.
func (a *Admin) registry() *prometheus.Registry {
	if a.opts.Cluster != nil {
		return metrics.NewNodeRegistry(a.node(), a.src, a.opts.Collectors...)
	}
	return metrics.NewRegistry(a.src, a.opts.Collectors...)
}
