// Package status is the cluster as one node sees it (the monitor API's cluster view,
// `titan cluster`) and the cluster gauges on /metrics.
package status

import (
	"context"
	"errors"
	"math/bits"
	"net"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/titan-broker/titan/internal/cluster"
	"github.com/titan-broker/titan/internal/dest"
)

// Modes of Status.Mode.
const (
	// ModeEmbedded: this node embeds a clustered nats-server.
	ModeEmbedded = "embedded"
	// ModeExternal: this node is a client of a NATS cluster its operators run.
	ModeExternal = "external"
)

// StatusTimeout bounds one Status call (every JetStream API request it makes); it stays
// below the CLI's default 5 s request timeout, so `titan cluster` gets the nodes even when
// JetStream cannot answer.
const StatusTimeout = 4 * time.Second

// Status is the cluster as this node sees it: the nodes, the JetStream meta leader, every
// Titan stream with its leader and replicas, and every queue as JetStream sees it. Stream
// and consumer information is answered by each stream's (consumer's) leader, so it is the
// same whichever node is asked.
type Status struct {
	// Mode is ModeEmbedded or ModeExternal.
	Mode string
	// Cluster is the NATS cluster name.
	Cluster string
	// Node is this node's name.
	Node string
	// MetaLeader names the JetStream meta leader ("" while none is elected).
	MetaLeader string
	// Nodes are the cluster's nodes sorted by name: in embedded mode the JetStream meta
	// group's peers; with an external NATS every server named as a stream replica.
	Nodes []NodeStatus
	// Streams are Titan's streams (TITAN_*) sorted by name.
	Streams []StreamStatus
	// Queues are the queues' durable consumers sorted by group, then destination.
	Queues []QueueStatus
	// RaftGroups is the number of Raft groups this node takes part in (the meta group, and
	// one per stream replica and per replicated consumer replica it hosts); 0 with an
	// external NATS, whose servers Titan cannot see into.
	RaftGroups int
	// Errors are the parts that could not be read (for example a stream without a leader
	// during an election); the rest is still reported.
	Errors []string
	// Size is the number of nodes in the JetStream meta group and Quorum how many of them
	// must be up for it to elect a leader and change streams (Size/2+1); 0 with an
	// external NATS.
	Size, Quorum int
	// Routes are the route URLs a node joining the cluster lists (titan.cluster.routes):
	// this node's configured routes and its own route listen address (unless it listens
	// on every interface, 0.0.0.0 or ::, which is no address to dial). Empty with an
	// external NATS.
	Routes []string
}

// NodeStatus is one node of the cluster.
type NodeStatus struct {
	// Name is the node's (nats-server's) name. A meta group peer no reachable node can
	// name (it was down since every node that is up started) is "unknown peer <Peer>".
	Name string
	// Peer is its JetStream Raft peer id (derived by nats-server from the name); empty
	// with an external NATS.
	Peer string
	// Up is true when this node is connected to it (a route) or it is this node; with an
	// external NATS, when no stream reports it offline. This node is not up while it cannot
	// write its JetStream store (cluster.Node.DiskHealth), nor is a peer the JetStream meta
	// group reports offline (its JetStream disabled or stopped).
	Up bool
	// Cause is why this node is not up ("no space left on device"); empty otherwise and
	// for other nodes.
	Cause string
	// MetaLeader is true for the JetStream meta leader.
	MetaLeader bool
	// Leads are the streams it leads, sorted.
	Leads []string
}

// ReplicaStatus is one replica of a stream or consumer as its leader reports it
// (nats-server's PeerInfo).
type ReplicaStatus struct {
	// Name is the replica's node.
	Name string
	// Current is true when it was seen recently and is caught up.
	Current bool
	// Offline is true when it was not seen recently.
	Offline bool
	// Lag is how many Raft operations it is behind.
	Lag uint64
	// Active is the time since its leader last heard from it.
	Active time.Duration
	// Peer is its JetStream Raft peer id.
	Peer string
}

