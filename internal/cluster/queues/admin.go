package queues

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/titan-broker/titan/internal/cluster"
	"github.com/titan-broker/titan/internal/dest"
	"github.com/titan-broker/titan/internal/message"
)

// This file holds the operator actions on cluster mode's queues (titan queue
// create/delete/pause/resume/purge/browse/redrive and the monitor API behind them): they
// act on JetStream — the queue's subject in its stream and its durable consumer — so any
// node acts for the whole cluster.

// Errors of the operator actions.
var (
	// ErrNoQueue: JetStream holds neither messages nor a consumer for the queue.
	ErrNoQueue = errors.New("cluster: no such queue")
	// ErrQueueNotEmpty: a delete without force of a queue that holds messages.
	ErrQueueNotEmpty = errors.New("cluster: queue not empty")
)

// maxHolderScan bounds how many scheduled holders of a group one browse or purge reads to
// find a queue's scheduled (delay) messages.
const maxHolderScan = 10000

// pauseFor is how far ahead a paused consumer's pause-until is set: JetStream pauses until
// a time, Titan until a resume.
const pauseFor = 100 * 365 * 24 * time.Hour

// consumerConfig is the durable pull consumer of the queue on subject (the same on every
// node: the first node to need it creates it).
func consumerConfig(subject string) jetstream.ConsumerConfig {
	return jetstream.ConsumerConfig{
		Durable: consumerName(subject), FilterSubject: subject,
		AckPolicy: jetstream.AckExplicitPolicy, AckWait: cluster.AckWait, MaxDeliver: -1,
		MaxAckPending: 20000, MaxWaiting: 512,
	}
}

// QueueMessage is one stored message of a queue, read without consuming it.
type QueueMessage struct {
	// Seq is its stream sequence (of the scheduled holder for a scheduled message).
	Seq uint64
	// Message is the message as Titan stored it.
	Message *message.Message
	// DeliverAt is when a scheduled message joins the queue (zero when it is in it).
	DeliverAt time.Time
}

// lookup returns id's cluster.Placement, its stream (nil when the stream does not exist) and how
// many messages the stream holds on the queue's subject.
func (q *Pattern) lookup(ctx context.Context, id dest.Identity) (cluster.Placement, jetstream.Stream, uint64, error) {
	p := q.Place(id)
	var s jetstream.Stream
	var stored uint64
	err := cluster.Attempt(ctx, func(ctx context.Context) error {
		var err error
		s, err = q.js.Stream(ctx, p.Stream)
		if err != nil {
			return err
		}
		si, err := s.Info(ctx, jetstream.WithSubjectFilter(p.Subject))
		if err != nil {
			return err
		}
		stored = si.State.Subjects[p.Subject]
		return nil
	})
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return p, nil, 0, nil
	}
	if err != nil {
		return p, nil, 0, fmt.Errorf("cluster: reading stream %s: %w", p.Stream, err)
	}
	return p, s, stored, nil
}

// consumerOf returns the queue's durable consumer info, nil when it has none.
func (q *Pattern) consumerOf(ctx context.Context, p cluster.Placement) (*jetstream.ConsumerInfo, error) {
	var ci *jetstream.ConsumerInfo
	err := cluster.Attempt(ctx, func(ctx context.Context) error {
		c, err := q.js.Consumer(ctx, p.Stream, consumerName(p.Subject))
		if err != nil {
			return err
		}
		ci = c.CachedInfo()
		return nil
	})
	if errors.Is(err, jetstream.ErrConsumerNotFound) || errors.Is(err, jetstream.ErrStreamNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("cluster: reading consumer of %s: %w", p.Subject, err)
	}
	return ci, nil
}

// exists returns id's cluster.Placement and stream, the messages stored on its subject, and its
// consumer (nil when none). Errors: ErrNoQueue when JetStream holds neither messages nor a
// consumer for it.
func (q *Pattern) exists(ctx context.Context, id dest.Identity) (cluster.Placement, jetstream.Stream, uint64, *jetstream.ConsumerInfo, error) {
	p, s, stored, err := q.lookup(ctx, id)
	if err != nil {
		return p, nil, 0, nil, err
	}
	if s == nil {
		return p, nil, 0, nil, ErrNoQueue
	}
	ci, err := q.consumerOf(ctx, p)
	if err != nil {
		return p, nil, 0, nil, err
	}
	if ci == nil && stored == 0 {
		return p, nil, 0, nil, ErrNoQueue
	}
	return p, s, stored, ci, nil
}

