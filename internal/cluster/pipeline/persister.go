package pipeline

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

	"github.com/titan-broker/titan/internal/cluster"
	"github.com/titan-broker/titan/internal/dest"
	"github.com/titan-broker/titan/internal/message"
)

// Store is a stored pattern's adapter as the pipeline needs it (declared here,
// implemented by queues.Pattern and logs.Pattern).
type Store interface {
	// Build returns id's placement and the JetStream message that stores m there (dropped:
	// m is not stored, for example an already-expired queue message).
	Build(id dest.Identity, m *message.Message) (p cluster.Placement, msg *nats.Msg, dropped bool)
	// Count records a stored publish (ack.Duplicate: a duplicate of a stored message).
	Count(ack *jetstream.PubAck)
	// Streams is the adapter's stream maker (a stream made by one is made).
	Streams() *cluster.Streams
}

// Tunables of pipelined publishes.
const (
	// MaxPendingPublishes bounds the asynchronous publishes one node has awaiting their
	// PubAck (nats.go's PublishAsyncMaxPending); a publish beyond it waits for room, which
	// stops its connection being read. Each connection also has at most the router's
	// pipeline depth (256) in flight.
	MaxPendingPublishes = 4096
	// StallFence is how long the oldest unanswered publish to a stream may be outstanding
	// before the node stops sending new ones to that stream until it is answered (see
	// Persister). It is
	// well below JetStream's shortest election after a leader's crash (4 s), so publishes
	// sent to a dead leader all fail and are retried in order before a new leader can
	// store a later one.
	StallFence = 200 * time.Millisecond
	// MaxStreamPending bounds the publishes one stream may have awaiting their PubAck on a
	// node: a quarter of MaxPendingPublishes, so a stalled stream never takes the whole
	// node's window (nats.go's, shared by every stream) from the others.
	MaxStreamPending = MaxPendingPublishes / 4
)