// StreamStatus is one Titan stream.
type StreamStatus struct {
	// Name is the stream's name (TITAN_<group>_Q, TITAN_<group>_ES).
	Name string
	// Group is the destination group it holds.
	Group string
	// Kind is "queues" or "events-store".
	Kind string
	// Leader names the node leading it ("" during an election).
	Leader string
	// Replicas are the other replicas, as the leader reports them.
	Replicas []ReplicaStatus
	// Messages and Bytes are what it stores.
	Messages, Bytes uint64
	// LastSeq is the sequence of the last message stored (its total traffic).
	LastSeq uint64
	// Consumers counts its consumers.
	Consumers int
}

// QueueStatus is one queue: its durable consumer on the group's queue stream.
type QueueStatus struct {
	// Identity is the queue's (group, destination).
	Identity dest.Identity
	// Stream is the stream holding its messages.
	Stream string
	// Stored counts the messages the stream holds for it (undelivered and delivered but
	// not yet acknowledged; a WorkQueue stream removes a message when it is acknowledged).
	Stored uint64
	// Bytes is the queue's share of the bytes its stream stores: JetStream keeps bytes per
	// stream, not per subject, so it is exact when the queue holds every message of its
	// stream and otherwise the stream's bytes in proportion to the queue's messages.
	Bytes uint64
	// Consumer is false for a queue with messages and no durable consumer yet (no node
	// ever had a subscriber for it); the consumer fields are then zero.
	Consumer bool
	// Pending counts messages stored and not yet delivered.
	Pending uint64
	// Delivering counts messages delivered and not yet acknowledged.
	Delivering int
	// Redelivered counts messages delivered more than once and not yet acknowledged.
	Redelivered int
	// Waiting counts pull requests waiting (nodes with subscribers that have credit).
	Waiting int
	// Delivered counts deliveries made by the consumer.
	Delivered uint64
	// Paused is true while an operator paused the queue's deliveries (JetStream consumer
	// pause).
	Paused bool
	// Leader names the node leading the consumer (the stream's leader while the queue has
	// no consumer).
	Leader string
	// Replicas are the consumer's other replicas (the stream's while it has none).
	Replicas []ReplicaStatus
}

// Of reads the cluster's state as node n sees it: one JetStream API request per Titan stream and one
// consumer listing per queue stream, bounded by StatusTimeout. Parts that cannot be read
// are listed in Status.Errors. When not even the stream list answers (no meta leader, this
// node cut off from a quorum) it returns that error too, with a Status that still holds
// what this node knows by itself (its nodes, up or not). Never a nil Status. Safe for
// concurrent use.
func Of(ctx context.Context, n *cluster.Node) (*Status, error) { return read(ctx, n, true) }

