package cluster

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strconv"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/titan-broker/titan/internal/address"
	"github.com/titan-broker/titan/internal/dedup"
	"github.com/titan-broker/titan/internal/dest"
	"github.com/titan-broker/titan/internal/message"
)

// This file places a destination in its Stream: which JetStream stream holds a queue or an
// events-store log, on which subject, with which limits. Address settings that JetStream
// can only express per stream (ring-size; events-store retention) select a stream shared
// by every destination of the group with the same limits: one stream per (group, limits
// class), never one per destination (jetstream-mapping note §5).
//
//   - A queue without a ring size: TITAN_<group>_Q, subjects t.<group>.q.<channel>
//     (bare: qb), scheduled holders t.<group>.qs.<message-id>.
//   - A ring queue of ring size N: TITAN_<group>_Q_R<N>, WorkQueue with
//     MaxMsgsPerSubject N and discard old, subjects t.<group>.r<N>.<channel> (bare: rb<N>),
//     scheduled holders t.<group>.rs<N>.<message-id>. Every queue is its own subject, so
//     the per-subject limit is exactly the queue's ring.
//   - An events-store log without retention: TITAN_<group>_ES, t.<group>.es.<channel>.
//   - A log with retention (max messages M, max bytes B, max age A): TITAN_<group>_ES_<h>
//     where h hashes (M, B, A); MaxMsgsPerSubject M (per log, exact), MaxAge A (per
//     message, exact), MaxBytes B (the stream's total: every log of the group sharing
//     these bounds), discard old; subjects t.<group>.es<h>.<channel> (bare: esb<h>).
//
// Partitions (partition.go): with cluster.partitions N > 1 every one of these classes is N
// streams, a destination in partition k = PartitionOf(id, N) of its class. Partition k's
// stream name ends in _P<k> (TITAN_<group>_Q_P3, TITAN_<group>_Q_R<N>_P3,
// TITAN_<group>_ES_P3, TITAN_<group>_ES_<h>_P3) and its subject kinds end in _<k>
// (t.<group>.q_3.<channel>, qb_3, qs_3, r<N>_3, rb<N>_3, rs<N>_3, es_3, esb_3, es<h>_3,
// esb<h>_3), so the partitions of a class own disjoint subject spaces. With one partition
// the names are the ones above, unchanged.
//
// Every node must run with the same address settings: a node that resolved a destination
// to another class would store it in another stream (README "Running a cluster").

// DefaultDuplicateWindow is the streams' Nats-Msg-Id window when none is configured: the
// single-node duplicate-detection default (titan.duplicate-detection.window, 10 minutes).
const DefaultDuplicateWindow = 10 * time.Minute

// Placement is where one destination's messages live.
type Placement struct {
	// Stream is the stream's name.
	Stream string
	// Subject is the destination's subject.
	Subject string
	// Partition is the stream's partition of its group and class, in [0, partitions);
	// always 0 with one partition.
	Partition int
	// Holders is the subject prefix of scheduled (delay) holders, "t.<group>.<kind>."
	// (queues only).
	Holders string
	// Config is the stream's configuration (created by Streams.Ensure when missing).
	Config jetstream.StreamConfig
}

// PlaceQueue returns queue id's placement: ringSize is its address setting ring-size (0:
// none), replicas the streams' replica count, partitions the group's partition count (the
// node's Partitions; 0 or 1: one stream per class, the unpartitioned names), window the
// configured duplicate-detection window (0: DefaultDuplicateWindow; the stream's
// Nats-Msg-Id window is StreamWindow(window), see duplicates.go). The destination lives in
// partition PartitionOf(id, partitions) of its class: its messages, its scheduled holders
// and its consumer are all in that one stream, so its FIFO order is the stream's.
func PlaceQueue(id dest.Identity, ringSize, replicas, partitions int, window time.Duration) Placement {
	window = StreamWindow(window)
	k := PartitionOf(id, partitions)
	if n := ringSize; n > 0 {
		r := strconv.Itoa(n)
		kind, bare, hold := partKind("r"+r, k, partitions), partKind("rb"+r, k, partitions), partKind("rs"+r, k, partitions)
		p := Placement{Stream: partStream(StreamName(id.Group)+"_R"+r, k, partitions), Partition: k, Holders: "t." + id.Group + "." + hold + "."}
		if id.Bare {
			p.Subject = SubjectOf(id, bare)
		} else {
			p.Subject = SubjectOf(id, kind)
		}
		p.Config = jetstream.StreamConfig{
			Name: p.Stream, Subjects: []string{"t." + id.Group + "." + kind + ".>", "t." + id.Group + "." + bare + ".>", p.Holders + ">"},
			Retention: jetstream.WorkQueuePolicy, Storage: jetstream.FileStorage, Replicas: replicas,
			MaxMsgsPerSubject: int64(n), Discard: jetstream.DiscardOld,
			Duplicates: window, AllowMsgTTL: true, AllowMsgSchedules: true, AllowAtomicPublish: true, MaxConsumers: -1,
		}
		return p
	}
	kind, bare, hold := partKind(KindQueue, k, partitions), partKind(KindQueueBare, k, partitions), partKind(KindSchedule, k, partitions)
	p := Placement{Stream: partStream(StreamName(id.Group), k, partitions), Partition: k, Holders: "t." + id.Group + "." + hold + "."}
	if id.Bare {
		p.Subject = SubjectOf(id, bare)
	} else {
		p.Subject = SubjectOf(id, kind)
	}
	p.Config = jetstream.StreamConfig{
		Name: p.Stream, Subjects: []string{"t." + id.Group + "." + kind + ".>", "t." + id.Group + "." + bare + ".>", p.Holders + ">"},
		Retention: jetstream.WorkQueuePolicy, Storage: jetstream.FileStorage, Replicas: replicas,
		Duplicates: window, AllowMsgTTL: true, AllowMsgSchedules: true, AllowAtomicPublish: true, MaxConsumers: -1,
	}
	return p
}

