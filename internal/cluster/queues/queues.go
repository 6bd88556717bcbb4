package queues

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
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
	"github.com/titan-broker/titan/internal/frame"
	"github.com/titan-broker/titan/internal/message"
)

// Tunables of the queues adapter.
const (
	// autoCredit is how many messages an auto-ack subscription takes per pull: a full
	// pull.MaxBatch, so a backlog is drained in batches as large as a raw JetStream consumer
	// pulls (issue 28: 32 left scenario a at 0.30 of the raw consumer, 256 at 0.82 in one
	// run). What a subscription cannot take yet stays held and kept alive by the loop.
	autoCredit = pull.MaxBatch
)

// Pattern is the queues pattern in cluster mode. Storage is WorkQueue streams per group
// (TITAN_<group>_Q_P<k>, the group's queues spread over the cluster's partitions by a hash
// of the queue: cluster.PlaceQueue; replicated Replicas times); each (group, queue) has one durable pull
// consumer with explicit acks, so a destination has one ordered stream of deliveries
// cluster-wide whichever node producer and consumer are on. A SEND returns only after the
// PubAck (stored by a quorum of replicas), so the router's RECEIPT follows it.
//
// Each node runs one pull loop per queue it has subscribers for: it pulls only as many
// messages as its subscriptions have credit for (prefetch-count), delivers round-robin
// among them, and settles ACK (Ack), NACK (Nak, NakWithDelay for redelivery-delay) and
// disconnect (Nak in consumption order). delivery-count is JetStream's NumDelivered less
// the trips to nodes that handed the message to no client (undelivered.go), as a single
// node counts; a
// message delivered max-deliveries times is published to its dead-letter queue (idempotent
// Nats-Msg-Id) and then terminated on its queue.
type Pattern struct {
	life     context.Context // the node's Context: bounds every publish and its retries
	js       jetstream.JetStream
	replicas int
	parts    int // the cluster's partition count (cluster.Node.Partitions)
	settings cluster.Settings
	log      *slog.Logger
	streams  *cluster.Streams
	placed   *cluster.PlacementCache // Place's results
	// undelivered records deliveries no client received (undelivered.go).
	undelivered *undelivered
	acks        *cluster.Acks // the node's acknowledgements

	mu        sync.Mutex
	consumers map[dest.Identity]*consumer // guarded by mu
	closed    bool                        // guarded by mu
	// handingBack is set by HandBack (under mu, read under mu where a consumer leaves
	// q.consumers): no subscription is added and every pull loop ends with its messages
	// handed back in order (handback.go).
	handingBack atomic.Bool

	// DuplicateWindow is titan.duplicate-detection.window (0: DefaultDuplicateWindow): the
	// queue streams' Nats-Msg-Id window is cluster.StreamWindow of it. DuplicateIDs (nil:
	// the stream's window only) recognises client duplicate ids beyond it. Both are set
	// before the first use.
	DuplicateWindow time.Duration
	DuplicateIDs    *cluster.Duplicates

	// Published, DeadLettered, Redelivered count queue SENDs stored, messages dead-lettered
	// and NACK redeliveries requested by this node. Duplicates counts SENDs JetStream
	// answered as duplicates of a stored message (same _AMQ_DUPL_ID, any node).
	Published, DeadLettered, Redelivered, Duplicates atomic.Uint64

	// OnDeadLetter (nil: none) is called once per message this node moved to a dead-letter
	// queue, after DeadLettered counted it, from the consumer's goroutine: the broker adds it
	// to titan_messages_dead_lettered_total. Set before first use.
	OnDeadLetter func()
}

// New returns the queues adapter over n. settings may be nil (built-in defaults).
func New(n *cluster.Node, settings cluster.Settings, log *slog.Logger) *Pattern {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	q := &Pattern{js: n.JetStream(), life: n.Context(), replicas: n.Replicas(), parts: n.Partitions(), settings: settings, log: log,
		streams: cluster.NewStreams(n.JetStream()), placed: cluster.NewPlacementCache(), consumers: make(map[dest.Identity]*consumer),
		undelivered: &undelivered{js: n.JetStream(), replicas: n.Replicas()}, acks: n.Acks()}
	q.streams.Log = log
	n.OnStepDown(q.HandBack) // handback.go
	return q
}

