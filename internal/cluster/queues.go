package cluster

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
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
	"github.com/titan-broker/titan/internal/delivery"
	"github.com/titan-broker/titan/internal/dest"
	"github.com/titan-broker/titan/internal/frame"
	"github.com/titan-broker/titan/internal/message"
)

// Settings gives a queue its address settings (max-deliveries, dead-letter,
// redelivery-delay); implemented by config.Resolver.
type Settings interface {
	Settings(id dest.Identity) address.Settings
}

// Tunables of the queues adapter.
const (
	// PublishTimeout bounds the wait for a PubAck, retries through a leader change
	// included (crash elections take 4-9 s).
	PublishTimeout = 30 * time.Second
	// AckWait is the consumer's ack wait: a delivery not acknowledged nor kept alive within
	// it is redelivered (a node that died holding it). Live deliveries are kept alive with
	// +WPI every AckWait/3, since STOMP has no ack timeout.
	AckWait = 30 * time.Second
	// autoCredit is how many messages an auto-ack subscription takes per pull.
	autoCredit = 32
	// maxBatch bounds one pull request.
	maxBatch = 256
	// attemptTimeout bounds one JetStream API request before it is retried.
	attemptTimeout = 3 * time.Second
	// publishAttemptTimeout bounds one publish attempt before it is retried.
	publishAttemptTimeout = 5 * time.Second
)

// Queues is the queues pattern in cluster mode. Storage is one WorkQueue stream per group
// (TITAN_<group>_Q, replicated Replicas times); each (group, queue) has one durable pull
// consumer with explicit acks, so a destination has one ordered stream of deliveries
// cluster-wide whichever node producer and consumer are on. A SEND returns only after the
// PubAck (stored by a quorum of replicas), so the router's RECEIPT follows it.
//
// Each node runs one pull loop per queue it has subscribers for: it pulls only as many
// messages as its subscriptions have credit for (prefetch-count), delivers round-robin
// among them, and settles ACK (Ack), NACK (Nak, NakWithDelay for redelivery-delay) and
// disconnect (Nak in consumption order). delivery-count is JetStream's NumDelivered; a
// message delivered max-deliveries times is published to its dead-letter queue (idempotent
// Nats-Msg-Id) and then terminated on its queue.
type Queues struct {
	js       jetstream.JetStream
	replicas int
	settings Settings
	log      *slog.Logger

	streams   *streams
	mu        sync.Mutex
	consumers map[dest.Identity]*queueConsumer
	closed    bool

	// DuplicateWindow is the queue streams' Nats-Msg-Id window (0: DefaultDuplicateWindow);
	// set before the first use (the broker sets titan.duplicate-detection.window).
	DuplicateWindow time.Duration

	// Published, DeadLettered, Redelivered count queue SENDs stored, messages dead-lettered
	// and NACK redeliveries requested by this node. Duplicates counts SENDs JetStream
	// answered as duplicates of a stored message (same _AMQ_DUPL_ID, any node).
	Published, DeadLettered, Redelivered, Duplicates atomic.Uint64
}

// NewQueues returns the queues adapter over n. settings may be nil (built-in defaults).
func NewQueues(n *Node, settings Settings, log *slog.Logger) *Queues {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Queues{js: n.js, replicas: n.cfg.Replicas, settings: settings, log: log,
		streams: &streams{js: n.js}, consumers: make(map[dest.Identity]*queueConsumer)}
}

func (q *Queues) settingsOf(id dest.Identity) address.Settings {
	if q.settings == nil {
		return address.Defaults(id)
	}
	return q.settings.Settings(id)
}

// retryable reports whether a JetStream error may pass with a new leader or quorum.
func retryable(err error) bool {
	return errors.Is(err, nats.ErrNoResponders) || errors.Is(err, jetstream.ErrNoStreamResponse) ||
		errors.Is(err, nats.ErrTimeout) || errors.Is(err, context.DeadlineExceeded) ||
		errors.Is(err, jetstream.ErrJetStreamNotEnabled) || errors.Is(err, nats.ErrConnectionReconnecting) ||
		isAPIUnavailable(err)
}

func isAPIUnavailable(err error) bool {
	var apiErr *jetstream.APIError
	return errors.As(err, &apiErr) && (apiErr.Code == 503 || apiErr.ErrorCode == 10008)
}

