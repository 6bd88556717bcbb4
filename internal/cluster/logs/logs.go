// Package logs is the events-store pattern in cluster mode: logs kept in JetStream
// streams, read through one consumer per subscription with the shared pull loop.
package logs

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/titan-broker/titan/internal/address"
	"github.com/titan-broker/titan/internal/cluster"
	"github.com/titan-broker/titan/internal/cluster/pull"
	"github.com/titan-broker/titan/internal/delivery"
	"github.com/titan-broker/titan/internal/dest"
	"github.com/titan-broker/titan/internal/dispatch"
	"github.com/titan-broker/titan/internal/message"
)

// autoCredit is how many records an auto-ack subscription takes per pull: a whole batch,
// as a raw JetStream consumer would.
const autoCredit = pull.MaxBatch

// Pattern is the events-store pattern in cluster mode: Limits streams per group
// (TITAN_<group>_ES_P<k>, subjects t.<group>.es_<k>.>, the group's logs spread over the
// cluster's partitions by a hash of the log: cluster.PlaceLog), a log per channel subject. A SEND returns
// after the PubAck; the MESSAGE's sequence is the stream sequence (monotonic per channel,
// not dense: the stream is shared by the group's channels). A subscription reads through
// its own consumer filtered on its channel: start-position new/first/last/<seq>/time:/delta:
// map to deliver policies New/All/Last/ByStartSequence/ByStartTime. Without durable-name
// it is an ordered consumer (ephemeral, no acks); with one, a durable consumer
// (es_<hash(durable-name, subject)>, explicit acks, replicated) that a later SUBSCRIBE with
// the same durable-name resumes after the last acknowledged message (its start-position
// is then ignored). Durable subscriptions are listed, deleted, bounded and expired
// cluster-wide, one live SUBSCRIBE per durable-name (durables.go, ManageDurables).
type Pattern struct {
	life     context.Context // the node's Context: bounds every publish and its retries
	js       jetstream.JetStream
	replicas int
	parts    int // the cluster's partition count (cluster.Node.Partitions)
	streams  *cluster.Streams
	placed   *cluster.PlacementCache // Place's results
	acks     *cluster.Acks           // the node's acknowledgements
	log      *slog.Logger

	mu      sync.Mutex
	readers map[*delivery.Subscription]*reader // guarded by mu
	live    map[string]int                     // live SUBSCRIBEs by durable consumer; guarded by mu

	// The management of durable subscriptions (durables.go), set by ManageDurables.
	nc      *nats.Conn
	node    string
	dopts   DurableOptions
	liveSub *nats.Subscription
	refused atomic.Uint64 // SUBSCRIBEs refused by the durable subscription limit

	// Settings gives a log its retention (address settings retention-max-messages,
	// -bytes, -age; cluster.PlaceLog); nil: none. DuplicateWindow is
	// titan.duplicate-detection.window (0: DefaultDuplicateWindow; the streams' Nats-Msg-Id
	// window is cluster.StreamWindow of it) and DuplicateIDs (nil: the stream's window only)
	// recognises client duplicate ids beyond it. All are set before the first use.
	Settings        cluster.Settings
	DuplicateWindow time.Duration
	DuplicateIDs    *cluster.Duplicates

	// Appended counts SENDs stored; Duplicates counts SENDs JetStream answered as
	// duplicates of a stored message (same _AMQ_DUPL_ID, any node).
	Appended, Duplicates atomic.Uint64
}

// New returns the events-store adapter over n.
func New(n *cluster.Node, log *slog.Logger) *Pattern {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	e := &Pattern{js: n.JetStream(), life: n.Context(), replicas: n.Replicas(), parts: n.Partitions(), streams: cluster.NewStreams(n.JetStream()), placed: cluster.NewPlacementCache(), acks: n.Acks(), log: log,
		readers: make(map[*delivery.Subscription]*reader), live: map[string]int{}}
	e.streams.Log = log
	return e
}