func (q *Pattern) settingsOf(id dest.Identity) address.Settings {
	return cluster.SettingsOf(q.settings, id)
}

// Place returns id's queue placement from its address settings (ring-size).
// Placements are cached (cluster.PlacementCache): a SEND to a queue in use builds none.
func (q *Pattern) Place(id dest.Identity) cluster.Placement {
	k := cluster.PlacementKey{ID: id, RingSize: q.settingsOf(id).RingSize, Replicas: q.replicas, Partitions: q.parts, DuplicateWindow: q.DuplicateWindow}
	return q.placed.Place(k, func() cluster.Placement {
		return cluster.PlaceQueue(id, k.RingSize, k.Replicas, k.Partitions, k.DuplicateWindow)
	})
}

// Streams returns the streams this adapter made (the pipeline's port).
func (q *Pattern) Streams() *cluster.Streams { return q.streams }

// publishMsg stores msg in p's stream and returns its PubAck, retrying through leader
// changes until ctx ends (Nats-Msg-Id makes a retry idempotent).
func (q *Pattern) publishMsg(ctx context.Context, p cluster.Placement, msg *nats.Msg) (*jetstream.PubAck, error) {
	if err := q.ensureStream(ctx, p); err != nil {
		return nil, err
	}
	return cluster.PublishRetrying(ctx, q.js, msg)
}

// Publish stores m on id's queue and returns once JetStream acknowledged it (a quorum of
// replicas stored it; with sync always, fsync'd). An already-expired message is dropped
// (dropped true). cancel (the producer's connection closed) abandons the wait. Errors:
// the publish's after cluster.PublishTimeout. A message the Persister stored (m.Sequence set) is
// not published again.
func (q *Pattern) Publish(id dest.Identity, m *message.Message, cancel <-chan struct{}) (dropped bool, err error) {
	if m.Sequence != 0 {
		return false, nil // stored by the router's store stage (Persister)
	}
	p, msg, dropped := q.Build(id, m)
	if dropped {
		return true, nil
	}
	ctx, stop := cluster.WithCancel(q.life, cluster.PublishTimeout, cancel)
	defer stop()
	if seen, err := q.DuplicateIDs.SeenMsg(ctx, msg); err != nil {
		return false, fmt.Errorf("cluster: message not stored: %w", err)
	} else if seen {
		q.Count(&jetstream.PubAck{Duplicate: true}) // stored before, beyond the stream's window
		return false, nil
	}
	ack, err := q.publishMsg(ctx, p, msg)
	if err == nil {
		err = q.DuplicateIDs.RecordMsg(ctx, msg)
	}
	if err != nil {
		q.log.Warn("queue publish failed", "queue", id.String(), "err", err)
		return false, fmt.Errorf("cluster: message not stored: %w", err)
	}
	q.Count(ack)
	return false, nil
}