// PlaceLog returns events-store log id's placement from its address settings s
// (retention); replicas, partitions and window as PlaceQueue's. A log lives in partition
// PartitionOf(id, partitions) of its retention class: its sequences are that stream's
// (monotonic per log, as before; not dense).
func PlaceLog(id dest.Identity, s address.Settings, replicas, partitions int, window time.Duration) Placement {
	window = StreamWindow(window)
	k := PartitionOf(id, partitions)
	base, h := StoreStreamName(id.Group), ""
	retained := s.RetentionMaxMessages > 0 || s.RetentionMaxBytes > 0 || s.RetentionMaxAge > 0
	if retained {
		h = retentionClass(s)
		base += "_" + h
	}
	kind, bare := partKind(KindStore+h, k, partitions), partKind(KindStoreBare+h, k, partitions)
	p := Placement{Stream: partStream(base, k, partitions), Partition: k}
	if id.Bare {
		p.Subject = SubjectOf(id, bare)
	} else {
		p.Subject = SubjectOf(id, kind)
	}
	cfg := jetstream.StreamConfig{
		Name: p.Stream, Subjects: []string{"t." + id.Group + "." + kind + ".>", "t." + id.Group + "." + bare + ".>"},
		Retention: jetstream.LimitsPolicy, Storage: jetstream.FileStorage, Replicas: replicas,
		Duplicates: window, AllowAtomicPublish: true, MaxConsumers: -1,
	}
	if !retained {
		p.Config = cfg
		return p
	}
	cfg.Discard, cfg.MaxMsgs, cfg.MaxMsgsPerSubject, cfg.MaxBytes = jetstream.DiscardOld, -1, -1, -1
	if s.RetentionMaxMessages > 0 {
		cfg.MaxMsgsPerSubject = s.RetentionMaxMessages
	}
	if s.RetentionMaxBytes > 0 {
		cfg.MaxBytes = s.RetentionMaxBytes
	}
	if s.RetentionMaxAge > 0 {
		cfg.MaxAge = s.RetentionMaxAge
		// JetStream refuses a duplicate window longer than the stream's max age.
		cfg.Duplicates = min(window, s.RetentionMaxAge)
	}
	p.Config = cfg
	return p
}

// retentionClass names an events-store retention class: 8 hex digits of a hash of its
// bounds (messages, bytes, age in ns).
func retentionClass(s address.Settings) string {
	b := strconv.AppendInt(nil, s.RetentionMaxMessages, 10)
	b = append(b, '/')
	b = strconv.AppendInt(b, s.RetentionMaxBytes, 10)
	b = append(b, '/')
	b = strconv.AppendInt(b, int64(s.RetentionMaxAge), 10)
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:4])
}

// MsgID is the Nats-Msg-Id of m stored for id. A SEND carrying a duplicate id
// (_AMQ_DUPL_ID) gets an id derived from (destination, duplicate id), so the same
// duplicate id sent again to the same destination through any node, within the stream's
// Duplicates window (and beyond it, within duplicate-detection.window, through
// Duplicates), is stored once and still acknowledged (PubAck Duplicate: the producer gets
// its RECEIPT). Any other message gets its broker-assigned message-id qualified by a hash
// of id, which makes the broker's own retry of a publish whose PubAck was lost idempotent
// while the copies of one topic message stored for several durable subscriptions (one
// stream per group) are not taken for duplicates of each other.
func MsgID(id dest.Identity, m *message.Message) string {
	if d, ok := m.Header(dedup.Header); ok && d != "" {
		h := sha256.New()
		h.Write([]byte(id.String()))
		if id.Bare {
			h.Write([]byte{0, 'b'})
		}
		h.Write([]byte{0})
		h.Write([]byte(d))
		return clientIDPrefix + hex.EncodeToString(h.Sum(nil)[:20])
	}
	return m.ID + "." + strconv.FormatUint(identityHash(id), 36)
}

// identityHash is FNV-1a of id's group, pattern, channel and bare-ness (no allocation).
func identityHash(id dest.Identity) uint64 {
	h := fnvByte(fnvString(fnvString(fnvOffset, id.Group), id.Channel), byte(id.Pattern))
	if id.Bare {
		h = fnvByte(h, 'b')
	}
	return h
}

// reconcile updates an existing stream whose Titan-managed settings differ from want: a
// changed duplicate-detection window, or a stream made before a flag (atomic batches,
// TTLs, schedules) was enabled. Limits that choose the stream (ring size, retention) are in
// its name, so they never differ here. Flags are only ever switched on.
func reconcile(ctx context.Context, js jetstream.JetStream, have, want jetstream.StreamConfig) error {
	upd := have
	upd.Duplicates = want.Duplicates
	upd.AllowAtomicPublish = have.AllowAtomicPublish || want.AllowAtomicPublish
	upd.AllowMsgTTL = have.AllowMsgTTL || want.AllowMsgTTL
	upd.AllowMsgSchedules = have.AllowMsgSchedules || want.AllowMsgSchedules
	if upd.Duplicates == have.Duplicates && upd.AllowAtomicPublish == have.AllowAtomicPublish &&
		upd.AllowMsgTTL == have.AllowMsgTTL && upd.AllowMsgSchedules == have.AllowMsgSchedules {
		return nil
	}
	_, err := js.UpdateStream(ctx, upd)
	if err != nil {
		return fmt.Errorf("updating stream %s: %w", want.Name, err)
	}
	return nil
}