// Streams returns the streams this adapter made (the pipeline's port).
func (e *Pattern) Streams() *cluster.Streams { return e.streams }

// Place returns id's placement from its address settings (retention).
func (e *Pattern) Place(id dest.Identity) cluster.Placement {
	var s address.Settings
	if e.Settings != nil {
		s = e.Settings.Settings(id)
	}
	k := cluster.PlacementKey{ID: id, RetentionMessages: s.RetentionMaxMessages, RetentionBytes: s.RetentionMaxBytes,
		RetentionAge: s.RetentionMaxAge, Replicas: e.replicas, Partitions: e.parts, DuplicateWindow: e.DuplicateWindow}
	return e.placed.Place(k, func() cluster.Placement {
		return cluster.PlaceLog(id, s, k.Replicas, k.Partitions, k.DuplicateWindow)
	})
}

func (e *Pattern) ensureStream(ctx context.Context, p cluster.Placement) error {
	return e.streams.Ensure(ctx, p.Config)
}

// Publish appends m to id's log and returns after the PubAck. Errors: the publish's after
// PublishTimeout, or when cancel closes. A message the Persister stored (m.Sequence set)
// is not appended again.
func (e *Pattern) Publish(id dest.Identity, m *message.Message, cancel <-chan struct{}) (dropped bool, err error) {
	if m.Sequence != 0 {
		return false, nil // stored by the router's store stage (Persister)
	}
	ctx, stop := cluster.WithCancel(e.life, cluster.PublishTimeout, cancel)
	defer stop()
	p, msg, _ := e.Build(id, m)
	if err := e.ensureStream(ctx, p); err != nil {
		return false, err
	}
	if seen, err := e.DuplicateIDs.SeenMsg(ctx, msg); err != nil {
		return false, fmt.Errorf("cluster: message not stored: %w", err)
	} else if seen {
		e.Count(&jetstream.PubAck{Duplicate: true}) // stored before, beyond the stream's window
		return false, nil
	}
	ack, err := cluster.PublishRetrying(ctx, e.js, msg)
	if err == nil {
		err = e.DuplicateIDs.RecordMsg(ctx, msg)
	}
	if err != nil {
		e.log.Warn("events-store publish failed", "log", id.String(), "err", err)
		return false, fmt.Errorf("cluster: message not stored: %w", err)
	}
	e.Count(ack)
	return false, nil
}

// Build returns id's placement and the JetStream message that appends m to its log
// (dropped is always false: a log keeps what it is sent; the pipeline's port).
func (e *Pattern) Build(id dest.Identity, m *message.Message) (p cluster.Placement, msg *nats.Msg, dropped bool) {
	p = e.Place(id)
	msg = &nats.Msg{Subject: p.Subject, Data: message.Encode(nil, m), Header: nats.Header{}}
	msg.Header.Set(jetstream.MsgIDHeader, cluster.MsgID(id, m))
	return p, msg, false
}

// Count records a stored append: a duplicate or a new message.
func (e *Pattern) Count(ack *jetstream.PubAck) {
	if ack != nil && ack.Duplicate {
		e.Duplicates.Add(1)
		return
	}
	e.Appended.Add(1)
}

