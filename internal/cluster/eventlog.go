package cluster

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/titan-broker/titan/internal/delivery"
	"github.com/titan-broker/titan/internal/dest"
	"github.com/titan-broker/titan/internal/message"
)

// EventsStore is the events-store pattern in cluster mode: one Limits stream per group
// (TITAN_<group>_ES, subjects t.<group>.es.>), a log per channel subject. A SEND returns
// after the PubAck; the MESSAGE's sequence is the stream sequence (monotonic per channel,
// not dense: the stream is shared by the group's channels). A subscription reads through
// its own consumer filtered on its channel: start-position new/first/last/<seq>/time:/delta:
// map to deliver policies New/All/Last/ByStartSequence/ByStartTime. Without durable-name
// it is an ordered consumer (ephemeral, no acks); with one, a durable consumer
// (es_<hash(durable-name, subject)>, explicit acks, replicated) that a later SUBSCRIBE with
// the same durable-name resumes after the last acknowledged message (its start-position
// is then ignored).
type EventsStore struct {
	js       jetstream.JetStream
	replicas int
	streams  *streams
	log      *slog.Logger

	mu      sync.Mutex
	readers map[*delivery.Subscription]*esReader

	// Settings gives a log its retention (address settings retention-max-messages,
	// -bytes, -age; semantics.go); nil: none. DuplicateWindow is the streams' Nats-Msg-Id
	// window (0: DefaultDuplicateWindow). Both are set before the first use.
	Settings        Settings
	DuplicateWindow time.Duration

	// Appended counts SENDs stored; Duplicates counts SENDs JetStream answered as
	// duplicates of a stored message (same _AMQ_DUPL_ID, any node).
	Appended, Duplicates atomic.Uint64
}

// NewEventsStore returns the events-store adapter over n.
func NewEventsStore(n *Node, log *slog.Logger) *EventsStore {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &EventsStore{js: n.js, replicas: n.cfg.Replicas, streams: &streams{js: n.js}, log: log,
		readers: make(map[*delivery.Subscription]*esReader)}
}

func (e *EventsStore) ensureStream(ctx context.Context, p placement) error {
	return e.streams.ensure(ctx, p.cfg)
}

// Publish appends m to id's log and returns after the PubAck. Errors: the publish's after
// PublishTimeout, or when cancel closes. A message the Persister stored (m.Sequence set)
// is not appended again.
func (e *EventsStore) Publish(id dest.Identity, m *message.Message, cancel <-chan struct{}) (dropped bool, err error) {
	if m.Sequence != 0 {
		return false, nil // stored by the router's store stage (Persister)
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
	p, msg := e.build(id, m)
	if err := e.ensureStream(ctx, p); err != nil {
		return false, err
	}
	ack, err := publishRetrying(ctx, e.js, msg)
	if err != nil {
		e.log.Warn("events-store publish failed", "log", id.String(), "err", err)
		return false, fmt.Errorf("cluster: message not stored: %w", err)
	}
	e.count(ack)
	return false, nil
}

// build returns id's placement and the JetStream message that appends m to its log.
func (e *EventsStore) build(id dest.Identity, m *message.Message) (placement, *nats.Msg) {
	p := e.place(id)
	msg := &nats.Msg{Subject: p.subject, Data: message.Encode(nil, m), Header: nats.Header{}}
	msg.Header.Set(jetstream.MsgIDHeader, msgID(id, m))
	return p, msg
}

// count records a stored append: a duplicate or a new message.
func (e *EventsStore) count(ack *jetstream.PubAck) {
	if ack != nil && ack.Duplicate {
		e.Duplicates.Add(1)
		return
	}
	e.Appended.Add(1)
}

// Subscribe registers sub and starts its reader at its start position (or its durable
// position). Errors: delivery.ErrDuplicateSubscription, stream or consumer creation.
func (e *EventsStore) Subscribe(sub *delivery.Subscription) error {
	id := sub.Identity()
	ctx, cancel := context.WithTimeout(context.Background(), PublishTimeout)
	defer cancel()
	p := e.place(id)
	if err := e.ensureStream(ctx, p); err != nil {
		return err
	}
	subject := p.subject
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
		last, err := lastSequence(ctx, e.js, p.stream)
		if err != nil {
			return fmt.Errorf("cluster: events-store subscription on %s: %w", id, err)
		}
		policy, startSeq = jetstream.DeliverByStartSequencePolicy, last+1
	}
	r := &esReader{e: e, sub: sub, kick: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{}),
		inflight: make(map[uint64]jetstream.Msg)}
	var err error
	if sub.DurableName == "" {
		r.cons, err = e.js.OrderedConsumer(ctx, p.stream, jetstream.OrderedConsumerConfig{
			FilterSubjects: []string{subject}, DeliverPolicy: policy, OptStartSeq: startSeq, OptStartTime: startTime,
		})
	} else {
		r.durable = true
		h := sha256.Sum256([]byte(sub.DurableName + "\x00" + subject))
		cfg := jetstream.ConsumerConfig{
			Durable: "es_" + hex.EncodeToString(h[:16]), FilterSubject: subject,
			DeliverPolicy: policy, OptStartSeq: startSeq, OptStartTime: startTime,
			AckPolicy: jetstream.AckExplicitPolicy, AckWait: AckWait, MaxDeliver: -1,
		}
		r.cons, err = getOrCreateConsumer(ctx, e.js, p.stream, cfg)
	}
	if err != nil {
		return fmt.Errorf("cluster: events-store subscription on %s: %w", id, err)
	}
	sub.Owner = e
	sub.SetFeed(r)
	e.mu.Lock()
	e.readers[sub] = r // before Add: a close racing the SUBSCRIBE finds the reader to stop
	e.mu.Unlock()
	go r.run()
	if err := sub.Conn.Add(sub); err != nil {
		e.mu.Lock()
		delete(e.readers, sub)
		e.mu.Unlock()
		close(r.stop)
		<-r.done
		return err
	}
	return nil
}