// read is Of; without queues it skips the queue listing (Status.Queues stays empty).
func read(ctx context.Context, n *cluster.Node, queues bool) (*Status, error) {
	ctx, cancel := context.WithTimeout(ctx, StatusTimeout)
	defer cancel()
	st := &Status{Mode: ModeExternal, Node: n.Name(), Cluster: n.Config().Name}
	nodes := map[string]*NodeStatus{}
	node := func(name string) *NodeStatus {
		if name == "" {
			return nil
		}
		ns := nodes[name]
		if ns == nil {
			ns = &NodeStatus{Name: name}
			nodes[name] = ns
		}
		return ns
	}
	// names names a peer nats-server could not name; the node list and every replica list
	// use it before a node is made from a replica's name, or a peer this node never heard
	// from shows twice: once named, once as nats-server's placeholder (issue 27).
	names := func(name, _ string) string { return name }
	if n.Embedded() {
		names = peerNamer(ctx, n)
		st.Mode = ModeEmbedded
		st.Routes = joinRoutes(n.Config().Listen, n.Config().Routes)
		embeddedNodes(n, st, node, names)
		if d := n.DiskHealth(); !d.OK {
			self := node(st.Node)
			self.Up, self.Cause = false, d.Cause.Error()
		}
	} else {
		node(st.Node).Up = true
	}

	var infos []*jetstream.StreamInfo
	lister := n.JetStream().ListStreams(ctx)
	for si := range lister.Info() {
		if strings.HasPrefix(si.Config.Name, "TITAN_") {
			infos = append(infos, si)
		}
	}
	var listErr error
	if err := lister.Err(); err != nil && !errors.Is(err, jetstream.ErrEndOfData) {
		if len(infos) == 0 {
			listErr = err
		}
		st.Errors = append(st.Errors, "listing streams: "+err.Error())
	}
	for _, si := range infos {
		ss := streamStatus(si)
		for i := range ss.Replicas {
			ss.Replicas[i].Name = names(ss.Replicas[i].Name, ss.Replicas[i].Peer)
		}
		st.Streams = append(st.Streams, ss)
		if l := node(ss.Leader); l != nil {
			l.Leads = append(l.Leads, ss.Name)
			if !n.Embedded() {
				l.Up = true
			}
		}
		for _, r := range ss.Replicas {
			rn := node(r.Name)
			if !n.Embedded() && !r.Offline {
				rn.Up = true
			}
		}
		if queues && ss.Kind == "queues" {
			st.Errors = append(st.Errors, queueStatuses(ctx, n.JetStream(), st, ss)...)
		}
	}
	slices.SortFunc(st.Streams, func(a, b StreamStatus) int { return strings.Compare(a.Name, b.Name) })
	slices.SortFunc(st.Queues, func(a, b QueueStatus) int {
		if c := strings.Compare(a.Identity.Group, b.Identity.Group); c != 0 {
			return c
		}
		return strings.Compare(a.Identity.Destination(), b.Identity.Destination())
	})
	for _, ns := range nodes {
		slices.Sort(ns.Leads)
		ns.MetaLeader = ns.Name == st.MetaLeader
		st.Nodes = append(st.Nodes, *ns)
	}
	slices.SortFunc(st.Nodes, func(a, b NodeStatus) int { return strings.Compare(a.Name, b.Name) })
	if n.Embedded() {
		nameReplicas(st, names)
		markDown(st, nodes)
	}
	return st, listErr
}

// markDown shows the replicas on a node this node sees down (no route to it) as offline
// (issue 27): a leader reports a replica it lost only a moment ago as "lag 1" and current
// until its own timeout, which read as a healthy node.
func markDown(st *Status, nodes map[string]*NodeStatus) {
	fix := func(rs []ReplicaStatus) {
		for i := range rs {
			if ns := nodes[rs[i].Name]; ns != nil && !ns.Up {
				rs[i].Offline, rs[i].Current = true, false
			}
		}
	}
	for i := range st.Streams {
		fix(st.Streams[i].Replicas)
	}
	for i := range st.Queues {
		fix(st.Queues[i].Replicas)
	}
}

// embeddedNodes fills the meta leader and the nodes from the embedded server: the meta
// group's peers, up when a route to them is connected and the meta group does not report
// them offline. Peers this node cannot name are named by the other nodes (peerNamer).
func embeddedNodes(n *cluster.Node, st *Status, node func(string) *NodeStatus, names func(name, peer string) string) {
	srv := n.Server()
	self := node(st.Node)
	self.Up, self.Peer = true, n.PeerID()
	st.RaftGroups = raftGroups(srv)
	offline := map[string]bool{}
	if jsi, err := srv.Jsz(&server.JSzOptions{}); err == nil && jsi.Meta != nil {
		st.MetaLeader = jsi.Meta.Leader
		st.Size, st.Quorum = jsi.Meta.Size, jsi.Meta.QuorumNeeded
		if jsi.Meta.Name != "" {
			st.Cluster = jsi.Meta.Name
		}
		if l := node(jsi.Meta.Leader); l != nil && jsi.Meta.Peer != "" {
			l.Peer = jsi.Meta.Peer
		}
		for _, p := range jsi.Meta.Replicas {
			name := names(p.Name, p.Peer)
			node(name).Peer = p.Peer
			offline[name] = p.Offline
		}
	}
	if rz, err := srv.Routez(&server.RoutezOptions{}); err == nil {
		for _, r := range rz.Routes {
			if r.RemoteName != "" && !offline[r.RemoteName] {
				node(r.RemoteName).Up = true
			}
		}
	}
}