// Subscribe registers sub and starts its reader at its start position (or its durable
// position). Errors: delivery.ErrDuplicateSubscription, stream or consumer creation.
func (e *Pattern) Subscribe(sub *delivery.Subscription) error {
	id := sub.Identity()
	ctx, cancel := context.WithTimeout(e.life, cluster.PublishTimeout)
	defer cancel()
	p := e.Place(id)
	if err := e.ensureStream(ctx, p); err != nil {
		return err
	}
	subject := p.Subject
	var policy jetstream.DeliverPolicy
	var startSeq uint64
	var startTime *time.Time
	switch sub.Start.Kind {
	case delivery.StartFirst:
		policy = jetstream.DeliverAllPolicy
	case delivery.StartLast:
		policy = jetstream.DeliverLastPolicy
	case delivery.StartSeq:
		policy, startSeq = jetstream.DeliverByStartSequencePolicy, sub.Start.Seq
	case delivery.StartTime:
		t := sub.Start.Time
		policy, startTime = jetstream.DeliverByStartTimePolicy, &t
	default:
		// "new" is pinned to the stream's next sequence now: an ordered consumer re-created
		// between pulls would otherwise move a DeliverNew start past what arrived meanwhile.
		last, err := cluster.LastSequence(ctx, e.js, p.Stream)
		if err != nil {
			return fmt.Errorf("cluster: events-store subscription on %s: %w", id, err)
		}
		policy, startSeq = jetstream.DeliverByStartSequencePolicy, last+1
	}
	r := &reader{e: e, sub: sub, inflight: make(map[uint64]jetstream.Msg)}
	var cons jetstream.Consumer
	var err error
	if sub.DurableName == "" {
		cons, err = e.js.OrderedConsumer(ctx, p.Stream, jetstream.OrderedConsumerConfig{
			FilterSubjects: []string{subject}, DeliverPolicy: policy, OptStartSeq: startSeq, OptStartTime: startTime,
		})
	} else {
		// One live SUBSCRIBE per durable-name cluster-wide (durables.go): claimed first.
		r.durable, r.stream, r.consumer = true, p.Stream, durableConsumer(sub.DurableName, subject)
		if err := e.claim(ctx, r.consumer, sub.DurableName); err != nil {
			return err
		}
		cons, err = e.bindDurable(ctx, p.Stream, durableConfig(id, sub.DurableName, subject, policy, startSeq, startTime))
		if err != nil {
			e.release(r.consumer)
		}
	}
	if errors.Is(err, dispatch.ErrDurableSubscriptionLimit) {
		return err
	}
	if err != nil {
		return fmt.Errorf("cluster: events-store subscription on %s: %w", id, err)
	}
	if r.durable {
		r.loop = pull.New(cons, r, true, cluster.KeepAlive)
	} else {
		r.loop = pull.NewOrdered(cons, r)
	}
	sub.Owner = e
	sub.SetFeed(r)
	e.mu.Lock()
	e.readers[sub] = r // before Add: a close racing the SUBSCRIBE finds the reader to stop
	e.mu.Unlock()
	go r.loop.Run()
	if err := sub.Conn.Add(sub); err != nil {
		e.mu.Lock()
		delete(e.readers, sub)
		e.mu.Unlock()
		r.loop.Stop()
		if r.durable {
			e.release(r.consumer)
		}
		return err
	}
	return nil
}

// Detach implements delivery.Owner: the reader stops; a durable subscription's
// unacknowledged messages are NAKed so that the next resume delivers them first.
func (e *Pattern) Detach(sub *delivery.Subscription, unacked []delivery.Unacked) {
	e.mu.Lock()
	r := e.readers[sub]
	delete(e.readers, sub)
	e.mu.Unlock()
	if r == nil {
		return
	}
	r.loop.Stop()
	if !r.durable {
		return
	}
	defer func() {
		e.release(r.consumer)
		go e.markOffline(r.stream, r.consumer)
	}()
	// Unacknowledged deliveries and what was pulled and not yet delivered are NAKed in
	// stream order, so that a resume delivers them again first; confirmed (pull.GiveBack),
	// so a NAK sent just after a leader change is not dropped and its record does not
	// come back behind newer ones after the ack wait.
	_ = unacked // every one of them is in inflight
	rest := r.loop.Held()
	r.mu.Lock()
	for _, m := range r.inflight {
		rest = append(rest, m)
	}
	r.inflight = map[uint64]jetstream.Msg{}
	r.mu.Unlock()
	// (not bounded by the node's life: a node shutting down still hands them back)
	ctx, cancel := context.WithTimeout(context.Background(), cluster.AttemptTimeout)
	defer cancel()
	if err := pull.GiveBack(ctx, e.js.Conn(), r.loop.Consumer(), rest); err != nil {
		e.log.Warn("events-store durable subscription's records not handed back; they come back after the ack wait", "consumer", r.consumer, "records", len(rest), "err", err, "ack_wait", cluster.AckWait)
	}
}

