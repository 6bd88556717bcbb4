package dispatch

import (
	"log/slog"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/titan-broker/titan/internal/dest"
	"github.com/titan-broker/titan/internal/frame"
	"github.com/titan-broker/titan/internal/message"
	"github.com/titan-broker/titan/internal/queue"
	"github.com/titan-broker/titan/internal/sublist"
)

// Options configure an Engine. Zero fields take the documented defaults.
type Options struct {
	// Now is the clock (default time.Now).
	Now func() time.Time
	// Settings returns the settings for a queue that traffic creates (default: built-in
	// defaults by pattern, see DefaultSettings).
	Settings func(id Identity) QueueSettings
	// FanoutMode routes events SENDs through a per-identity EventQueue and its consumer
	// (reference 000's fanout-mode); off, events are written straight to the subscriptions
	// except for destinations whose queue an operator created explicitly.
	FanoutMode bool
	// Logger receives dispatch events; nil discards them.
	Logger *slog.Logger
	// Go starts a tracked goroutine; false once shutting down (default: plain go).
	Go func(name string, fn func()) bool
	// OnRetire, when set, is told (without locks held) about queue messages that were
	// acknowledged or removed, so that durable copies can be deleted.
	OnRetire func(id Identity, acked []*message.Message, removed []queue.Removed)
	// Persist, when set, durably stores a message the engine itself publishes to a durable
	// pattern (dead letters) before it is queued.
	Persist func(id Identity, m *message.Message) error
	// Logs is the durable log port events-store subscriptions read from; nil disables the
	// events-store pattern.
	Logs LogStore
	// OnSettings, when set, is told (without engine locks held) when an operator creates a
	// queue, changes its ring size (s is the new settings) or deletes it (s nil), so the
	// settings can be kept across restarts.
	OnSettings func(id Identity, s *QueueSettings)
	// PollBase and PollMax bound the outbox pollers' regulated interval (defaults 1 s and
	// 30 s, reference 004).
	PollBase, PollMax time.Duration
}

// DefaultSettings are the built-in settings of traffic-created queues (DESIGN §4).
func DefaultSettings(id Identity) QueueSettings {
	if id.Pattern == dest.PatternEvents {
		return QueueSettings{Capacity: DefaultEventsCapacity, FullPolicy: PolicyBlock}
	}
	if id.Pattern == dest.PatternQueues {
		return QueueSettings{MaxPendingBytes: DefaultMaxPendingBytes, FullPolicy: PolicyBlock, MaxDeliveries: DefaultMaxDeliveries}
	}
	return QueueSettings{MaxPendingBytes: DefaultMaxPendingBytes, FullPolicy: PolicyBlock}
}

// Queue is what the Dispatcher holds for one identity: a *PointQueue (queues pattern) or an
// *EventQueue (events under fanout-mode).
type Queue interface {
	Identity() Identity
	Stats() QueueStats
}

// Engine routes published messages to queues and subscriptions. Safe for concurrent use.
type Engine struct {
	opts Options
	log  *slog.Logger

	mu      sync.RWMutex                               // guards the maps below; never held while taking a queue's or Conn's lock
	queues  map[Identity]Queue                         // the dispatcher: exact identity → queue
	waiting map[Identity][]*Subscription               // queues-pattern consumers, also for identities without a queue yet
	events  map[string]*sublist.Sublist[*Subscription] // events subscriptions by eventsKey(group, bare)
	groups  map[string]struct{}                        // groups named by a SEND
	logs    map[Identity][]*logSub                     // events-store subscriptions by identity
	rpc     *rpcState
	trie    map[trieRoot]*trieNode // channel tries for SearchAll (discovery only)
	stop    chan struct{}          // closed by Close: ends every wait for room
	stopped sync.Once

	Published     atomic.Uint64
	LogDelivered  atomic.Uint64 // events-store messages delivered by outbox pollers
	EventsNoSub   atomic.Uint64 // events messages that matched no subscription (direct mode)
	EventsDropped atomic.Uint64 // events deliveries dropped for a full subscription or connection
	DeadLettered  atomic.Uint64
	// EgressHeadersDropped counts headers left out of MESSAGE frames because the
	// connection's STOMP version cannot represent them (DESIGN §6), once per delivery.
	EgressHeadersDropped atomic.Uint64
	Expired              atomic.Uint64
}