// stream returns id's cluster.Placement, stream and the messages stored on its subject. A queue
// whose group's stream exists reads as empty when JetStream stores nothing for it (browse,
// purge and re-drive of a drained queue answer empty, as single-node does). Errors:
// ErrNoQueue when the stream does not exist.
func (q *Pattern) stream(ctx context.Context, id dest.Identity) (cluster.Placement, jetstream.Stream, uint64, error) {
	p, s, stored, err := q.lookup(ctx, id)
	if err == nil && s == nil {
		err = ErrNoQueue
	}
	return p, s, stored, err
}

// ensureConsumer creates the queue's stream and durable consumer unless they exist;
// created is true when this call made the consumer.
func (q *Pattern) ensureConsumer(ctx context.Context, id dest.Identity) (p cluster.Placement, created bool, err error) {
	p = q.Place(id)
	if err := q.ensureStream(ctx, p); err != nil {
		return p, false, err
	}
	cfg := consumerConfig(p.Subject)
	err = cluster.Attempt(ctx, func(ctx context.Context) error {
		_, err := q.js.Consumer(ctx, p.Stream, cfg.Durable)
		if errors.Is(err, jetstream.ErrConsumerNotFound) {
			_, err = q.js.CreateConsumer(ctx, p.Stream, cfg)
			if err == nil {
				created = true
			} else if errors.Is(err, jetstream.ErrConsumerExists) {
				err = nil
			}
		}
		return err
	})
	if err != nil {
		return p, false, fmt.Errorf("cluster: creating consumer for %s: %w", id, err)
	}
	return p, created, nil
}

// CreateQueue makes id's queue exist cluster-wide: its stream and its durable consumer.
// created is false when the consumer existed. Bounded by ctx.
func (q *Pattern) CreateQueue(ctx context.Context, id dest.Identity) (created bool, err error) {
	_, created, err = q.ensureConsumer(ctx, id)
	return created, err
}