// peerNamer returns the name to show for a peer: name itself unless nats-server does not
// know it (cluster.UnknownName), then the name the cluster knows for its id
// (cluster.Node.PeerNames, asked at most once per call of peerNamer's result), else
// "unknown peer <id>".
func peerNamer(ctx context.Context, n *cluster.Node) func(name, peer string) string {
	var names map[string]string
	return func(name, peer string) string {
		if !cluster.UnknownName(name) {
			return name
		}
		if names == nil {
			names, _ = n.PeerNames(ctx)
			if names == nil {
				names = map[string]string{}
			}
		}
		if known := names[peer]; known != "" {
			return known
		}
		return "unknown peer " + peer
	}
}

// nameReplicas names the stream and queue replicas their leader could not name with names
// (see peerNamer) and sorts them by name.
func nameReplicas(st *Status, names func(name, peer string) string) {
	fix := func(rs []ReplicaStatus) {
		for i := range rs {
			rs[i].Name = names(rs[i].Name, rs[i].Peer)
		}
		slices.SortFunc(rs, func(a, b ReplicaStatus) int { return strings.Compare(a.Name, b.Name) })
	}
	for i := range st.Streams {
		fix(st.Streams[i].Replicas)
	}
	for i := range st.Queues {
		fix(st.Queues[i].Replicas)
	}
}

// joinRoutes is Status.Routes: routes, then nats://listen unless listen's host is
// unspecified or the address is already among routes.
func joinRoutes(listen string, routes []string) []string {
	out := slices.Clone(routes)
	host, _, err := net.SplitHostPort(listen)
	if err != nil || host == "" {
		return out
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
		return out
	}
	own := "nats://" + listen
	for _, r := range routes {
		if strings.TrimSuffix(r, "/") == own || r == listen {
			return out
		}
	}
	return append(out, own)
}

// raftGroups counts the Raft groups srv takes part in: the meta group (system account) and
// the stream and consumer groups of every JetStream account.
func raftGroups(srv *server.Server) int {
	accounts := []string{""} // the system account
	if jsi, err := srv.Jsz(&server.JSzOptions{Accounts: true}); err == nil {
		for _, a := range jsi.AccountDetails {
			accounts = append(accounts, a.Name)
		}
	}
	n := 0
	for _, acc := range accounts {
		if rz := srv.Raftz(&server.RaftzOptions{AccountFilter: acc}); rz != nil {
			for _, groups := range *rz {
				n += len(groups)
			}
		}
	}
	return n
}

// queueStatuses appends the queues of stream (group's queue stream) to st: every subject
// holding messages and every queue consumer, and returns what could not be read.
func queueStatuses(ctx context.Context, js jetstream.JetStream, st *Status, ss StreamStatus) []string {
	stream, group := ss.Name, ss.Group
	s, err := js.Stream(ctx, stream)
	if err != nil {
		return []string{"stream " + stream + ": " + err.Error()}
	}
	var errs []string
	byID := map[dest.Identity]*QueueStatus{}
	var order []dest.Identity
	get := func(id dest.Identity) *QueueStatus {
		qs := byID[id]
		if qs == nil {
			// Until a consumer exists the queue lives on the stream's leader and replicas.
			qs = &QueueStatus{Identity: id, Stream: stream, Leader: ss.Leader, Replicas: ss.Replicas}
			byID[id] = qs
			order = append(order, id)
		}
		return qs
	}
	if si, err := s.Info(ctx, jetstream.WithSubjectFilter("t."+group+".>")); err != nil {
		errs = append(errs, "subjects of "+stream+": "+err.Error())
	} else {
		for subj, count := range si.State.Subjects {
			if id, ok := cluster.IdentityOfSubject(subj); ok && id.Group == group {
				qs := get(id)
				qs.Stored, qs.Bytes = count, shareOf(si.State.Bytes, count, si.State.Msgs)
			}
		}
	}
	cl := s.ListConsumers(ctx)
	for ci := range cl.Info() {
		if !strings.HasPrefix(ci.Name, "q_") {
			continue
		}
		id, ok := cluster.IdentityOfSubject(ci.Config.FilterSubject)
		if !ok || id.Group != group {
			continue
		}
		qs := get(id)
		qs.Consumer = true
		qs.Pending, qs.Delivering, qs.Redelivered = ci.NumPending, ci.NumAckPending, ci.NumRedelivered
		qs.Waiting, qs.Delivered = ci.NumWaiting, ci.Delivered.Consumer
		qs.Paused = ci.Paused
		if ci.Cluster != nil {
			qs.Leader, qs.Replicas = ci.Cluster.Leader, replicas(ci.Cluster.Replicas)
		}
	}
	if err := cl.Err(); err != nil && !errors.Is(err, jetstream.ErrEndOfData) {
		errs = append(errs, "consumers of "+stream+": "+err.Error())
	}
	for _, id := range order {
		st.Queues = append(st.Queues, *byID[id])
	}
	return errs
}