// Persister stores durable SENDs to queues and events-store logs in JetStream for the
// router's store stage (the router.Persister port in cluster mode), so that a connection's
// SENDs are pipelined as on a single node: PersistAsync publishes asynchronously and
// returns at once, the connection keeps being read, and the wait func it returns (called
// in SEND order on the connection's pipeline) returns once the PubAck arrived, i.e. a
// quorum of the stream's replicas stored the message; only then does the router write
// the RECEIPT. The queues and events-store adapters' Publish then has nothing left to do
// for that message (m.Sequence is set).
//
// Ordering and back-pressure are per stream (issue 28): each stream the node publishes to
// has its own lane — its send order, unresolved publishes, failures and stall fence — so a
// stream whose leader is slow, frozen or being re-elected stops only the connections that
// write to it; SENDs to every other stream go on being pipelined.
//
// Retries and order. A publish that fails (no PubAck within the attempt timeout, no
// responders, no quorum: a leader change) is retried by its wait func with the same
// Nats-Msg-Id, so it is stored once, until PublishTimeout from its first send; if it still
// fails the client gets an ERROR for it and no RECEIPT (and the connection closes, so
// nothing sent after it is answered). JetStream stores one connection's publishes to a
// stream in the order they reach the leader, but a retried publish would be stored after
// a later one that a new leader already accepted. The rule that keeps delivery FIFO per
// destination through a leader's crash: while any publish of this node has failed and is
// not yet stored, or the oldest unanswered one has been outstanding for StallFence, no new
// publish to its stream is sent (the producers' connections stop being read); the retries then go out in
// SEND order, each connection's one after the other, before anything newer. All of this
// holds per stream (per lane): the retries and fences of one stream never hold back
// another's publishes. The publishes in flight when a leader crashed were all sent to it within StallFence, which
// is far shorter than JetStream's election after a crash (at least 4 s), so none of the
// later ones can reach the next leader before the earlier ones are retried.
//
// What the rule cannot cover by itself is a leader hand-over without a crash: JetStream
// then elects the next leader at once, and publishes that were in flight at the old
// leader can be dropped there and, retried, be stored after later ones. A Titan node that
// steps down (SIGTERM, a rolling restart) therefore has every node Hold its publishes to
// the streams it hands over until their new leaders are elected (cluster/holds.go), so
// none is in flight then (TestStepDownHoldsPublishesInOrder: 0 retried, against 71–246
// and one reordering without the holds). A hand-over Titan did not start (a leader that
// lost its quorum's heartbeats on a loaded machine, a node shut down without its step-down
// completing) is still detected only afterwards: a publish whose send order and stream
// sequence disagree with the last one stored on its subject is counted in Reordered and
// logged. A strict guarantee there needs JetStream's fast batch publishing with gap
// detection (AllowBatchPublish, nats-server 2.14+), for which nats.go has no client yet.
//
// Interest. JetStream's leader is the only replica subscribed to a stream's subjects, and
// that interest reaches the other servers asynchronously: a publish sent before it arrived
// gets "no responders" at once. Two rules keep such a publish from being overtaken. The
// first publish this node sends to a stream waits for its PubAck before PersistAsync
// returns (a stream just created, by this node or another, or first used here since the
// node started), so later ones are only sent once the interest is known to be here. And
// nats.go's own silent retry of a no-responders publish (after 250 ms, while later
// publishes go out) is switched off: the failure reaches the error handler at once, closes
// the gate above and is retried in order by its wait func.
//
// A message refused after it was stored (Forget) stays stored: a stored JetStream message
// may already be delivered, so it is not deleted (at-least-once, as for any SEND answered
// with an ERROR). Safe for concurrent use.
type Persister struct {
	life context.Context // the node's Context: bounds every publish and its retries
	q    Store
	e    Store
	c    *Committer
	js   jetstream.JetStream // asynchronous publishing context (own error handler and limits)
	sync jetstream.JetStream // the node's context, for synchronous publishes and retries
	acks *cluster.Acks       // the node's acknowledgements (Sync)
	log  *slog.Logger

	mu      sync.Mutex
	lanes   map[string]*lane              // by stream name; guarded by mu
	byMsg   map[*nats.Msg]*pendingPublish // unresolved, for the error handler; guarded by mu
	subs    map[string]*subjectState      // subjects with unresolved publishes (reordering check); guarded by mu
	stall   time.Duration                 // StallFence (tests shorten it)
	attempt time.Duration                 // one attempt's PubAck timeout
	now     func() time.Time              // clock
	ticket  atomic.Uint64                 // marks m.Sequence of messages stored here

	// DuplicateIDs (nil: the streams' windows only) recognises client duplicate ids beyond
	// the streams' Nats-Msg-Id window: a SEND whose id it has seen is acknowledged as a
	// duplicate and not stored again, and one stored is recorded before its wait returns.
	// NewPersister takes the Committer's.
	DuplicateIDs *cluster.Duplicates

	// Pipelined counts publishes sent asynchronously; Retried those retried after a
	// failure; Reordered those stored while an earlier publish to the same subject was
	// still being retried (the FIFO rule's residual case, see the type).
	Pipelined, Retried, Reordered atomic.Uint64
}

// asyncPublishOpts are PersistAsync's publish options, made once (each option is a closure
// nats.go would otherwise get freshly allocated per SEND): wait for room in the node's
// window up to PublishTimeout, and no silent retry of a no-responders publish (see the
// type's "Interest").
var asyncPublishOpts = []jetstream.PublishOpt{jetstream.WithStallWait(cluster.PublishTimeout), jetstream.WithRetryAttempts(0)}