// ensureStream creates (or confirms) the stream of placement p (semantics.go).
func (q *Queues) ensureStream(ctx context.Context, p placement) error {
	return q.streams.ensure(ctx, p.cfg)
}

// streams creates streams once per node.
type streams struct {
	js       jetstream.JetStream
	createMu sync.Mutex // serializes creation; the others then find it made
	mu       sync.Mutex
	made     map[string]bool
}

// ensure creates the stream cfg unless this node saw it made. Concurrent creations of one
// stream from several nodes can leave all but the first request unanswered: every attempt
// is bounded, and each first looks the stream up.
func (s *streams) ensure(ctx context.Context, cfg jetstream.StreamConfig) error {
	s.mu.Lock()
	ok := s.made[cfg.Name]
	s.mu.Unlock()
	if ok {
		return nil
	}
	s.createMu.Lock()
	defer s.createMu.Unlock()
	s.mu.Lock()
	ok = s.made[cfg.Name]
	s.mu.Unlock()
	if ok {
		return nil
	}
	for {
		actx, cancel := context.WithTimeout(ctx, attemptTimeout)
		st, err := s.js.Stream(actx, cfg.Name)
		if errors.Is(err, jetstream.ErrStreamNotFound) {
			_, err = s.js.CreateStream(actx, cfg)
			if errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
				err = nil
			}
		} else if err == nil {
			err = reconcile(actx, s.js, st.CachedInfo().Config, cfg)
		}
		cancel()
		if err == nil {
			break
		}
		if !retryable(err) || ctx.Err() != nil {
			return fmt.Errorf("cluster: creating stream %s: %w", cfg.Name, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	s.mu.Lock()
	if s.made == nil {
		s.made = make(map[string]bool)
	}
	s.made[cfg.Name] = true
	s.mu.Unlock()
	return nil
}

// publishMsg stores msg in p's stream and returns its PubAck, retrying through leader
// changes until ctx ends (Nats-Msg-Id makes a retry idempotent).
func (q *Queues) publishMsg(ctx context.Context, p placement, msg *nats.Msg) (*jetstream.PubAck, error) {
	if err := q.ensureStream(ctx, p); err != nil {
		return nil, err
	}
	return publishRetrying(ctx, q.js, msg)
}

// publishRetrying publishes msg, retrying through leader changes until ctx ends.
func publishRetrying(ctx context.Context, js jetstream.JetStream, msg *nats.Msg) (*jetstream.PubAck, error) {
	for {
		// Each attempt is bounded: a publish whose stream leader died after receiving it
		// gets no answer; the retry (same Nats-Msg-Id) is stored once.
		actx, cancel := context.WithTimeout(ctx, publishAttemptTimeout)
		ack, err := js.PublishMsg(actx, msg)
		cancel()
		if err == nil {
			return ack, nil
		}
		if !retryable(err) || ctx.Err() != nil {
			return nil, err
		}
		select {
		case <-ctx.Done():
			return nil, err
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// Publish stores m on id's queue and returns once JetStream acknowledged it (a quorum of
// replicas stored it; with sync always, fsync'd). An already-expired message is dropped
// (dropped true). cancel (the producer's connection closed) abandons the wait. Errors:
// the publish's after PublishTimeout. A message the Persister stored (m.Sequence set) is
// not published again.
func (q *Queues) Publish(id dest.Identity, m *message.Message, cancel <-chan struct{}) (dropped bool, err error) {
	if m.Sequence != 0 {
		return false, nil // stored by the router's store stage (Persister)
	}
	p, msg, dropped := q.build(id, m)
	if dropped {
		return true, nil
	}
	ctx, stop := context.WithTimeout(context.Background(), PublishTimeout)
	defer stop()
	if cancel != nil {
		go func() {
			select {
			case <-cancel:
				stop()
			case <-ctx.Done():
			}
		}()
	}
	ack, err := q.publishMsg(ctx, p, msg)
	if err != nil {
		q.log.Warn("queue publish failed", "queue", id.String(), "err", err)
		return false, fmt.Errorf("cluster: message not stored: %w", err)
	}
	q.count(ack)
	return false, nil
}

// build returns the placement of id and the JetStream message that stores m there (nil
// and dropped true when m already expired). Nats-Msg-Id is msgID's. A scheduled message
// is a holder on the placement's holder subject that JetStream's scheduler appends to the
// queue's subject when due: the schedule has whole-second resolution, so the due time is
// rounded up (never early); expiry is checked at delivery (the holder carries no TTL).
// Any other message with an expiry carries Nats-TTL (whole seconds, rounded up).
func (q *Queues) build(id dest.Identity, m *message.Message) (placement, *nats.Msg, bool) {
	p := q.place(id)
	if m.ExpiresMs > 0 && m.ExpiresMs <= time.Now().UnixMilli() {
		return p, nil, true
	}
	msg := &nats.Msg{Subject: p.subject, Data: message.Encode(nil, m), Header: nats.Header{}}
	msg.Header.Set(jetstream.MsgIDHeader, msgID(id, m))
	if m.DeliverAtMs > 0 {
		at := time.UnixMilli(m.DeliverAtMs)
		if at.Nanosecond() != 0 {
			at = at.Truncate(time.Second).Add(time.Second)
		}
		var b strings.Builder
		b.WriteString(p.holders)
		appendToken(&b, m.ID)
		msg.Subject = b.String()
		msg.Header.Set(jetstream.ScheduleHeader, "@at "+at.UTC().Format(time.RFC3339))
		msg.Header.Set(jetstream.ScheduleTargetHeader, p.subject)
	} else if m.ExpiresMs > 0 {
		left := m.ExpiresMs - time.Now().UnixMilli()
		msg.Header.Set("Nats-TTL", strconv.FormatInt((left+999)/1000, 10)+"s")
	}
	return p, msg, false
}

// count records a stored publish: a duplicate (already stored under its Nats-Msg-Id) or a
// new message.
func (q *Queues) count(ack *jetstream.PubAck) {
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
func (q *Queues) Subscribe(sub *delivery.Subscription) error {
	id := sub.Identity()
	ctx, cancel := context.WithTimeout(context.Background(), PublishTimeout)
	defer cancel()
	if err := q.ensureStream(ctx, q.place(id)); err != nil {
		return err
	}
	sub.Owner = q
	if err := sub.Conn.Add(sub); err != nil {
		return err
	}
	for {
		q.mu.Lock()
		if q.closed {
			q.mu.Unlock()
			sub.Conn.Remove(sub)
			return errors.New("cluster: shutting down")
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

func (q *Queues) newConsumer(ctx context.Context, id dest.Identity) (*queueConsumer, error) {
	p := q.place(id)
	subject := p.subject
	cfg := consumerConfig(subject) // admin.go
	var cons jetstream.Consumer
	for {
		actx, cancel := context.WithTimeout(ctx, attemptTimeout)
		var err error
		cons, err = q.js.Consumer(actx, p.stream, cfg.Durable)
		if errors.Is(err, jetstream.ErrConsumerNotFound) {
			cons, err = q.js.CreateConsumer(actx, p.stream, cfg)
			if errors.Is(err, jetstream.ErrConsumerExists) {
				cons, err = q.js.Consumer(actx, p.stream, cfg.Durable)
			}
		}
		cancel()
		if err == nil {
			break
		}
		if !retryable(err) || ctx.Err() != nil {
			return nil, fmt.Errorf("cluster: creating consumer for %s: %w", id, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	return &queueConsumer{q: q, id: id, cons: cons, kick: make(chan struct{}, 1), done: make(chan struct{}),
		inflight: make(map[uint64]*inflight), out: make(map[*delivery.Subscription]int)}, nil
}

// Detach implements delivery.Owner: sub's unacknowledged deliveries are NAKed in
// consumption order (redelivered first, in their order) and its node stops pulling for it.
func (q *Queues) Detach(sub *delivery.Subscription, unacked []delivery.Unacked) {
	q.mu.Lock()
	qc := q.consumers[sub.Identity()]
	q.mu.Unlock()
	for _, u := range unacked {
		if c, ok := u.Source.(*queueConsumer); ok {
			c.release(u.Seq)
		}
	}
	if qc != nil {
		qc.remove(sub)
	}
}

// Close stops every pull loop (their held messages are NAKed) and waits for them.
func (q *Queues) Close() {
	q.mu.Lock()
	q.closed = true
	cs := make([]*queueConsumer, 0, len(q.consumers))
	for _, c := range q.consumers {
		cs = append(cs, c)
	}
	q.mu.Unlock()
	for _, c := range cs {
		c.mu.Lock()
		c.subs = nil
		c.mu.Unlock()
		c.Kick()
		<-c.done
	}
}

// inflight is one delivery awaiting ACK/NACK.
type inflight struct {
	msg   jetstream.Msg
	m     *message.Message
	count int
	sub   *delivery.Subscription
}

// queueConsumer is this node's pull loop of one queue. It is the delivery.Source of its
// deliveries (tags are local) and the Feed of its subscriptions.
type queueConsumer struct {
	q    *Queues
	id   dest.Identity
	cons jetstream.Consumer
	kick chan struct{}
	done chan struct{}

	mu       sync.Mutex
	subs     []*delivery.Subscription
	next     int
	stopping bool
	out      map[*delivery.Subscription]int // unsettled deliveries per subscription
	inflight map[uint64]*inflight
	tag      uint64
	held     []jetstream.Msg // pulled, not yet delivered (no credit at arrival)
	checked  time.Time       // last reconsume check (admin.go); run only
}

// Kick implements delivery.Feed.
func (c *queueConsumer) Kick() {
	select {
	case c.kick <- struct{}{}:
	default:
	}
}

func (c *queueConsumer) add(sub *delivery.Subscription) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stopping {
		return false
	}
	c.subs = append(c.subs, sub)
	return true
}

func (c *queueConsumer) remove(sub *delivery.Subscription) {
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

// creditLocked is how many messages sub may take now.
func (c *queueConsumer) creditLocked(sub *delivery.Subscription) int {
	if !sub.HasCredit() {
		return 0
	}
	if sub.Ack == delivery.AckAuto {
		return autoCredit
	}
	return max(sub.Prefetch-c.out[sub], 0)
}

// pickLocked returns the next subscription round-robin with credit, or nil.
func (c *queueConsumer) pickLocked() *delivery.Subscription {
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

// run is the pull loop: deliver what is held, then pull as much as the subscriptions have
// credit for; wait for a kick when none has. Ends when no subscription is left.
func (c *queueConsumer) run() {
	defer close(c.done)
	keepAlive := time.NewTicker(AckWait / 3)
	defer keepAlive.Stop()
	for {
		c.mu.Lock()
		if len(c.subs) == 0 {
			c.stopping = true
			held := c.held
			c.held = nil
			c.mu.Unlock()
			for _, m := range held {
				_ = m.Nak()
			}
			c.q.mu.Lock()
			if c.q.consumers[c.id] == c {
				delete(c.q.consumers, c.id)
			}
			c.q.mu.Unlock()
			return
		}
		credit := 0
		for _, s := range c.subs {
			credit += c.creditLocked(s)
		}
		c.mu.Unlock()
		c.deliverHeld()
		c.mu.Lock()
		nheld := len(c.held)
		c.mu.Unlock()
		if credit == 0 || nheld > 0 {
			select {
			case <-c.kick:
			case <-keepAlive.C:
				c.keepAlive()
			}
			continue
		}
		batch, err := c.cons.Fetch(min(credit, maxBatch), jetstream.FetchMaxWait(time.Second))
		if err != nil {
			c.q.log.Debug("pull failed", "queue", c.id.String(), "err", err)
			c.reconsume(err) // admin.go: the consumer may have been deleted
			select {
			case <-c.kick:
			case <-time.After(250 * time.Millisecond):
			}
			continue
		}
		for m := range batch.Messages() {
			c.mu.Lock()
			c.held = append(c.held, m)
			c.mu.Unlock()
			c.deliverHeld()
		}
		if err := batch.Error(); err != nil {
			c.reconsume(err) // admin.go: the consumer may have been deleted
		}
		select {
		case <-keepAlive.C:
			c.keepAlive()
		default:
		}
	}
}

// keepAlive sends +WPI for every unsettled delivery so that AckWait never redelivers a
// message a live client holds.
func (c *queueConsumer) keepAlive() {
	c.mu.Lock()
	msgs := make([]jetstream.Msg, 0, len(c.inflight))
	for _, f := range c.inflight {
		msgs = append(msgs, f.msg)
	}
	c.mu.Unlock()
	for _, m := range msgs {
		_ = m.InProgress()
	}
}

// deliverHeld delivers held messages in order while a subscription has credit.
func (c *queueConsumer) deliverHeld() {
	for {
		c.mu.Lock()
		if len(c.held) == 0 {
			c.mu.Unlock()
			return
		}
		jm := c.held[0]
		meta, err := jm.Metadata()
		if err != nil {
			c.held = c.held[1:]
			c.mu.Unlock()
			_ = jm.Term()
			continue
		}
		m, err := message.Decode(jm.Data())
		if err != nil {
			c.held = c.held[1:]
			c.mu.Unlock()
			c.q.log.Warn("undecodable queue message terminated", "queue", c.id.String(), "stream_seq", meta.Sequence.Stream)
			_ = jm.Term()
			continue
		}
		if m.ExpiresMs > 0 && m.ExpiresMs <= time.Now().UnixMilli() {
			c.held = c.held[1:]
			c.mu.Unlock()
			_ = jm.Term() // expired: removed, never delivered
			continue
		}
		count := int(meta.NumDelivered)
		if mx := c.q.settingsOf(c.id).MaxDeliveries; mx > 0 && count > mx {
			c.held = c.held[1:]
			c.mu.Unlock()
			c.q.deadLetter(c.id, jm, m, count-1)
			continue
		}
		sub := c.pickLocked()
		if sub == nil {
			c.mu.Unlock()
			return
		}
		c.held = c.held[1:]
		c.tag++
		tag := c.tag
		auto := sub.Ack == delivery.AckAuto
		if !auto {
			c.inflight[tag] = &inflight{msg: jm, m: m, count: count, sub: sub}
			c.out[sub]++
		}
		c.mu.Unlock()
		if !sub.Conn.Deliver(sub, m, c, tag, count) {
			c.mu.Lock()
			if !auto {
				delete(c.inflight, tag)
				c.out[sub]--
			}
			c.held = append([]jetstream.Msg{jm}, c.held...)
			c.mu.Unlock()
			continue // sub is stalled now; another may have room
		}
		if auto {
			_ = jm.Ack()
		}
	}
}

// take removes the delivery tag and returns it (nil when unknown).
func (c *queueConsumer) take(tag uint64) *inflight {
	c.mu.Lock()
	defer c.mu.Unlock()
	f := c.inflight[tag]
	if f != nil {
		delete(c.inflight, tag)
		if n, ok := c.out[f.sub]; ok {
			c.out[f.sub] = n - 1
		}
	}
	return f
}

// release NAKs a delivery handed back at detach (redelivered, not a rejection).
func (c *queueConsumer) release(tag uint64) {
	if f := c.take(tag); f != nil {
		_ = f.msg.Nak()
	}
}

// Settle implements delivery.Source.
func (c *queueConsumer) Settle(seqs []uint64, nack bool) {
	for _, s := range seqs {
		c.settle(s, nack)
	}
	c.Kick()
}

// SettleOne implements delivery.Source.
func (c *queueConsumer) SettleOne(seq uint64, nack bool) {
	c.settle(seq, nack)
	c.Kick()
}

func (c *queueConsumer) settle(tag uint64, nack bool) {
	f := c.take(tag)
	if f == nil {
		return
	}
	if !nack {
		_ = f.msg.Ack()
		return
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
func (q *Queues) deadLetter(id dest.Identity, jm jetstream.Msg, m *message.Message, count int) {
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
	tp := q.place(target)
	msg := &nats.Msg{Subject: tp.subject, Data: message.Encode(nil, dl), Header: nats.Header{}}
	seq := uint64(0)
	if meta != nil {
		seq = meta.Sequence.Stream
	}
	msg.Header.Set(jetstream.MsgIDHeader, "dlq:"+q.place(id).stream+":"+strconv.FormatUint(seq, 10))
	ctx, cancel := context.WithTimeout(context.Background(), PublishTimeout)
	defer cancel()
	if _, err := q.publishMsg(ctx, tp, msg); err != nil {
		q.log.Error("dead letter not stored; the message stays on its queue", "queue", id.String(), "err", err)
		_ = jm.Nak()
		return
	}
	_ = jm.Term()
	q.DeadLettered.Add(1)
}