func streamStatus(si *jetstream.StreamInfo) StreamStatus {
	ss := StreamStatus{Name: si.Config.Name, Messages: si.State.Msgs, Bytes: si.State.Bytes,
		LastSeq: si.State.LastSeq, Consumers: si.State.Consumers}
	ss.Group, ss.Kind = streamKind(si.Config.Name)
	if si.Cluster != nil {
		ss.Leader, ss.Replicas = si.Cluster.Leader, replicas(si.Cluster.Replicas)
	}
	return ss
}

// streamKind is the group and kind ("queues", "events-store" or "other") of a Titan stream
// name (cluster/placement.go): TITAN_<g>_Q and ring queues' TITAN_<g>_Q_R<N>; TITAN_<g>_ES
// and retention classes' TITAN_<g>_ES_<8 hex>; each also as a partition, _P<k> appended.
func streamKind(name string) (group, kind string) {
	class, _, _ := cluster.SplitPartition(name)
	rest := strings.TrimPrefix(class, "TITAN_")
	if i := strings.LastIndex(rest, "_"); i > 0 {
		switch tail := rest[i+1:]; {
		case len(tail) > 1 && tail[0] == 'R' && digits(tail[1:]) && strings.HasSuffix(rest[:i], "_Q"):
			rest = rest[:i]
		case len(tail) == 8 && isHex(tail) && strings.HasSuffix(rest[:i], "_ES"):
			rest = rest[:i]
		}
	}
	switch {
	case strings.HasSuffix(rest, "_Q"):
		return strings.TrimSuffix(rest, "_Q"), "queues"
	case strings.HasSuffix(rest, "_ES"):
		return strings.TrimSuffix(rest, "_ES"), "events-store"
	}
	return rest, "other"
}

func digits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return s != ""
}

func isHex(s string) bool {
	for i := 0; i < len(s); i++ {
		if !(s[i] >= '0' && s[i] <= '9' || s[i] >= 'a' && s[i] <= 'f') {
			return false
		}
	}
	return true
}

func replicas(ps []*jetstream.PeerInfo) []ReplicaStatus {
	out := make([]ReplicaStatus, 0, len(ps))
	for _, p := range ps {
		out = append(out, ReplicaStatus{Name: p.Name, Current: p.Current, Offline: p.Offline, Lag: p.Lag, Active: p.Active, Peer: p.Peer})
	}
	slices.SortFunc(out, func(a, b ReplicaStatus) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// shareOf is bytes×part/whole without overflow (bytes when part is whole; 0 when whole is 0).
func shareOf(bytes, part, whole uint64) uint64 {
	if whole == 0 || part >= whole {
		if whole == 0 {
			return 0
		}
		return bytes
	}
	hi, lo := bits.Mul64(bytes, part)
	q, _ := bits.Div64(hi, lo, whole)
	return q
}