// lane is one stream's publishing state on this node: its send order, its unresolved
// publishes and its gate (see Persister).
type lane struct {
	stream string
	// sendMu orders sending: a publish's send number and its write to the NATS connection
	// happen under it, so send order is the order JetStream receives them. Taken before
	// Persister.mu, never the other way round (nats.go calls the error handler, which takes
	// mu, holding its own lock).
	sendMu sync.Mutex
	sent   uint64 // send numbers; guarded by sendMu

	cond    *sync.Cond        // on Persister.mu: a publish of this lane resolved
	order   []*pendingPublish // unresolved publishes in send order (resolved ones popped from the head); guarded by Persister.mu
	pending int               // unresolved publishes; guarded by Persister.mu
	failing int               // unresolved publishes that failed at least once; guarded by Persister.mu
	reached bool              // this node has stored a publish in the stream (see "Interest"); guarded by Persister.mu
	held    int               // Holds in force (a leader hand-over of the stream); guarded by Persister.mu
}

// pendingPublish is one asynchronous publish until its wait func resolved it.
type pendingPublish struct {
	lane   *lane
	msg    *nats.Msg
	fut    jetstream.PubAckFuture
	sent   time.Time
	n      uint64 // send number
	events bool   // an events-store append (counted on e)
	failed bool   // failed at least once (counted in failing)
	done   bool
}

// subjectState is a subject's unresolved publishes and the send number and stream
// sequence of the last one stored: a stored publish whose send order and stream order
// disagree with it was reordered.
type subjectState struct {
	pending int
	n, seq  uint64
}

// NewPersister returns the pipelined persister over n's queues and events-store adapters;
// c (may be nil) stores PersistAll's transactions. Errors: creating the JetStream context.
func NewPersister(n *cluster.Node, q, e Store, c *Committer, log *slog.Logger) (*Persister, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	p := &Persister{q: q, e: e, c: c, log: log, byMsg: make(map[*nats.Msg]*pendingPublish), lanes: make(map[string]*lane),
		subs: make(map[string]*subjectState), stall: StallFence, attempt: cluster.PublishAttemptTimeout, now: time.Now}
	js, err := jetstream.New(n.Conn(),
		jetstream.WithPublishAsyncMaxPending(MaxPendingPublishes),
		jetstream.WithPublishAsyncTimeout(p.attempt),
		jetstream.WithPublishAsyncErrHandler(func(_ jetstream.JetStream, msg *nats.Msg, _ error) { p.failed(msg) }))
	if err != nil {
		return nil, fmt.Errorf("cluster: async publishing context: %w", err)
	}
	p.js, p.sync, p.acks, p.life = js, n.JetStream(), n.Acks(), n.Context()
	if c != nil {
		p.DuplicateIDs = c.DuplicateIDs
	}
	return p, nil
}

// build returns the placement and JetStream message of m on id (dropped: an expired queue
// message, which is not stored).
func (p *Persister) build(id dest.Identity, m *message.Message) (pl cluster.Placement, msg *nats.Msg, events, dropped bool) {
	if id.Pattern == dest.PatternEventsStore {
		pl, msg, dropped = p.e.Build(id, m)
		return pl, msg, true, dropped
	}
	pl, msg, dropped = p.q.Build(id, m)
	return pl, msg, false, dropped
}

// ensure creates pl's stream unless this node already made it (the common case costs one
// map lookup and no context).
func (p *Persister) ensure(pl cluster.Placement, events bool) error {
	s := p.q.Streams()
	if events {
		s = p.e.Streams()
	}
	if s.Has(pl.Config.Name) {
		return nil
	}
	ctx, cancel := context.WithTimeout(p.life, cluster.PublishTimeout)
	defer cancel()
	return s.Ensure(ctx, pl.Config)
}

// lane returns stream's lane, made on first use (streams are few: one per group and
// limits class).
func (p *Persister) lane(stream string) *lane {
	p.mu.Lock()
	defer p.mu.Unlock()
	l := p.lanes[stream]
	if l == nil {
		l = &lane{stream: stream, cond: sync.NewCond(&p.mu)}
		p.lanes[stream] = l
	}
	return l
}