// getOrCreateConsumer returns the durable consumer cfg.Durable, creating it when missing
// (an existing one keeps its position and configuration). Attempts are bounded and retried.
func getOrCreateConsumer(ctx context.Context, js jetstream.JetStream, stream string, cfg jetstream.ConsumerConfig) (jetstream.Consumer, error) {
	for {
		actx, cancel := context.WithTimeout(ctx, attemptTimeout)
		cons, err := js.Consumer(actx, stream, cfg.Durable)
		if errors.Is(err, jetstream.ErrConsumerNotFound) {
			cons, err = js.CreateConsumer(actx, stream, cfg)
			if errors.Is(err, jetstream.ErrConsumerExists) {
				cons, err = js.Consumer(actx, stream, cfg.Durable)
			}
		}
		cancel()
		if err == nil {
			return cons, nil
		}
		if !retryable(err) || ctx.Err() != nil {
			return nil, err
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// Detach implements delivery.Owner: the reader stops; a durable subscription's
// unacknowledged messages are NAKed so that the next resume delivers them first.
func (e *EventsStore) Detach(sub *delivery.Subscription, unacked []delivery.Unacked) {
	e.mu.Lock()
	r := e.readers[sub]
	delete(e.readers, sub)
	e.mu.Unlock()
	if r == nil {
		return
	}
	close(r.stop)
	<-r.done
	if !r.durable {
		return
	}
	// Unacknowledged deliveries and what was pulled and not yet delivered are NAKed in
	// stream order, so that a resume delivers them again.
	_ = unacked // every one of them is in inflight
	r.mu.Lock()
	rest := make([]jetstream.Msg, 0, len(r.inflight)+len(r.held))
	for _, m := range r.inflight {
		rest = append(rest, m)
	}
	rest = append(rest, r.held...)
	r.inflight, r.held = map[uint64]jetstream.Msg{}, nil
	r.mu.Unlock()
	slices.SortFunc(rest, func(a, b jetstream.Msg) int { return cmp.Compare(streamSeq(a), streamSeq(b)) })
	for _, m := range rest {
		_ = m.Nak()
	}
}

func streamSeq(m jetstream.Msg) uint64 {
	if meta, err := m.Metadata(); err == nil {
		return meta.Sequence.Stream
	}
	return 0
}

// Close stops every reader.
func (e *EventsStore) Close() {
	e.mu.Lock()
	rs := make([]*esReader, 0, len(e.readers))
	for s, r := range e.readers {
		rs = append(rs, r)
		delete(e.readers, s)
	}
	e.mu.Unlock()
	for _, r := range rs {
		close(r.stop)
		<-r.done
	}
}

// esReader delivers one subscription's log: it pulls only its credit, holds a message its
// connection refused until a kick, and is the delivery.Source of its deliveries (sequences
// are stream sequences).
type esReader struct {
	e       *EventsStore
	sub     *delivery.Subscription
	cons    jetstream.Consumer
	durable bool
	kick    chan struct{}
	stop    chan struct{}
	done    chan struct{}

	mu       sync.Mutex
	out      int                      // unsettled deliveries (client ack modes)
	inflight map[uint64]jetstream.Msg // durable: unacknowledged by stream sequence
	held     []jetstream.Msg
}

// Kick implements delivery.Feed.
func (r *esReader) Kick() {
	select {
	case r.kick <- struct{}{}:
	default:
	}
}

func (r *esReader) credit() int {
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

func (r *esReader) run() {
	defer close(r.done)
	keepAlive := time.NewTicker(AckWait / 3)
	defer keepAlive.Stop()
	for {
		select {
		case <-r.stop:
			return
		default:
		}
		r.deliverHeld()
		r.mu.Lock()
		nheld := len(r.held)
		r.mu.Unlock()
		credit := r.credit()
		if credit == 0 || nheld > 0 {
			select {
			case <-r.stop:
				return
			case <-r.kick:
			case <-keepAlive.C:
				r.keepAlive()
			}
			continue
		}
		batch, err := r.cons.Fetch(min(credit, maxBatch), jetstream.FetchMaxWait(time.Second))
		if err != nil {
			select {
			case <-r.stop:
				return
			case <-time.After(250 * time.Millisecond):
			}
			continue
		}
		for m := range batch.Messages() {
			r.mu.Lock()
			r.held = append(r.held, m)
			r.mu.Unlock()
			r.deliverHeld()
		}
		select {
		case <-keepAlive.C:
			r.keepAlive()
		default:
		}
	}
}

func (r *esReader) keepAlive() {
	if !r.durable {
		return
	}
	r.mu.Lock()
	msgs := make([]jetstream.Msg, 0, len(r.inflight))
	for _, m := range r.inflight {
		msgs = append(msgs, m)
	}
	r.mu.Unlock()
	for _, m := range msgs {
		_ = m.InProgress()
	}
}

// deliverHeld delivers held messages in order while the subscription takes them.
func (r *esReader) deliverHeld() {
	for {
		r.mu.Lock()
		if len(r.held) == 0 {
			r.mu.Unlock()
			return
		}
		jm := r.held[0]
		r.mu.Unlock()
		meta, err := jm.Metadata()
		var m *message.Message
		if err == nil {
			m, err = message.Decode(jm.Data())
		}
		if err != nil {
			r.mu.Lock()
			r.held = r.held[1:]
			r.mu.Unlock()
			if r.durable {
				_ = jm.Term()
			}
			continue
		}
		seq := meta.Sequence.Stream
		client := r.sub.Ack != delivery.AckAuto
		r.mu.Lock()
		if client && r.out >= r.sub.Prefetch {
			r.mu.Unlock()
			return
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
			return // stalled: retried on the next kick
		}
		r.mu.Lock()
		r.held = r.held[1:]
		r.mu.Unlock()
		if !client && r.durable {
			_ = jm.Ack()
		}
	}
}

func (r *esReader) take(seq uint64) jetstream.Msg {
	r.mu.Lock()
	defer r.mu.Unlock()
	m := r.inflight[seq]
	delete(r.inflight, seq)
	return m
}

// Settle implements delivery.Source.
func (r *esReader) Settle(seqs []uint64, nack bool) {
	for _, s := range seqs {
		r.settle(s, nack)
	}
	r.Kick()
}

// SettleOne implements delivery.Source.
func (r *esReader) SettleOne(seq uint64, nack bool) {
	r.settle(seq, nack)
	r.Kick()
}

func (r *esReader) settle(seq uint64, nack bool) {
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
	_ = m.Ack()
}

// lastSequence returns stream's last sequence (bounded attempts, retried).
func lastSequence(ctx context.Context, js jetstream.JetStream, stream string) (uint64, error) {
	for {
		actx, cancel := context.WithTimeout(ctx, attemptTimeout)
		st, err := js.Stream(actx, stream)
		var info *jetstream.StreamInfo
		if err == nil {
			info, err = st.Info(actx)
		}
		cancel()
		if err == nil {
			return info.State.LastSeq, nil
		}
		if !retryable(err) || ctx.Err() != nil {
			return 0, err
		}
		time.Sleep(100 * time.Millisecond)
	}
}