// SetPaused pauses (JetStream consumer pause, until a resume) or resumes deliveries of id's
// queue on every node, and returns once the consumer's leader applied it; SENDs are still
// stored meanwhile. Pausing a queue that has messages and no consumer yet creates its
// consumer, paused. Errors: ErrNoQueue (JetStream holds neither messages nor a consumer for
// it), the JetStream API's.
func (q *Pattern) SetPaused(ctx context.Context, id dest.Identity, paused bool) error {
	p, _, _, ci, err := q.exists(ctx, id)
	if err != nil {
		return err
	}
	switch {
	case paused && ci == nil: // messages but no consumer yet: make it, paused
		if p, _, err = q.ensureConsumer(ctx, id); err != nil {
			return err
		}
	case paused && ci.Paused, !paused && (ci == nil || !ci.Paused):
		return nil // pausing a paused queue, resuming a running one: no-ops
	}
	name := consumerName(p.Subject)
	err = cluster.Attempt(ctx, func(ctx context.Context) error {
		var err error
		if paused {
			_, err = q.js.PauseConsumer(ctx, p.Stream, name, time.Now().Add(pauseFor))
		} else {
			_, err = q.js.ResumeConsumer(ctx, p.Stream, name)
		}
		return err
	})
	if err != nil {
		return fmt.Errorf("cluster: pausing %s: %w", id, err)
	}
	// JetStream answers once the change is proposed; wait until the consumer's leader
	// applied it, so that deliveries have stopped (or restarted) when this returns.
	for {
		ci, err := q.consumerOf(ctx, p)
		if err != nil {
			return err
		}
		if ci == nil || ci.Paused == paused {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("cluster: pausing %s: not applied: %w", id, ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// Paused reports whether id's queue's consumer is paused.
func (q *Pattern) Paused(ctx context.Context, id dest.Identity) (bool, error) {
	ci, err := q.consumerOf(ctx, q.Place(id))
	return ci != nil && ci.Paused, err
}

// purgeResponse is JetStream's answer to $JS.API.STREAM.PURGE (nats.go drops the count).
type purgeResponse struct {
	Success bool                `json:"success"`
	Purged  uint64              `json:"purged"`
	Error   *jetstream.APIError `json:"error,omitempty"`
}

// purgeSubject removes every message stored on subject from stream and returns how many.
func (q *Pattern) purgeSubject(ctx context.Context, stream, subject string) (uint64, error) {
	req, _ := json.Marshal(jetstream.StreamPurgeRequest{Subject: subject})
	var n uint64
	err := cluster.Attempt(ctx, func(ctx context.Context) error {
		msg, err := q.js.Conn().RequestWithContext(ctx, "$JS.API.STREAM.PURGE."+stream, req)
		if err != nil {
			return err
		}
		var resp purgeResponse
		if err := json.Unmarshal(msg.Data, &resp); err != nil {
			return err
		}
		if resp.Error != nil {
			return resp.Error
		}
		n = resp.Purged
		return nil
	})
	return n, err
}

// PurgeQueue removes every message JetStream stores for id's queue — ready, in delivery
// (their ACKs then do nothing) and scheduled — and returns how many. The queue, its
// consumer and its pause stay. Errors: ErrNoQueue (no stream for its group), the JetStream
// API's.
func (q *Pattern) PurgeQueue(ctx context.Context, id dest.Identity) (int, error) {
	p, s, _, err := q.stream(ctx, id)
	if err != nil {
		return 0, err
	}
	return q.purge(ctx, p, s)
}

func (q *Pattern) purge(ctx context.Context, p cluster.Placement, s jetstream.Stream) (int, error) {
	n, err := q.purgeSubject(ctx, p.Stream, p.Subject)
	if err != nil {
		return 0, fmt.Errorf("cluster: purging %s: %w", p.Subject, err)
	}
	var held []uint64
	err = q.holders(ctx, s, p, 0, func(seq uint64, _ *message.Message, _ time.Time) bool {
		held = append(held, seq)
		return true
	})
	for _, seq := range held {
		if err != nil {
			break
		}
		err = cluster.Attempt(ctx, func(ctx context.Context) error { return s.DeleteMsg(ctx, seq) })
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			err = nil // its schedule fired meanwhile
			continue
		}
		n++
	}
	if err != nil {
		return int(n), fmt.Errorf("cluster: purging scheduled messages of %s: %w", p.Subject, err)
	}
	return int(n), nil
}

// next returns the first message stored on subject at or after sequence from, nil when
// none.
func next(ctx context.Context, s jetstream.Stream, from uint64, subject string) (*jetstream.RawStreamMsg, error) {
	var m *jetstream.RawStreamMsg
	err := cluster.Attempt(ctx, func(ctx context.Context) error {
		var err error
		m, err = s.GetMsg(ctx, from, jetstream.WithGetMsgSubject(subject))
		return err
	})
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return nil, nil
	}
	return m, err
}

// holders calls fn, in stream order, for the scheduled holders (delay) of p's group whose
// target is p's queue, reading at most maxHolderScan holders, until fn returns false or
// limit (> 0) holders were found.
func (q *Pattern) holders(ctx context.Context, s jetstream.Stream, p cluster.Placement, limit int, fn func(seq uint64, m *message.Message, at time.Time) bool) error {
	found := 0
	seq := uint64(1)
	for range maxHolderScan {
		raw, err := next(ctx, s, seq, p.Holders+">")
		if err != nil || raw == nil {
			return err
		}
		seq = raw.Sequence + 1
		if raw.Header.Get(jetstream.ScheduleTargetHeader) != p.Subject {
			continue
		}
		m, err := message.Decode(raw.Data)
		if err != nil {
			continue
		}
		at, _ := time.Parse(time.RFC3339, strings.TrimPrefix(raw.Header.Get(jetstream.ScheduleHeader), "@at "))
		found++
		if !fn(raw.Sequence, m, at) || (limit > 0 && found >= limit) {
			return nil
		}
	}
	return nil
}

// BrowseQueue returns up to max messages JetStream stores for id's queue without consuming
// them: those in the queue in stream order (ready and in delivery alike), then scheduled
// ones. Errors: ErrNoQueue (no stream for its group), the JetStream API's.
func (q *Pattern) BrowseQueue(ctx context.Context, id dest.Identity, max int) ([]QueueMessage, error) {
	p, s, _, err := q.stream(ctx, id)
	if err != nil {
		return nil, err
	}
	out := []QueueMessage{}
	seq := uint64(1)
	for len(out) < max {
		raw, err := next(ctx, s, seq, p.Subject)
		if err != nil {
			return nil, fmt.Errorf("cluster: browsing %s: %w", id, err)
		}
		if raw == nil {
			break
		}
		seq = raw.Sequence + 1
		m, err := message.Decode(raw.Data)
		if err != nil {
			continue
		}
		out = append(out, QueueMessage{Seq: raw.Sequence, Message: m})
	}
	if left := max - len(out); left > 0 {
		err = q.holders(ctx, s, p, left, func(seq uint64, m *message.Message, at time.Time) bool {
			out = append(out, QueueMessage{Seq: seq, Message: m, DeliverAt: at})
			return true
		})
		if err != nil {
			return nil, fmt.Errorf("cluster: browsing scheduled messages of %s: %w", id, err)
		}
	}
	return out, nil
}

// QueueDepth returns how many messages JetStream stores in id's queue (ready and in
// delivery; not scheduled ones). Errors: ErrNoQueue (no stream for its group), the
// JetStream API's.
func (q *Pattern) QueueDepth(ctx context.Context, id dest.Identity) (int, error) {
	_, _, stored, err := q.stream(ctx, id)
	return int(stored), err
}

// MoveQueueHead reads the oldest message stored in id's queue, calls fn with it and, when
// fn returns nil, deletes it from the stream (fn's error is returned and the message stays
// otherwise). moved is false when the queue stores nothing. A message in delivery is moved
// like a ready one (its ACK then does nothing). Errors: ErrNoQueue (no stream for its
// group), fn's, the JetStream API's (after fn succeeded: the message was copied and is
// still stored).
func (q *Pattern) MoveQueueHead(ctx context.Context, id dest.Identity, fn func(*message.Message) error) (moved bool, err error) {
	p, s, _, err := q.stream(ctx, id)
	if err != nil {
		return false, err
	}
	for seq := uint64(1); ; {
		raw, err := next(ctx, s, seq, p.Subject)
		if err != nil {
			return false, fmt.Errorf("cluster: reading the head of %s: %w", id, err)
		}
		if raw == nil {
			return false, nil
		}
		seq = raw.Sequence + 1
		m, err := message.Decode(raw.Data)
		if err != nil {
			continue
		}
		if err := fn(m); err != nil {
			return false, err
		}
		err = cluster.Attempt(ctx, func(ctx context.Context) error { return s.DeleteMsg(ctx, raw.Sequence) })
		if err != nil && !errors.Is(err, jetstream.ErrMsgNotFound) {
			return false, fmt.Errorf("cluster: removing a moved message from %s: %w", id, err)
		}
		return true, nil
	}
}

// DeleteQueue deletes id's queue cluster-wide: its durable consumer (with its pause) and
// every message stored for it, and returns how many messages were discarded. Nodes with
// subscribers to it make a fresh consumer at their next pull (as the next SEND or
// SUBSCRIBE would). Errors: ErrNoQueue; ErrQueueNotEmpty when it holds messages (ready or
// in delivery; scheduled ones are not counted) and force is false; the JetStream API's.
func (q *Pattern) DeleteQueue(ctx context.Context, id dest.Identity, force bool) (int, error) {
	p, s, stored, ci, err := q.exists(ctx, id)
	if err != nil {
		return 0, err
	}
	if stored > 0 && !force {
		return int(stored), ErrQueueNotEmpty
	}
	if ci != nil {
		err := cluster.Attempt(ctx, func(ctx context.Context) error { return q.js.DeleteConsumer(ctx, p.Stream, ci.Name) })
		if err != nil && !errors.Is(err, jetstream.ErrConsumerNotFound) {
			return 0, fmt.Errorf("cluster: deleting the consumer of %s: %w", id, err)
		}
	}
	return q.purge(ctx, p, s)
}

// reconsumeEvery bounds how often one pull loop checks whether its consumer was deleted,
// and reconsumeLookup how long that check waits.
const (
	reconsumeEvery  = time.Second
	reconsumeLookup = 500 * time.Millisecond
)

// reconsume is called by a pull loop (only run touches c.cons and c.checked) whose fetch
// failed with err: when the queue's consumer was deleted (DeleteQueue on any node) it binds
// c to a fresh one, so the node's subscribers go on receiving the queue's new messages. It
// acts only on the server's own word that the consumer is gone (the "Consumer Deleted"
// status sent to waiting pulls, a consumer-not-found answer), at most once per
// reconsumeEvery: a leader election (no responders, timeouts) costs nothing. A node that
// had no pull waiting when the consumer was deleted sees only "no responders" afterwards;
// its subscribers get the fresh queue when they subscribe again.
func (c *consumer) reconsume(err error) {
	if !errors.Is(err, jetstream.ErrConsumerDeleted) && !errors.Is(err, jetstream.ErrConsumerNotFound) {
		return
	}
	if time.Since(c.checked) < reconsumeEvery {
		return
	}
	c.checked = time.Now()
	c.mu.Lock()
	idle := len(c.subs) == 0
	c.mu.Unlock()
	if idle { // the loop is ending: a deleted queue stays deleted
		return
	}
	// Short look-ups until the deletion is visible (the pull may hear of it first).
	p := c.q.Place(c.id)
	for try := 0; ; try++ {
		lctx, lcancel := context.WithTimeout(context.Background(), reconsumeLookup)
		_, lerr := c.q.js.Consumer(lctx, p.Stream, consumerName(p.Subject))
		lcancel()
		if errors.Is(lerr, jetstream.ErrConsumerNotFound) {
			break
		}
		if try == 4 || !errors.Is(err, jetstream.ErrConsumerDeleted) {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	ctx, cancel := context.WithTimeout(context.Background(), cluster.AttemptTimeout)
	defer cancel()
	p, _, err = c.q.ensureConsumer(ctx, c.id)
	if err != nil {
		c.q.log.Warn("queue consumer not recreated", "queue", c.id.String(), "err", err)
		return
	}
	if cons, err := c.q.js.Consumer(ctx, p.Stream, consumerName(p.Subject)); err == nil {
		c.loop.SetConsumer(cons)
	}
}
