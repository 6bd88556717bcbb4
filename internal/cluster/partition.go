package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/titan-broker/titan/internal/dest"
)

// This file spreads a group's queues and logs over several streams (issue 28, "streams
// that spread"): each placement class (placement.go) is cluster.partitions streams, a
// destination lives in exactly one of them (PartitionOf), and each partition's stream
// leader is placed on a node of its own (PreferredLeader), so a group's writes use every
// node's CPU and disk instead of one leader's. docs/design.md "Partitioned streams" has
// the reasoning and the limits.

// DefaultPartitions is the partition count of a new cluster whose configuration does not
// set cluster.partitions. Twelve divides evenly over 3, 4, 6 and 12 nodes and is within
// one stream of even over 5 (3,3,2,2,2), so a 3–5 node cluster has every node leading a
// fair share of each class; it is few enough that a group's streams (twelve Raft groups
// per class in use, made on first use) cost little in the meta layer and in heartbeats.
const DefaultPartitions = 12

// MaxPartitions is the largest cluster.partitions accepted (config validation has the same
// bound): every partition is a Raft group per class and group in use.
const MaxPartitions = 256

// LayoutBucket is the key-value bucket holding the cluster's layout: the partition count
// fixed when the cluster first started (key partitionsKey). A changed count would place
// destinations in other streams and strand the messages already stored, so it never
// changes silently (settlePartitions).
const LayoutBucket = "TITAN_LAYOUT"

const partitionsKey = "partitions"

// PartitionOf returns the partition of destination id among n (0 when n <= 1): FNV-1a
// (64 bit) of its group, channel and bare-ness, modulo n. The function is part of the
// stored layout: it must never change, or existing destinations would move to other
// streams (TestPartitionOfIsStable pins it).
func PartitionOf(id dest.Identity, n int) int {
	if n <= 1 {
		return 0
	}
	h := fnvString(fnvString(fnvOffset, id.Group), id.Channel)
	if id.Bare {
		h = fnvByte(h, 'b')
	}
	return int(h % uint64(n))
}

// FNV-1a, 64 bit: the offset basis and the prime.
const (
	fnvOffset uint64 = 14695981039346656037
	fnvPrime  uint64 = 1099511628211
)

// fnvByte mixes b into the FNV-1a hash h.
func fnvByte(h uint64, b byte) uint64 { return (h ^ uint64(b)) * fnvPrime }

// fnvString mixes s and then a zero byte (a separator between parts) into h.
func fnvString(h uint64, s string) uint64 {
	for i := 0; i < len(s); i++ {
		h = fnvByte(h, s[i])
	}
	return h * fnvPrime
}

// partKind is subject kind kind of partition k among n: kind itself with one partition,
// kind_<k> with more.
func partKind(kind string, k, n int) string {
	if n <= 1 {
		return kind
	}
	return kind + "_" + strconv.Itoa(k)
}

// partStream is stream name of partition k among n: name itself with one partition,
// name_P<k> with more.
func partStream(name string, k, n int) string {
	if n <= 1 {
		return name
	}
	return name + "_P" + strconv.Itoa(k)
}

// SplitPartition splits a partitioned stream name ("TITAN_g_Q_P3") into its class's name
// ("TITAN_g_Q") and its partition (3); partitioned is false for a name without the _P<k>
// suffix (returned whole).
func SplitPartition(stream string) (class string, k int, partitioned bool) {
	i := strings.LastIndex(stream, "_P")
	if i < 0 || !digits(stream[i+2:]) {
		return stream, 0, false
	}
	k, err := strconv.Atoi(stream[i+2:])
	if err != nil {
		return stream, 0, false
	}
	return stream[:i], k, true
}

// splitKind splits a partitioned subject kind ("q_3") into its base kind ("q"); the
// partition suffix is not checked against any count.
func splitKind(kind string) string {
	if i := strings.LastIndexByte(kind, '_'); i > 0 && digits(kind[i+1:]) {
		return kind[:i]
	}
	return kind
}