// mark sets m.Sequence so that the adapters' Publish knows m is stored (see the type).
func (p *Persister) mark(m *message.Message) { m.Sequence = p.ticket.Add(1) }

// Persist stores m and returns once it is stored (the router's unpipelined path: an
// in-process publication). An expired queue message is left to the adapter (dropped).
func (p *Persister) Persist(id dest.Identity, m *message.Message) error {
	pl, msg, events, dropped := p.build(id, m)
	if dropped {
		return nil
	}
	if err := p.ensure(pl, events); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(p.life, cluster.PublishTimeout)
	defer cancel()
	if seen, err := p.seen(ctx, events, msg, m); err != nil || seen {
		return err
	}
	p.gate(p.lane(pl.Stream))
	ack, err := cluster.PublishRetrying(ctx, p.sync, msg)
	if err == nil {
		err = p.DuplicateIDs.RecordMsg(ctx, msg)
	}
	if err != nil {
		return fmt.Errorf("cluster: message not stored: %w", err)
	}
	p.count(events, ack)
	p.mark(m)
	return nil
}

// PersistAll stores a transaction's messages through the Committer (one atomic batch per
// stream). The router sends cluster transactions through Committer directly; this path
// serves a router built without it.
func (p *Persister) PersistAll(ids []dest.Identity, ms []*message.Message) error {
	if p.c == nil {
		for i := range ids {
			if err := p.Persist(ids[i], ms[i]); err != nil {
				return err
			}
		}
		return nil
	}
	if err := p.c.PublishBatch(ids, ms, nil); err != nil {
		return err
	}
	for _, m := range ms {
		p.mark(m)
	}
	return nil
}

// Sync implements router.Syncer: it returns once every acknowledgement this node sent so
// far is applied by its consumer's leader (cluster.Acks), so the router writes an ACK's
// RECEIPT only after the ACK is stored (issue 27). Errors: cluster.ErrAckUnconfirmed.
func (p *Persister) Sync() error { return p.acks.Sync() }

// StoresEveryQueueSend implements router.QueueStorer: a queue message lives only in its
// JetStream stream, so a persistent:false queue SEND is published here too and pipelined
// like a persistent one (issue 28); its RECEIPT follows its PubAck, as it followed the
// publish stage's synchronous publish before (on a single node it follows the enqueue).
func (p *Persister) StoresEveryQueueSend() bool { return true }

// Forget does nothing: a stored JetStream message may already be delivered (see the type).
func (p *Persister) Forget(dest.Identity, *message.Message) {}

// PersistAsync publishes m to id's stream without waiting for the PubAck and marks m
// stored; wait (called exactly once, in SEND order per connection) returns once it is
// stored, after retries (see the type). It may block while the node's publishes to id's
// stream are being retried or stalled (back-pressure on the producer), and blocks until m is stored when
// it is the node's first publish to its stream (the type's "Interest"). Errors: the
// stream could not be created, the publish could not be sent, or (a first publish) it
// was not stored.
func (p *Persister) PersistAsync(id dest.Identity, m *message.Message) (wait func() error, err error) {
	pl, msg, events, dropped := p.build(id, m)
	if dropped {
		return func() error { return nil }, nil // the adapter drops it at publish
	}
	if err := p.ensure(pl, events); err != nil {
		return nil, err
	}
	if _, ok := cluster.DuplicateKey(msg); ok && p.DuplicateIDs.Long() {
		ctx, cancel := context.WithTimeout(p.life, cluster.PublishTimeout)
		seen, err := p.seen(ctx, events, msg, m)
		cancel()
		if err != nil {
			return nil, err
		}
		if seen {
			return func() error { return nil }, nil
		}
	}
	l := p.lane(pl.Stream)
	p.gate(l)
	pp := &pendingPublish{lane: l, msg: msg, events: events}
	l.sendMu.Lock()
	l.sent++
	pp.n = l.sent
	p.mu.Lock()
	pp.sent = p.now()
	p.byMsg[msg] = pp
	st := p.subs[msg.Subject]
	if st == nil {
		st = &subjectState{}
		p.subs[msg.Subject] = st
	}
	st.pending++
	l.order = append(l.order, pp)
	l.pending++
	first := !l.reached
	p.mu.Unlock()
	fut, err := p.js.PublishMsgAsync(msg, asyncPublishOpts...)
	l.sendMu.Unlock()
	if err != nil {
		p.resolve(pp, nil)
		return nil, fmt.Errorf("cluster: message not stored: %w", err)
	}
	pp.fut = fut
	p.Pipelined.Add(1)
	if first {
		// The stream's interest may not have reached this server yet (see "Interest").
		if err := p.wait(pp); err != nil {
			return nil, err
		}
		p.mu.Lock()
		l.reached = true
		p.mu.Unlock()
		if err := p.record(msg); err != nil {
			return nil, err
		}
		p.mark(m)
		return func() error { return nil }, nil
	}
	p.mark(m)
	return func() error {
		if err := p.wait(pp); err != nil {
			return err
		}
		return p.record(msg)
	}, nil
}