// Build returns the placement of id and the JetStream message that stores m there (nil
// and dropped true when m already expired). Nats-Msg-Id is cluster.MsgID's. A scheduled message
// is a holder on the placement's holder subject that JetStream's scheduler appends to the
// queue's subject when due: the schedule has whole-second resolution, so the due time is
// rounded up (never early); expiry is checked at delivery (the holder carries no TTL).
// Any other message with an expiry carries Nats-TTL (whole seconds, rounded up).
func (q *Pattern) Build(id dest.Identity, m *message.Message) (cluster.Placement, *nats.Msg, bool) {
	p := q.Place(id)
	if m.ExpiresMs > 0 && m.ExpiresMs <= time.Now().UnixMilli() {
		return p, nil, true
	}
	msg := &nats.Msg{Subject: p.Subject, Data: message.Encode(nil, m), Header: nats.Header{}}
	msg.Header.Set(jetstream.MsgIDHeader, cluster.MsgID(id, m))
	if m.DeliverAtMs > 0 {
		at := time.UnixMilli(m.DeliverAtMs)
		if at.Nanosecond() != 0 {
			at = at.Truncate(time.Second).Add(time.Second)
		}
		var b strings.Builder
		b.WriteString(p.Holders)
		cluster.AppendToken(&b, m.ID)
		msg.Subject = b.String()
		msg.Header.Set(jetstream.ScheduleHeader, "@at "+at.UTC().Format(time.RFC3339))
		msg.Header.Set(jetstream.ScheduleTargetHeader, p.Subject)
	} else if m.ExpiresMs > 0 {
		left := m.ExpiresMs - time.Now().UnixMilli()
		msg.Header.Set("Nats-TTL", strconv.FormatInt((left+999)/1000, 10)+"s")
	}
	return p, msg, false
}

// Count records a stored publish: a duplicate (already stored under its Nats-Msg-Id) or a
// new message.
func (q *Pattern) Count(ack *jetstream.PubAck) {
	if ack != nil && ack.Duplicate {
		q.Duplicates.Add(1)
		return
	}
	q.Published.Add(1)
}

// consumerName is the durable consumer of a queue: a hash of its subject (a durable name
// cannot hold the subject's characters).
func consumerName(subject string) string {
	h := sha256.Sum256([]byte(subject))
	return "q_" + hex.EncodeToString(h[:16])
}

// Subscribe registers sub and makes this node pull id's queue for it. Errors:
// delivery.ErrDuplicateSubscription, stream or consumer creation failures.
func (q *Pattern) Subscribe(sub *delivery.Subscription) error {
	id := sub.Identity()
	ctx, cancel := context.WithTimeout(q.life, cluster.PublishTimeout)
	defer cancel()
	if err := q.ensureStream(ctx, q.Place(id)); err != nil {
		return err
	}
	sub.Owner = q
	if err := sub.Conn.Add(sub); err != nil {
		return err
	}
	for {
		q.mu.Lock()
		if q.closed || q.handingBack.Load() {
			q.mu.Unlock()
			sub.Conn.Remove(sub)
			return cluster.ErrClosed
		}
		qc := q.consumers[id]
		q.mu.Unlock()
		if qc == nil {
			var err error
			if qc, err = q.newConsumer(ctx, id); err != nil {
				sub.Conn.Remove(sub)
				return err
			}
			q.mu.Lock()
			if q.closed || q.handingBack.Load() {
				q.mu.Unlock()
				sub.Conn.Remove(sub)
				return cluster.ErrClosed
			}
			if other := q.consumers[id]; other != nil {
				qc = other
			} else {
				q.consumers[id] = qc
				go qc.run()
			}
			q.mu.Unlock()
		}
		if qc.add(sub) {
			sub.SetFeed(qc)
			qc.Kick()
			return nil
		}
		// qc is stopping (its last subscription left just now): make a new one.
		<-qc.done
	}
}

func (q *Pattern) newConsumer(ctx context.Context, id dest.Identity) (*consumer, error) {
	p := q.Place(id)
	subject := p.Subject
	cons, err := cluster.GetOrCreateConsumer(ctx, q.js, p.Stream, consumerConfig(subject)) // admin.go
	if err != nil {
		return nil, fmt.Errorf("cluster: creating consumer for %s: %w", id, err)
	}
	c := &consumer{q: q, id: id, done: make(chan struct{}),
		inflight: make(map[uint64]inflight), out: make(map[*delivery.Subscription]int)}
	c.loop = pull.New(cons, c, true, cluster.KeepAlive)
	c.loop.OnError = c.reconsume // admin.go: the consumer may have been deleted
	return c, nil
}