// NewEngine returns an engine configured by o.
func NewEngine(o Options) *Engine {
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Settings == nil {
		o.Settings = DefaultSettings
	}
	e := &Engine{
		opts:    o,
		queues:  make(map[Identity]Queue),
		waiting: make(map[Identity][]*Subscription),
		events:  make(map[string]*sublist.Sublist[*Subscription]),
		groups:  map[string]struct{}{dest.DefaultGroup: {}},
		logs:    make(map[Identity][]*logSub),
		rpc:     newRPCState(),
		stop:    make(chan struct{}),
		trie:    make(map[trieRoot]*trieNode),
	}
	e.log = o.Logger
	if e.log == nil {
		e.log = slog.New(slog.DiscardHandler)
	}
	return e
}

func (e *Engine) goroutine(name string, fn func()) bool {
	if e.opts.Go == nil {
		go fn()
		return true
	}
	return e.opts.Go(name, fn)
}

// NewConn returns the delivery state for a connection writing through w, counted in the
// engine's metrics.
func (e *Engine) NewConn(w Writer) *Conn {
	c := NewConn(w)
	c.egressDropped = &e.EgressHeadersDropped
	return c
}

// GetOrPut atomically returns the queue for id, creating it with s when absent (the
// reference's Dispatcher.getOrPut). created reports whether it was created. An existing
// queue's settings are never replaced.
func (e *Engine) GetOrPut(id Identity, s QueueSettings) (q Queue, created bool) {
	e.mu.RLock()
	q, ok := e.queues[id]
	e.mu.RUnlock()
	if ok {
		return q, false
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if q, ok = e.queues[id]; ok {
		return q, false
	}
	if id.Pattern == dest.PatternEvents {
		q = newEventQueue(id, s, e)
	} else {
		pq := newPointQueue(id, s, e.opts.Now, e)
		pq.consumers = append(pq.consumers, e.waiting[id]...)
		for _, sub := range pq.consumers {
			sub.queue.Store(pq)
		}
		q = pq
	}
	e.queues[id] = q
	e.trieInsertLocked(q)
	return q, true
}

// Lookup returns the queue for exactly id.
func (e *Engine) Lookup(id Identity) (Queue, bool) {
	e.mu.RLock()
	defer e.mu.RUnlock()
	q, ok := e.queues[id]
	return q, ok
}

// Publish routes m to id: into the identity's queue for queues (and events under
// fanout-mode), or straight to the matching subscriptions for events. It records the group
// as existing. dropped reports a PolicyDrop discard. Errors: ErrQueueFull.
func (e *Engine) Publish(id Identity, m *message.Message) (dropped bool, err error) {
	return e.PublishUntil(id, m, nil)
}

// PublishUntil is Publish for a producer that may go away: a wait for room under PolicyBlock
// also ends, with ErrCanceled, when cancel is closed (the producer's connection closed) or
// the engine is closed (shutdown). cancel may be nil.
func (e *Engine) PublishUntil(id Identity, m *message.Message, cancel <-chan struct{}) (dropped bool, err error) {
	e.Published.Add(1)
	e.noteGroup(id.Group)
	if id.Pattern == dest.PatternEvents && !e.opts.FanoutMode {
		// Direct mode writes straight to the subscriptions, unless an operator created a
		// dispatcher queue for this destination: then it goes through that queue and its
		// limits, as in fanout-mode.
		if _, explicit := e.Lookup(id); !explicit {
			if e.fanout(id, m) == 0 {
				e.EventsNoSub.Add(1)
			}
			return false, nil
		}
	}
	if id.Pattern == dest.PatternEventsStore {
		if m.Sequence == 0 {
			return false, ErrNotStored
		}
		e.mu.RLock()
		subs := e.logs[id]
		for _, ls := range subs {
			ls.poller.Kick() // the live tail: each subscription's poller fetches from the log
		}
		e.mu.RUnlock()
		return false, nil
	}
	if id.Pattern == dest.PatternTempQueue && !e.TempOwnerAlive(tempOwner(id.Channel)) {
		return false, ErrNoQueue // its connection closed: the queue is gone for good
	}
	for range 3 {
		q, _ := e.GetOrPut(id, e.opts.Settings(id))
		w := waitCancel{cancel: cancel, stop: e.stop}
		switch q := q.(type) {
		case *PointQueue:
			dropped, err = q.enqueue(m, w)
		case *EventQueue:
			dropped, err = q.enqueue(m, w)
		}
		if err != ErrQueueDeleted {
			return dropped, err
		}
	}
	return false, ErrQueueDeleted
}

// eventsKey keys the events subscription indexes: one per group, and within a group one for
// prefixed (/topic/...) and one for bare destinations, which are different identities.
func eventsKey(group string, bare bool) string {
	if bare {
		return group + "\x00b"
	}
	return group
}

func (e *Engine) noteGroup(g string) {
	e.mu.RLock()
	_, ok := e.groups[g]
	e.mu.RUnlock()
	if !ok {
		e.mu.Lock()
		e.groups[g] = struct{}{}
		e.mu.Unlock()
	}
}

// fanout writes m to every events subscription of id's group whose filter matches id's
// channel, and returns how many received it.
func (e *Engine) fanout(id Identity, m *message.Message) int {
	e.mu.RLock()
	sl := e.events[eventsKey(id.Group, id.Bare)]
	e.mu.RUnlock()
	if sl == nil {
		return 0
	}
	n := 0
	sl.Match(id.Channel, func(sub *Subscription) {
		if sub.Allow != nil && !sub.Allow(id.Channel) {
			return
		}
		if !sub.hasCredit() || !sub.Conn.deliver(sub, m, nil, 0, 1) {
			sub.Dropped.Add(1)
			e.EventsDropped.Add(1)
			return
		}
		n++
	})
	return n
}

// Subscribe registers sub (already validated: pattern events or queues, wildcards only for
// events). Errors: ErrDuplicateSubscription.
func (e *Engine) Subscribe(sub *Subscription) error {
	c := sub.Conn
	c.mu.Lock()
	if _, dup := c.subs[sub.ID]; dup {
		c.mu.Unlock()
		return ErrDuplicateSubscription
	}
	c.subs[sub.ID] = sub
	c.mu.Unlock()
	if sub.Prefetch <= 0 {
		sub.Prefetch = DefaultPrefetch
	}
	switch sub.Dest.Pattern {
	case dest.PatternCommands, dest.PatternQueries:
		e.addResponder(sub)
	case dest.PatternEventsStore:
		if e.opts.Logs == nil {
			e.dropSub(c, sub)
			return ErrNotStored
		}
		id := IdentityOf(sub.Group, sub.Dest)
		ls, err := e.newLogSub(sub, id)
		if err != nil {
			e.dropSub(c, sub)
			return err
		}
		sub.log = ls
		e.mu.Lock()
		e.logs[id] = append(e.logs[id], ls)
		e.mu.Unlock()
		if !e.goroutine("outbox-poller", ls.poller.Run) {
			e.detach(sub)
			return ErrNotStored
		}
	case dest.PatternEvents:
		key := eventsKey(sub.Group, sub.Dest.Bare)
		e.mu.Lock()
		sl := e.events[key]
		if sl == nil {
			sl = sublist.New[*Subscription]()
			e.events[key] = sl
		}
		e.mu.Unlock()
		sl.Insert(sub.Dest.Channel, sub)
	default:
		id := IdentityOf(sub.Group, sub.Dest)
		e.mu.Lock()
		e.waiting[id] = append(e.waiting[id], sub)
		q := e.queues[id]
		e.mu.Unlock()
		if pq, ok := q.(*PointQueue); ok {
			sub.queue.Store(pq)
			pq.addConsumer(sub)
		}
	}
	return nil
}

func (e *Engine) dropSub(c *Conn, sub *Subscription) {
	c.mu.Lock()
	delete(c.subs, sub.ID)
	c.mu.Unlock()
}

// Unsubscribe removes the subscription id of c. Its unacknowledged queue messages go back to
// the queue for redelivery. Errors: ErrUnknownSubscription.
func (e *Engine) Unsubscribe(c *Conn, id string) error {
	c.mu.Lock()
	sub, ok := c.subs[id]
	if ok {
		delete(c.subs, id)
	}
	c.mu.Unlock()
	if !ok {
		return ErrUnknownSubscription
	}
	e.detach(sub)
	return nil
}

// detach unregisters sub and returns its unacknowledged messages.
func (e *Engine) detach(sub *Subscription) {
	c := sub.Conn
	c.mu.Lock()
	sub.closed = true
	byQueue := map[*PointQueue][]uint64{}
	for _, d := range sub.pending { // consumption order
		delete(c.pending, d.key)
		if d.q != nil {
			byQueue[d.q] = append(byQueue[d.q], d.seq)
		}
	}
	sub.pending = nil
	c.mu.Unlock()
	switch sub.Dest.Pattern {
	case dest.PatternCommands, dest.PatternQueries:
		e.removeResponder(sub)
	case dest.PatternEventsStore:
		if sub.log == nil {
			return
		}
		e.mu.Lock()
		removeFromList(e.logs, sub.log.id, sub.log)
		e.mu.Unlock()
		sub.log.stop()
	case dest.PatternEvents:
		key := eventsKey(sub.Group, sub.Dest.Bare)
		e.mu.Lock()
		if sl := e.events[key]; sl != nil {
			sl.Remove(sub.Dest.Channel, sub)
			if sl.Count() == 0 {
				delete(e.events, key) // a group's index lives only while it has subscriptions
			}
		}
		e.mu.Unlock()
	default:
		id := IdentityOf(sub.Group, sub.Dest)
		e.mu.Lock()
		removeFromList(e.waiting, id, sub)
		e.mu.Unlock()
		if q := sub.queue.Load(); q != nil {
			q.removeConsumer(sub, byQueue[q])
			delete(byQueue, q)
		}
		for q, seqs := range byQueue { // deliveries from a queue deleted and recreated since
			q.removeConsumer(sub, seqs)
		}
	}
}

// Ack acknowledges (or, with nack, rejects) the delivery named by key (the ack header on 1.2,
// the message-id on 1.0/1.1, with subID from the subscription header on 1.1). In client ack
// mode it is cumulative. A NACKed queue message is redelivered (or dead-lettered after
// max-deliveries); a NACKed events message is not redelivered, as events retain nothing.
// Errors: ErrUnknownAck.
func (e *Engine) Ack(c *Conn, key, subID string, nack bool) error {
	c.mu.Lock()
	res, ok := c.takeAckLocked(key, subID, true)
	// A queue delivery keeps its subscription's credit until its queue has applied the ACK,
	// so the queue's delivering count never exceeds the prefetch the client asked for.
	for _, r := range res {
		if r.q != nil {
			r.sub.acking++
		}
	}
	c.mu.Unlock()
	if !ok {
		return ErrUnknownAck
	}
	if len(res) == 1 && res[0].q != nil { // the common case, without maps
		r := res[0]
		if nack {
			r.q.nack([]uint64{r.seq})
		} else {
			r.q.ack([]uint64{r.seq})
		}
		c.mu.Lock()
		r.sub.acking--
		q := r.sub.queue.Load()
		c.mu.Unlock()
		if q != nil {
			q.Kick()
		}
		return nil
	}
	var logs map[*logSub][]uint64
	byQueue := map[*PointQueue][]uint64{}
	for _, r := range res {
		switch {
		case r.log != nil:
			if logs == nil {
				logs = map[*logSub][]uint64{}
			}
			logs[r.log] = append(logs[r.log], r.seq)
		case r.q != nil:
			byQueue[r.q] = append(byQueue[r.q], r.seq)
		}
	}
	for ls, seqs := range logs {
		ls.acked(seqs, nack)
	}
	if len(byQueue) == 0 {
		return nil
	}
	for q, seqs := range byQueue {
		if nack {
			q.nack(seqs)
		} else {
			q.ack(seqs)
		}
	}
	// Now the credit is free: let each subscription's queue dispatch into it.
	kick := map[*PointQueue]struct{}{}
	c.mu.Lock()
	for _, r := range res {
		if r.q != nil {
			r.sub.acking--
			if q := r.sub.queue.Load(); q != nil {
				kick[q] = struct{}{}
			}
		}
	}
	c.mu.Unlock()
	for q := range kick {
		q.Kick()
	}
	return nil
}

// CloseConn detaches every subscription of c (unacknowledged queue messages are redelivered).
func (e *Engine) CloseConn(c *Conn) {
	c.mu.Lock()
	c.closed = true
	subs := make([]*Subscription, 0, len(c.subs))
	for _, s := range c.subs {
		subs = append(subs, s)
	}
	clear(c.subs)
	c.mu.Unlock()
	// Cancel in a stable order so that redelivery order is deterministic.
	sort.Slice(subs, func(i, j int) bool { return subs[i].ID < subs[j].ID })
	for _, s := range subs {
		e.detach(s)
	}
}

// Resume is called when c's writer drained below its limit: subscriptions whose deliveries
// were refused get their queues kicked.
func (e *Engine) Resume(c *Conn) {
	c.mu.Lock()
	var qs []*PointQueue
	for _, s := range c.subs {
		if s.stalled {
			s.stalled = false
			if q := s.queue.Load(); q != nil {
				qs = append(qs, q)
			}
			if s.log != nil {
				s.log.poller.Kick()
			}
		}
	}
	c.mu.Unlock()
	for _, q := range qs {
		q.Kick()
	}
}

// retire implements retirer: dead-letters, counts and forwards to OnRetire.
func (e *Engine) retire(q *PointQueue, acked []*message.Message, removed []queue.Removed) {
	for _, r := range removed {
		switch r.Reason {
		case queue.ReasonExpired:
			e.Expired.Add(1)
		case queue.ReasonMaxDeliveries:
			e.deadLetter(q, r.Msg)
		}
	}
	if e.opts.OnRetire != nil {
		e.opts.OnRetire(q.id, acked, removed)
	}
}

// deadLetter publishes a message that exhausted its deliveries to the queue's dead-letter
// destination (default /queue/DLQ.<channel>) with headers saying why. Messages already on a
// dead-letter queue are dropped rather than looped.
func (e *Engine) deadLetter(q *PointQueue, qm *queue.Message) {
	m := qm.Value.(*message.Message)
	q.mu.Lock()
	target := q.settings.DeadLetter
	q.mu.Unlock()
	var id Identity
	if target != "" {
		d, err := dest.Parse(target, dest.PatternQueues)
		if err != nil || d.Pattern != dest.PatternQueues {
			e.log.Warn("invalid dead-letter destination; message dropped", "queue", q.id.String(), "dead_letter", target)
			return
		}
		id = IdentityOf(q.id.Group, d)
	} else {
		id = Identity{Group: q.id.Group, Pattern: dest.PatternQueues, Channel: "DLQ." + q.id.Channel}
	}
	if id == q.id || len(q.id.Channel) > 4 && q.id.Channel[:4] == "DLQ." {
		e.log.Warn("dead letter from a dead-letter queue dropped", "queue", q.id.String())
		return
	}
	dl := &message.Message{
		ID: m.ID, Group: m.Group, Destination: id.Destination(), Body: m.Body,
		TimestampMs: m.TimestampMs, Persistent: m.Persistent,
		Headers: append(append(make([]frame.Header, 0, len(m.Headers)+3), m.Headers...),
			frame.Header{Key: "dlq-original-destination", Value: m.Destination},
			frame.Header{Key: "dlq-reason", Value: "max-deliveries"},
			frame.Header{Key: "dlq-delivery-count", Value: strconv.Itoa(qm.DeliveryCount)}),
	}
	if e.opts.Persist != nil && dl.Persistent {
		if err := e.opts.Persist(id, dl); err != nil {
			e.log.Error("dead letter not stored; it stays on its queue's store until restart", "queue", id.String(), "err", err)
			return
		}
	}
	if _, err := e.Publish(id, dl); err != nil {
		e.log.Warn("dead letter refused", "queue", id.String(), "err", err)
		return
	}
	e.DeadLettered.Add(1)
}

// Groups returns the groups that hold at least one queue, sorted.
func (e *Engine) Groups() []string {
	e.mu.RLock()
	defer e.mu.RUnlock()
	set := map[string]struct{}{}
	for id := range e.queues {
		set[id.Group] = struct{}{}
	}
	out := make([]string, 0, len(set))
	for g := range set {
		out = append(out, g)
	}
	sort.Strings(out)
	return out
}

// Queues returns every queue, sorted by group then destination.
func (e *Engine) Queues() []Queue {
	e.mu.RLock()
	out := make([]Queue, 0, len(e.queues))
	for _, q := range e.queues {
		out = append(out, q)
	}
	e.mu.RUnlock()
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i].Identity(), out[j].Identity()
		if a.Group != b.Group {
			return a.Group < b.Group
		}
		return a.Destination() < b.Destination()
	})
	return out
}