// seen reports whether msg's client duplicate id was stored before, beyond its stream's
// own window; such a message is counted as a duplicate and marked stored.
func (p *Persister) seen(ctx context.Context, events bool, msg *nats.Msg, m *message.Message) (bool, error) {
	seen, err := p.DuplicateIDs.SeenMsg(ctx, msg)
	if err != nil {
		return false, fmt.Errorf("cluster: message not stored: %w", err)
	}
	if seen {
		p.count(events, &jetstream.PubAck{Duplicate: true})
		p.mark(m)
	}
	return seen, nil
}

// record notes msg's client duplicate id (if any) once msg is stored.
func (p *Persister) record(msg *nats.Msg) error {
	if _, ok := cluster.DuplicateKey(msg); !ok || !p.DuplicateIDs.Long() {
		return nil
	}
	ctx, cancel := context.WithTimeout(p.life, cluster.PublishTimeout)
	defer cancel()
	if err := p.DuplicateIDs.RecordMsg(ctx, msg); err != nil {
		return fmt.Errorf("cluster: message not stored: %w", err)
	}
	return nil
}

// gate waits while a publish to l's stream is being retried, the oldest unanswered one
// stalled, MaxStreamPending are unanswered, or a Hold is in force. Other streams' lanes
// are not looked at.
func (p *Persister) gate(l *lane) {
	p.mu.Lock()
	for {
		for len(l.order) > 0 && l.order[0].done {
			l.order[0] = nil
			l.order = l.order[1:]
		}
		if l.held == 0 && l.failing == 0 && l.pending < MaxStreamPending && (len(l.order) == 0 || p.now().Sub(l.order[0].sent) < p.stall) {
			break
		}
		l.cond.Wait()
	}
	p.mu.Unlock()
}