// Detach implements delivery.Owner: sub's unacknowledged deliveries are NAKed in
// consumption order (redelivered first, in their order) and its node stops pulling for it.
func (q *Pattern) Detach(sub *delivery.Subscription, unacked []delivery.Unacked) {
	q.mu.Lock()
	qc := q.consumers[sub.Identity()]
	q.mu.Unlock()
	for _, u := range unacked {
		if c, ok := u.Source.(*consumer); ok {
			c.release(u.Seq)
		}
	}
	if qc != nil {
		qc.remove(sub)
	}
}

// Close stops every pull loop (their held messages are NAKed) and waits for them.
func (q *Pattern) Close() {
	q.mu.Lock()
	q.closed = true
	cs := make([]*consumer, 0, len(q.consumers))
	for _, c := range q.consumers {
		cs = append(cs, c)
	}
	q.mu.Unlock()
	for _, c := range cs {
		c.mu.Lock()
		c.subs = nil
		c.mu.Unlock()
		c.loop.Stop()
		<-c.done
	}
}

// inflight is one delivery awaiting ACK/NACK (or, as consumer.head, one waiting for a
// subscription with room).
type inflight struct {
	msg   jetstream.Msg
	m     *message.Message
	count int
	sub   *delivery.Subscription
	// handed: NAKed by HandBack while the client still had it; the client's ACK still
	// acknowledges it, its NACK or detach no longer NAKs it (it may be another node's now).
	handed bool
}

// consumer is this node's pull loop of one queue (a pull.Handler). It is the
// delivery.Source of its deliveries (tags are local) and the Feed of its subscriptions.
type consumer struct {
	q    *Pattern
	id   dest.Identity
	loop *pull.Loop
	done chan struct{} // closed once the loop ended and left q.consumers

	mu       sync.Mutex
	subs     []*delivery.Subscription       // guarded by mu
	next     int                            // round-robin position; guarded by mu
	stopping bool                           // guarded by mu
	out      map[*delivery.Subscription]int // unsettled deliveries per subscription; guarded by mu
	inflight map[uint64]inflight            // by value: no allocation per delivery; guarded by mu
	tag      uint64                         // guarded by mu
	checked  time.Time                      // last reconsume check (admin.go); loop goroutine only
	// head is the message the loop offered last and no subscription took, decoded, with
	// its delivery-count: the loop offers it again after a Kick, and it is decoded and
	// counted (for a redelivery, a TITAN_UNDELIVERED read) once. Loop goroutine only.
	head inflight
}

// Kick implements delivery.Feed.
func (c *consumer) Kick() { c.loop.Kick() }

func (c *consumer) add(sub *delivery.Subscription) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stopping {
		return false
	}
	c.subs = append(c.subs, sub)
	return true
}

func (c *consumer) remove(sub *delivery.Subscription) {
	c.mu.Lock()
	for i, s := range c.subs {
		if s == sub {
			c.subs = append(c.subs[:i:i], c.subs[i+1:]...)
			break
		}
	}
	delete(c.out, sub)
	c.mu.Unlock()
	c.Kick()
}

// creditLocked is how many messages sub may take now. c.mu held.
func (c *consumer) creditLocked(sub *delivery.Subscription) int {
	if !sub.HasCredit() {
		return 0
	}
	if sub.Ack == delivery.AckAuto {
		return autoCredit
	}
	return max(sub.Prefetch-c.out[sub], 0)
}

// pickLocked returns the next subscription round-robin with credit, or nil. c.mu held.
func (c *consumer) pickLocked() *delivery.Subscription {
	for range c.subs {
		c.next %= len(c.subs)
		s := c.subs[c.next]
		c.next++
		if c.creditLocked(s) > 0 {
			return s
		}
	}
	return nil
}