// Restore puts a recovered stored message back on its queue at start-up, bypassing the
// address-full policy (it was accepted before the restart). It counts as delivered once, so
// its next delivery carries redelivered:true (DESIGN §5). Scheduled messages keep their due
// time.
func (e *Engine) Restore(id Identity, m *message.Message) {
	e.noteGroup(id.Group)
	q, _ := e.GetOrPut(id, e.opts.Settings(id))
	pq, ok := q.(*PointQueue)
	if !ok {
		return
	}
	pq.restore(m)
}

// removeFromList removes v from the list m[k] (without reusing the list's array, which
// readers may hold), deleting the key when the list empties. It reports whether the key is
// gone. The caller holds the lock guarding m.
func removeFromList[K comparable, V comparable](m map[K][]V, k K, v V) (emptied bool) {
	l := m[k]
	for i, x := range l {
		if x == v {
			l = append(l[:i:i], l[i+1:]...)
			break
		}
	}
	if len(l) == 0 {
		delete(m, k)
		return true
	}
	m[k] = l
	return false
}

// Close ends every producer's wait for room (they get ErrCanceled) and makes later waits
// fail at once; the broker calls it when shutdown begins. Idempotent.
func (e *Engine) Close() { e.stopped.Do(func() { close(e.stop) }) }