// PreferredLeader returns the node that should lead stream among its peers (the names of
// its replicas, leader included): peers sorted by name, indexed by a hash of the stream's
// class name plus its partition. Partitions 0..N-1 of a class whose streams share a peer
// set (every R3 stream of a 3-node cluster) so go round-robin over the nodes, and classes
// and groups start at different nodes. Deterministic: every node computes the same
// answer. "" for no peers.
func PreferredLeader(stream string, peers []string) string {
	if len(peers) == 0 {
		return ""
	}
	ps := slices.Clone(peers)
	slices.Sort(ps)
	ps = slices.Compact(ps)
	class, k, _ := SplitPartition(stream)
	h := uint32(2166136261)
	for i := 0; i < len(class); i++ {
		h ^= uint32(class[i])
		h *= 16777619
	}
	return ps[(int(h%uint32(len(ps)))+k)%len(ps)]
}

// leaderPlaceTimeout bounds placeLeader: waiting for the new stream's replicas to be
// current, the leadership transfer and the new leader's election.
const leaderPlaceTimeout = 5 * time.Second

// placeLeader moves the leadership of stream, just created by this node, to its
// PreferredLeader once that replica is current ($JS.API.STREAM.LEADER.STEPDOWN with a
// preferred placement, nats-server 2.11+), and waits until it leads, so the creator's
// first publishes go to the final leader. JetStream itself elects a random replica, which
// leaves a node leading several partitions and another none often enough to matter
// ((2/3)^12 that a given node of three leads none of twelve). Bounded by ctx and
// leaderPlaceTimeout; an error only means the stream stays where JetStream put it.
func placeLeader(ctx context.Context, js jetstream.JetStream, stream string) error {
	ctx, cancel := context.WithTimeout(ctx, leaderPlaceTimeout)
	defer cancel()
	asked := false
	for {
		leader, want, ready := leaderState(ctx, js, stream)
		switch {
		case want != "" && leader == want:
			return nil
		case ready && !asked:
			body, _ := json.Marshal(map[string]any{"placement": map[string]string{"preferred": want}})
			if err := apiAnswer(js.Conn().RequestWithContext(ctx, fmt.Sprintf(apiStreamStepDown, stream), body)); err != nil {
				return fmt.Errorf("moving %s's leader to %s: %w", stream, want, err)
			}
			asked = true
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("placing %s's leader on %s (leader %q): %w", stream, want, leader, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// leaderState returns stream's leader, its PreferredLeader, and whether the preferred
// replica is current and online (a leadership transfer to it can succeed).
func leaderState(ctx context.Context, js jetstream.JetStream, stream string) (leader, want string, ready bool) {
	actx, cancel := context.WithTimeout(ctx, AttemptTimeout)
	defer cancel()
	st, err := js.Stream(actx, stream)
	if err != nil || st.CachedInfo().Cluster == nil || st.CachedInfo().Cluster.Leader == "" {
		return "", "", false
	}
	c := st.CachedInfo().Cluster
	peers := []string{c.Leader}
	for _, r := range c.Replicas {
		peers = append(peers, r.Name)
	}
	want = PreferredLeader(stream, peers)
	for _, r := range c.Replicas {
		if r.Name == want {
			ready = r.Current && !r.Offline
		}
	}
	return c.Leader, want, ready
}

// defaultPartitionsDefer is how long a node without cluster.partitions, finding no count
// stored, waits for a configured node to store one before it stores DefaultPartitions; it
// looks again every partitionsPoll meanwhile. A variable for the tests (export_test.go).
var defaultPartitionsDefer = time.Second

// partitionsPoll is how often a deferring node reads the stored count again.
const partitionsPoll = 50 * time.Millisecond

// settlePartitions fixes the node's partition count from the cluster's layout bucket: the
// stored count when there is one (cluster.partitions, when set, must equal it:
// ErrPartitionsChanged otherwise); else, on the cluster's first start, the configured
// count (DefaultPartitions when unset), or 1 when the cluster already holds streams of a
// version before partitions (their destinations stay where they are), stored for every
// later start of every node. Several nodes starting at once agree through the bucket's
// create-if-absent; one without a configured count first waits defaultPartitionsDefer for
// a configured one to store its count. Bounded by ctx.
func (n *Node) settlePartitions(ctx context.Context) error {
	var kv jetstream.KeyValue
	err := Attempt(ctx, func(ctx context.Context) error {
		var err error
		kv, err = n.js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{
			Bucket: LayoutBucket, Replicas: n.cfg.Replicas, Storage: jetstream.FileStorage, History: 1,
			Description: "Titan: the cluster's layout (partition count), fixed at its first start",
		})
		return err
	})
	if err != nil {
		return fmt.Errorf("cluster: layout bucket: %w", err)
	}
	configured := n.cfg.Partitions
	deferUntil := time.Now().Add(defaultPartitionsDefer) // for a node with configured == 0
	for {
		stored, found, err := readPartitions(ctx, kv)
		if err != nil {
			return err
		}
		if found {
			if configured != 0 && configured != stored {
				return fmt.Errorf("%w: cluster.partitions is %d, but this cluster has stored its queues and logs in %d partitions since its first start; set cluster.partitions to %d (or remove it)",
					ErrPartitionsChanged, configured, stored, stored)
			}
			n.partitions = stored
			n.log.Info("cluster partitions", "partitions", stored)
			return nil
		}
		if configured == 0 && time.Now().Before(deferUntil) {
			// A node left at the default defers to a node of the same first start that
			// was configured (nodes start within moments of each other, in any order):
			// whichever stored first used to win, so two nodes set to 4 and one unset could
			// end with 12. It looks again every partitionsPoll, so a configured node's
			// count is taken up as soon as it is stored.
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(partitionsPoll):
			}
			continue
		}
		legacy, err := n.unpartitionedStreams(ctx)
		if err != nil {
			return err
		}
		want := configured
		switch {
		case legacy != "" && configured > 1:
			return fmt.Errorf("%w: cluster.partitions is %d, but this cluster holds stream %s of a version without partitions; remove cluster.partitions (or set it to 1) to keep its messages",
				ErrPartitionsChanged, configured, legacy)
		case legacy != "":
			want = 1
		case want == 0:
			want = DefaultPartitions
		}
		err = Attempt(ctx, func(ctx context.Context) error {
			_, err := kv.Create(ctx, partitionsKey, []byte(strconv.Itoa(want)))
			return err
		})
		if errors.Is(err, jetstream.ErrKeyExists) {
			continue // another node stored it first: read its value
		}
		if err != nil {
			return fmt.Errorf("cluster: storing the partition count: %w", err)
		}
		n.partitions = want
		n.log.Info("cluster partitions fixed at the cluster's first start", "partitions", want, "unpartitioned_streams", legacy != "")
		return nil
	}
}

// readPartitions reads the stored partition count.
func readPartitions(ctx context.Context, kv jetstream.KeyValue) (count int, found bool, err error) {
	var e jetstream.KeyValueEntry
	err = Attempt(ctx, func(ctx context.Context) error {
		var err error
		e, err = kv.Get(ctx, partitionsKey)
		return err
	})
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("cluster: reading the partition count: %w", err)
	}
	count, err = strconv.Atoi(string(e.Value()))
	if err != nil || count < 1 || count > MaxPartitions {
		return 0, false, fmt.Errorf("cluster: stored partition count %q is not 1-%d", e.Value(), MaxPartitions)
	}
	return count, true, nil
}

// unpartitionedStreams returns the name of a Titan queue or events-store stream without a
// partition suffix (made by a version before partitions), or "".
func (n *Node) unpartitionedStreams(ctx context.Context) (string, error) {
	var found string
	err := Attempt(ctx, func(ctx context.Context) error {
		found = ""
		names := n.js.StreamNames(ctx)
		for name := range names.Name() {
			if _, _, p := SplitPartition(name); strings.HasPrefix(name, "TITAN_") && !p && found == "" {
				found = name
			}
		}
		if err := names.Err(); err != nil && !errors.Is(err, jetstream.ErrEndOfData) {
			return err
		}
		return nil
	})
	if err != nil {
		return "", fmt.Errorf("cluster: listing streams: %w", err)
	}
	return found, nil
}

// Partitions is the cluster's partition count (settled at Start; 1: unpartitioned).
func (n *Node) Partitions() int { return n.partitions }