// run runs the pull loop; when it ends (no subscription left, or Close) the messages it
// held are NAKed and the consumer leaves q.consumers.
// During a HandBack the messages its subscriptions have not acknowledged go back too, all
// in stream order (handback.go).
func (c *consumer) run() {
	defer close(c.done)
	c.loop.Run()
	held := c.loop.Held()
	c.q.mu.Lock()
	handBack := c.q.handingBack.Load()
	if c.q.consumers[c.id] == c {
		delete(c.q.consumers, c.id)
	}
	c.q.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), cluster.AttemptTimeout)
	defer cancel()
	if handBack {
		c.handBack(ctx, held)
		return
	}
	c.q.giveBack(ctx, nil, held, nil, false) // handback.go
}

// Done implements pull.Handler: the loop ends when no subscription is left, or at a
// HandBack (once the pull under way ended, so nothing more comes to this node).
func (c *consumer) Done() bool {
	handBack := c.q.handingBack.Load()
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.subs) == 0 || handBack {
		c.stopping = true
	}
	return c.stopping
}

// Credit implements pull.Handler.
func (c *consumer) Credit() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	credit := 0
	for _, s := range c.subs {
		credit += c.creditLocked(s)
	}
	return credit
}

// InFlight implements pull.Handler.
func (c *consumer) InFlight(dst []jetstream.Msg) []jetstream.Msg {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, f := range c.inflight {
		dst = append(dst, f.msg)
	}
	return dst
}

// Deliver implements pull.Handler: jm goes to the next subscription with credit, or is
// settled without a delivery (undecodable, expired, past max-deliveries).
func (c *consumer) Deliver(jm jetstream.Msg) bool {
	if c.head.msg != jm && !c.prepare(jm) {
		return true
	}
	m, count := c.head.m, c.head.count
	if m.ExpiresMs > 0 && m.ExpiresMs <= time.Now().UnixMilli() {
		c.head = inflight{}
		_ = jm.Term() // expired: removed, never delivered
		return true
	}
	for {
		c.mu.Lock()
		sub := c.pickLocked()
		if sub == nil {
			c.mu.Unlock()
			return false // c.head kept for the next offer
		}
		c.tag++
		tag := c.tag
		auto := sub.Ack == delivery.AckAuto
		if !auto {
			c.inflight[tag] = inflight{msg: jm, m: m, count: count, sub: sub}
			c.out[sub]++
		}
		c.mu.Unlock()
		if sub.Conn.Deliver(sub, m, c, tag, count) {
			c.head = inflight{}
			if auto {
				_ = jm.Ack()
			}
			return true
		}
		c.mu.Lock()
		if !auto {
			delete(c.inflight, tag)
			c.out[sub]--
		}
		c.mu.Unlock()
		// sub is stalled now; another may have room
	}
}

// prepare decodes jm into c.head with its delivery-count, or settles it without a
// delivery (false): undecodable, or past max-deliveries (only a redelivery can be, so a
// first delivery resolves no address settings).
func (c *consumer) prepare(jm jetstream.Msg) bool {
	c.head = inflight{}
	meta, err := jm.Metadata()
	if err != nil {
		_ = jm.Term()
		return false
	}
	m, err := message.Decode(jm.Data())
	if err != nil {
		c.q.log.Warn("undecodable queue message terminated", "queue", c.id.String(), "stream_seq", meta.Sequence.Stream)
		_ = jm.Term()
		return false
	}
	count := c.q.deliveryCount(meta) // undelivered.go
	if count > 1 {
		if mx := c.q.settingsOf(c.id).MaxDeliveries; mx > 0 && count > mx {
			c.q.deadLetter(c.id, jm, m, count-1)
			return false
		}
	}
	c.head = inflight{msg: jm, m: m, count: count}
	return true
}

// take removes the delivery tag and returns it (false when unknown).
func (c *consumer) take(tag uint64) (inflight, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	f, ok := c.inflight[tag]
	if ok {
		delete(c.inflight, tag)
		if n, ok := c.out[f.sub]; ok {
			c.out[f.sub] = n - 1
		}
	}
	return f, ok
}

// release NAKs a delivery handed back at detach (redelivered, not a rejection).
func (c *consumer) release(tag uint64) {
	if f, ok := c.take(tag); ok && !f.handed {
		_ = f.msg.Nak()
	}
}