// Close stops every reader and stops answering live requests.
func (e *Pattern) Close() {
	if e.liveSub != nil {
		_ = e.liveSub.Unsubscribe()
	}
	e.mu.Lock()
	rs := make([]*reader, 0, len(e.readers))
	for s, r := range e.readers {
		rs = append(rs, r)
		delete(e.readers, s)
	}
	e.mu.Unlock()
	for _, r := range rs {
		r.loop.Stop()
	}
}

// reader delivers one subscription's log through a pull loop (a pull.Handler): it pulls
// only its credit, and is the delivery.Source of its deliveries (sequences are stream
// sequences).
type reader struct {
	e       *Pattern
	sub     *delivery.Subscription
	durable bool
	loop    *pull.Loop
	// stream and consumer hold a durable subscription (its claim, durables.go).
	stream, consumer string

	mu       sync.Mutex
	out      int                      // unsettled deliveries (client ack modes); guarded by mu
	inflight map[uint64]jetstream.Msg // durable: unacknowledged by stream sequence; guarded by mu
}

// Kick implements delivery.Feed.
func (r *reader) Kick() { r.loop.Kick() }

// Done implements pull.Handler: a reader ends only when stopped (Detach, Close).
func (r *reader) Done() bool { return false }

// Credit implements pull.Handler.
func (r *reader) Credit() int {
	if !r.sub.HasCredit() {
		return 0
	}
	if r.sub.Ack == delivery.AckAuto {
		return autoCredit
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return max(r.sub.Prefetch-r.out, 0)
}

// InFlight implements pull.Handler.
func (r *reader) InFlight(dst []jetstream.Msg) []jetstream.Msg {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, m := range r.inflight {
		dst = append(dst, m)
	}
	return dst
}

// Deliver implements pull.Handler: jm goes to the subscription unless it has no room.
func (r *reader) Deliver(jm jetstream.Msg) bool {
	meta, err := jm.Metadata()
	var m *message.Message
	if err == nil {
		m, err = message.Decode(jm.Data())
	}
	if err != nil {
		if r.durable {
			_ = jm.Term()
		}
		return true
	}
	seq := meta.Sequence.Stream
	client := r.sub.Ack != delivery.AckAuto
	r.mu.Lock()
	if client && r.out >= r.sub.Prefetch {
		r.mu.Unlock()
		return false
	}
	if client {
		r.out++
		if r.durable {
			r.inflight[seq] = jm
		}
	}
	r.mu.Unlock()
	if !r.sub.Conn.DeliverSequenced(r.sub, m, r, seq) {
		r.mu.Lock()
		if client {
			r.out--
			delete(r.inflight, seq)
		}
		r.mu.Unlock()
		return false // stalled: retried on the next kick
	}
	if !client && r.durable {
		_ = jm.Ack()
	}
	return true
}

func (r *reader) take(seq uint64) jetstream.Msg {
	r.mu.Lock()
	defer r.mu.Unlock()
	m := r.inflight[seq]
	delete(r.inflight, seq)
	return m
}

// Settle implements delivery.Source.
func (r *reader) Settle(seqs []uint64, nack bool) {
	for _, s := range seqs {
		r.settle(s, nack)
	}
	r.Kick()
}

// SettleOne implements delivery.Source.
func (r *reader) SettleOne(seq uint64, nack bool) {
	r.settle(seq, nack)
	r.Kick()
}

func (r *reader) settle(seq uint64, nack bool) {
	r.mu.Lock()
	r.out = max(r.out-1, 0)
	r.mu.Unlock()
	m := r.take(seq)
	if m == nil {
		return
	}
	if nack {
		_ = m.Nak()
		return
	}
	_ = r.e.acks.Ack(m) // answered: a receipted ACK waits for it (cluster.Acks)
}