// Hold stops this node sending new publishes to streams (they wait in gate, so their
// producers stop being read, in SEND order) and returns once every publish it sent to them
// was answered — stored or failed — or when ctx ends: a stream's leader can then hand over
// with nothing of this node in flight to it (the cluster.PublishHolder port, used by a
// stepping-down node: cluster.Node.ServePublishHolds). A publish in flight at a hand-over
// can be dropped by the old leader and stored, once retried, after a later one the new
// leader already took (the type's "Retries and order"). release lets them go again, the
// first one to each stream sent alone, as a stream's first publish is (the new leader's
// interest may still be on its way); calling it more than once does nothing. Holds nest.
// Safe for concurrent use.
func (p *Persister) Hold(ctx context.Context, streams []string) (release func()) {
	ls := make([]*lane, 0, len(streams))
	for _, name := range streams {
		ls = append(ls, p.lane(name))
	}
	p.mu.Lock()
	for _, l := range ls {
		l.held++
	}
	p.mu.Unlock()
	var once sync.Once
	release = func() {
		once.Do(func() {
			p.mu.Lock()
			for _, l := range ls {
				l.held--
				// The stream's new leader may not have its interest here yet: the next
				// publish waits for its PubAck before later ones go (see "Interest").
				l.reached = false
			}
			p.mu.Unlock()
			for _, l := range ls {
				l.cond.Broadcast()
			}
		})
	}
	// Wake the waits below when ctx ends (a lane's cond is on p.mu).
	stop := context.AfterFunc(ctx, func() {
		p.mu.Lock() // under the lock: no waiter between its check and its Wait misses it
		for _, l := range ls {
			l.cond.Broadcast()
		}
		p.mu.Unlock()
	})
	defer stop()
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, l := range ls {
		for l.pending > 0 && ctx.Err() == nil {
			l.cond.Wait()
		}
	}
	return release
}

// failed records that msg's publish failed (the async error handler, or its wait func).
func (p *Persister) failed(msg *nats.Msg) {
	p.mu.Lock()
	if pp := p.byMsg[msg]; pp != nil && !pp.failed {
		pp.failed = true
		pp.lane.failing++
	}
	p.mu.Unlock()
}

// resolve ends pp: stored (ack) or finally failed (nil).
func (p *Persister) resolve(pp *pendingPublish, ack *jetstream.PubAck) {
	reordered := false
	p.mu.Lock()
	pp.done = true
	l := pp.lane
	l.pending--
	if pp.failed {
		l.failing--
	}
	delete(p.byMsg, pp.msg)
	if st := p.subs[pp.msg.Subject]; st != nil {
		if ack != nil && !ack.Duplicate {
			if st.n != 0 && (st.n < pp.n) != (st.seq < ack.Sequence) {
				reordered = true
				p.Reordered.Add(1)
			}
			if pp.n > st.n {
				st.n, st.seq = pp.n, ack.Sequence
			}
		}
		if st.pending--; st.pending == 0 {
			delete(p.subs, pp.msg.Subject)
		}
	}
	p.mu.Unlock()
	l.cond.Broadcast()
	if reordered {
		p.log.Warn("a retried publish was stored after a later one on its destination (leader change within the stall fence)",
			"subject", pp.msg.Subject, "stream_seq", ack.Sequence)
	}
}

// wait returns once pp is stored, retrying it (same Nats-Msg-Id) after a failure until
// PublishTimeout from its first send.
func (p *Persister) wait(pp *pendingPublish) error {
	var ack *jetstream.PubAck
	var err error
	select {
	case ack = <-pp.fut.Ok():
	case err = <-pp.fut.Err():
	}
	if err == nil {
		p.count(pp.events, ack)
		p.resolve(pp, ack)
		return nil
	}
	p.failed(pp.msg)
	deadline := pp.sent.Add(cluster.PublishTimeout)
	if cluster.Retryable(err) || errors.Is(err, jetstream.ErrAsyncPublishTimeout) || errors.Is(err, nats.ErrDisconnected) {
		p.Retried.Add(1)
		ctx, cancel := context.WithDeadline(p.life, deadline)
		ack, err = cluster.PublishRetrying(ctx, p.sync, pp.msg)
		cancel()
	}
	if err != nil {
		p.resolve(pp, nil)
		p.log.Warn("publish failed", "subject", pp.msg.Subject, "err", err)
		return fmt.Errorf("cluster: message not stored: %w", err)
	}
	p.count(pp.events, ack)
	p.resolve(pp, ack)
	return nil
}

// count records a stored publish on its adapter.
func (p *Persister) count(events bool, ack *jetstream.PubAck) {
	if events {
		p.e.Count(ack)
		return
	}
	p.q.Count(ack)
}