// Settle implements delivery.Source.
func (c *consumer) Settle(seqs []uint64, nack bool) {
	for _, s := range seqs {
		c.settle(s, nack)
	}
	c.Kick()
}

// SettleOne implements delivery.Source.
func (c *consumer) SettleOne(seq uint64, nack bool) {
	c.settle(seq, nack)
	c.Kick()
}

func (c *consumer) settle(tag uint64, nack bool) {
	f, ok := c.take(tag)
	if !ok {
		return
	}
	if !nack {
		_ = c.q.acks.Ack(f.msg) // answered: a receipted ACK waits for it (cluster.Acks)
		return
	}
	if f.handed {
		return // NAKed by HandBack already
	}
	s := c.q.settingsOf(c.id)
	if s.MaxDeliveries > 0 && f.count >= s.MaxDeliveries {
		c.q.deadLetter(c.id, f.msg, f.m, f.count)
		return
	}
	c.q.Redelivered.Add(1)
	if s.RedeliveryDelay > 0 {
		_ = f.msg.NakWithDelay(s.RedeliveryDelay)
		return
	}
	_ = f.msg.Nak()
}

// deadLetter publishes a copy of m to id's dead-letter queue (default /queue/DLQ.<channel>)
// with headers saying why, idempotently (Nats-Msg-Id from the original's stream sequence),
// then terminates the original. A dead letter of a dead-letter queue is dropped.
func (q *Pattern) deadLetter(id dest.Identity, jm jetstream.Msg, m *message.Message, count int) {
	meta, _ := jm.Metadata()
	target := dest.Identity{Group: id.Group, Pattern: dest.PatternQueues, Channel: "DLQ." + id.Channel}
	if dl := q.settingsOf(id).DeadLetter; dl != "" {
		if d, err := dest.Parse(dl, dest.PatternQueues); err == nil && d.Pattern == dest.PatternQueues {
			target = dest.IdentityOf(id.Group, d)
		}
	}
	if target == id || len(id.Channel) > 4 && id.Channel[:4] == "DLQ." {
		q.log.Warn("dead letter from a dead-letter queue dropped", "queue", id.String())
		_ = jm.Term()
		return
	}
	dl := &message.Message{
		ID: m.ID, Group: m.Group, Destination: target.Destination(), Body: m.Body,
		TimestampMs: m.TimestampMs, Persistent: m.Persistent,
		Headers: append(append(make([]frame.Header, 0, len(m.Headers)+3), m.Headers...),
			frame.Header{Key: "dlq-original-destination", Value: m.Destination},
			frame.Header{Key: "dlq-reason", Value: "max-deliveries"},
			frame.Header{Key: "dlq-delivery-count", Value: strconv.Itoa(count)}),
	}
	tp := q.Place(target)
	msg := &nats.Msg{Subject: tp.Subject, Data: message.Encode(nil, dl), Header: nats.Header{}}
	seq := uint64(0)
	if meta != nil {
		seq = meta.Sequence.Stream
	}
	msg.Header.Set(jetstream.MsgIDHeader, "dlq:"+q.Place(id).Stream+":"+strconv.FormatUint(seq, 10))
	ctx, cancel := context.WithTimeout(q.life, cluster.PublishTimeout)
	defer cancel()
	if _, err := q.publishMsg(ctx, tp, msg); err != nil {
		q.log.Error("dead letter not stored; the message stays on its queue", "queue", id.String(), "err", err)
		_ = jm.Nak()
		return
	}
	_ = jm.Term()
	q.DeadLettered.Add(1)
	if q.OnDeadLetter != nil {
		q.OnDeadLetter()
	}
}

// ensureStream creates (or confirms) the stream of placement p.
func (q *Pattern) ensureStream(ctx context.Context, p cluster.Placement) error {
	return q.streams.Ensure(ctx, p.Config)
}
