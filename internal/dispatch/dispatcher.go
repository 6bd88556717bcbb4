package dispatch

import (
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/titan-broker/titan/internal/address"
	"github.com/titan-broker/titan/internal/clock"
	"github.com/titan-broker/titan/internal/dest"
	"github.com/titan-broker/titan/internal/lockorder"
)

// Queue is one dispatcher queue: what the Dispatcher holds for one identity. The events
// pattern's fanout-mode hand-off queue and the queues pattern's point-to-point queue
// implement it. Every method is safe for concurrent use.
type Queue interface {
	// Identity returns the queue's identity.
	Identity() dest.Identity
	// Stats returns a point-in-time view for the admin API and metrics.
	Stats() QueueStats
	// SetPaused pauses (new enqueues wait or fail per policy) or resumes the queue.
	SetPaused(paused bool)
	// SetRingSize changes the ring size at run time (reference 002: lowering it removes
	// nothing at once) and returns the new settings. Errors: ErrNoQueue for a queue without
	// a ring.
	SetRingSize(n int) (address.Settings, error)
	// Purge marks the queue deleted after the Dispatcher forgot it: pending messages are
	// discarded, its consumer and timers stop, blocked producers get ErrQueueDeleted.
	Purge()
}

// Factory makes the queue of one pattern (registered with Dispatcher.Register).
type Factory interface {
	// NewQueue returns a new queue for id with settings s. It is called with the
	// Dispatcher's lock held, so it must not call back into the Dispatcher.
	NewQueue(id dest.Identity, s address.Settings) Queue
}

// SettingsSource returns the settings of a queue that traffic creates (implemented by
// config.Resolver from the address settings).
type SettingsSource interface {
	Settings(id dest.Identity) address.Settings
}

// SettingsStore keeps operator queue settings across restarts (implemented by durable.Log):
// it is told, without Dispatcher locks held, when an operator creates a queue, changes its
// ring size (s the new settings) or deletes it (s nil).
type SettingsStore interface {
	SaveQueueSettings(id dest.Identity, s *address.Settings)
}

// PauseStore is implemented by a SettingsStore (durable.Log) that also keeps which queues
// are paused across restarts; it is told, without Dispatcher locks held, when an operator
// pauses or resumes a queue of a pattern whose operator state persists.
type PauseStore interface {
	SaveQueuePaused(id dest.Identity, paused bool)
}

// Counters are the broker-wide message counters the patterns keep (exported as metrics).
type Counters struct {
	// Published counts messages handed to a pattern for publication.
	Published atomic.Uint64
	// LogDelivered counts events-store messages delivered by outbox pollers.
	LogDelivered atomic.Uint64
	// EventsNoSub counts events messages that matched no subscription.
	EventsNoSub atomic.Uint64
	// EventsDropped counts events deliveries not made: a client-ack subscription at its
	// prefetch, a closing connection, or a subscriber over its limit under
	// slow-consumer-policy DROP (without it, a full connection pauses the producer instead).
	EventsDropped atomic.Uint64
	// DeadLettered counts queue messages moved to their dead-letter queue.
	DeadLettered atomic.Uint64
	// EgressHeadersDropped counts headers left out of MESSAGE frames because the
	// connection's STOMP version cannot represent them (DESIGN §6), once per delivery.
	EgressHeadersDropped atomic.Uint64
	// Expired counts queue messages removed by their expires header.
	Expired atomic.Uint64
	// DestinationRefusals counts destination creations refused by MaxDestinations (or a
	// router's per-connection limit, which counts here too).
	DestinationRefusals atomic.Uint64
	// GroupRefusals counts destination creations refused by MaxGroups.
	GroupRefusals atomic.Uint64
	// Reclaimed counts idle, empty, traffic-created destinations removed by Reclaim.
	Reclaimed atomic.Uint64
}

// Options configure a Dispatcher.
type Options struct {
	// Settings returns traffic-created queues' settings (default address.Defaults).
	Settings SettingsSource
	// Store, when set, keeps operator-created queue settings across restarts.
	Store SettingsStore
	// Clock is the time source (default clock.Real).
	Clock clock.Clock
	// MaxDestinations bounds the destinations traffic can create: dispatcher queues plus
	// events-store logs (0: unlimited). Operator-created queues and queues restored at
	// start-up always succeed but count.
	MaxDestinations int
	// MaxGroups bounds the groups holding destinations that traffic can create: a SEND
	// that would create the first destination of one more group is refused with
	// ErrGroupLimit (0: unlimited).
	MaxGroups int
	// Forget, when set, is told (without Dispatcher locks held) when Reclaim removes an
	// idle destination, so its store stream and metadata go too.
	Forget Forgetter
}

// Forgetter drops what the store holds for a destination Reclaim removed (implemented by
// durable.Log: its empty stream and cached name).
type Forgetter interface {
	ForgetDestination(id dest.Identity)
}

// Dispatcher maps each exact identity to its one queue (reference 000's Dispatcher:
// getOrPut, lookup, delete, searchAll). Patterns register the Factory of their queue type;
// the map is shared so that operators see every queue in one place. Safe for concurrent use.
type Dispatcher struct {
	Counters

	opts      Options
	factories [dest.MaxPattern + 1]Factory
	persisted [dest.MaxPattern + 1]bool // operator settings of these patterns are stored

	mu     lockorder.RWMutex[lockorder.DispatcherRank] // guards queues and trie; never held while taking a queue's or Conn's lock (except in Factory.NewQueue)
	queues map[dest.Identity]*queueEntry
	// gen counts additions to and removals from queues (Generation); written with mu held.
	gen atomic.Uint64
	// hot is the entry Get or Exists found last (nil after a Delete): producers send to the
	// same destination frame after frame, and comparing its identity costs less than hashing
	// it under mu (two lookups per SEND). Stored only while mu is held for reading, and
	// cleared by Delete while it holds mu, so it never outlives its queue's map entry.
	hot     atomic.Pointer[queueEntry]
	logs    map[dest.Identity]*logEntry // names of patterns registered with RegisterLog
	manual  map[dest.Identity]bool      // operator-created or restored: never reclaimed
	idle    map[dest.Identity]idleMark  // Reclaim's marks: guarded by reclaimMu
	groups  map[string]int              // destinations (queues and logs) per group
	trie    map[trieRoot]*trieNode
	stop    chan struct{} // closed by Close: ends every wait for room
	stopped sync.Once

	logPatterns [dest.MaxPattern + 1]bool
	reclaimMu   lockorder.Mutex[lockorder.ReclaimRank]
}

// queueEntry is a queue in Dispatcher.queues, with its identity for the hot-entry check.
type queueEntry struct {
	id dest.Identity
	q  Queue
}

// logEntry is an events-store log the dispatcher knows by name (it holds no queue).
type logEntry struct{ last atomic.Int64 } // unix ms of the last Ensure

// idleMark is what Reclaim saw of a queue when it first found it idle.
type idleMark struct {
	enqueued uint64
	since    time.Time
}

type defaultSettings struct{}

func (defaultSettings) Settings(id dest.Identity) address.Settings { return address.Defaults(id) }

// New returns an empty Dispatcher.
func New(o Options) *Dispatcher {
	if o.Settings == nil {
		o.Settings = defaultSettings{}
	}
	if o.Clock == nil {
		o.Clock = clock.Real
	}
	return &Dispatcher{opts: o, queues: make(map[dest.Identity]*queueEntry), logs: make(map[dest.Identity]*logEntry),
		manual: make(map[dest.Identity]bool), idle: make(map[dest.Identity]idleMark), groups: make(map[string]int),
		trie: make(map[trieRoot]*trieNode), stop: make(chan struct{})}
}

// Register makes f the factory of p's queues. persist says whether operator-created queues
// of p have their settings stored. Call before use.
func (d *Dispatcher) Register(p dest.Pattern, f Factory, persist bool) {
	d.factories[p] = f
	d.persisted[p] = persist
}

// Stop is closed when the dispatcher closes; a publisher's wait for room ends then.
func (d *Dispatcher) Stop() <-chan struct{} { return d.stop }

// Close ends every producer's wait for room (they get ErrCanceled) and makes later waits
// fail at once; the broker calls it when shutdown begins. Idempotent.
func (d *Dispatcher) Close() { d.stopped.Do(func() { close(d.stop) }) }

// Now returns the dispatcher clock's time.
func (d *Dispatcher) Now() time.Time { return d.opts.Clock.Now() }

// Settings returns the effective settings a traffic-created queue for id would get.
func (d *Dispatcher) Settings(id dest.Identity) address.Settings { return d.opts.Settings.Settings(id) }

// RegisterLog makes p a pattern whose destinations are logs the dispatcher knows by name
// only (events-store): they count toward MaxDestinations (Ensure) but hold no queue. Call
// before use.
func (d *Dispatcher) RegisterLog(p dest.Pattern) { d.logPatterns[p] = true }

// Get returns the queue for id, creating it with the settings a traffic-created queue gets
// (Settings) when absent; the settings are only computed then. A creation is refused with
// ErrDestinationLimit when MaxDestinations destinations exist. Errors as GetOrPut.
func (d *Dispatcher) Get(id dest.Identity) (Queue, error) {
	if q, ok := d.lookupHot(id); ok {
		return q, nil
	}
	q, _, err := d.getOrPut(id, d.Settings(id), true, false)
	return q, err
}

// lookupHot returns id's queue: the hot entry's when it is id's, else the map's (which then
// becomes the hot entry).
func (d *Dispatcher) lookupHot(id dest.Identity) (Queue, bool) {
	if e := d.hot.Load(); e != nil && e.id == id {
		return e.q, true
	}
	d.mu.RLock()
	e, ok := d.queues[id]
	if ok {
		d.hot.Store(e) // under mu: a Delete of e clears hot after this
	}
	d.mu.RUnlock()
	if !ok {
		return nil, false
	}
	return e.q, true
}

// GetOrPut atomically returns the queue for id, creating it with s by its pattern's factory
// when absent (the reference's Dispatcher.getOrPut). created reports whether it was
// created. An existing queue's settings are never replaced. It is the operator's and
// recovery's way in: it is not bounded by MaxDestinations and its queues are never
// reclaimed. Errors: ErrNoQueue when the pattern has no dispatcher queues.
func (d *Dispatcher) GetOrPut(id dest.Identity, s address.Settings) (q Queue, created bool, err error) {
	return d.getOrPut(id, s, false, true)
}

// Restore returns the queue for id, creating it with its traffic settings when absent, for
// a message recovered at start-up: unbounded by MaxDestinations (the message was accepted
// before the restart), and reclaimable like any traffic-created queue once idle.
func (d *Dispatcher) Restore(id dest.Identity) (Queue, error) {
	q, _, err := d.getOrPut(id, d.Settings(id), false, false)
	return q, err
}

func (d *Dispatcher) getOrPut(id dest.Identity, s address.Settings, limited, manual bool) (q Queue, created bool, err error) {
	d.mu.RLock()
	e, ok := d.queues[id]
	d.mu.RUnlock()
	if ok {
		return e.q, false, nil
	}
	f := d.factory(id.Pattern)
	if f == nil {
		return nil, false, ErrNoQueue
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if e, ok = d.queues[id]; ok {
		return e.q, false, nil
	}
	if limited {
		if err := d.admitLocked(id); err != nil {
			return nil, false, err
		}
	}
	q = f.NewQueue(id, s)
	d.queues[id] = &queueEntry{id: id, q: q}
	d.gen.Add(1)
	d.groups[id.Group]++
	if manual {
		d.manual[id] = true
	}
	d.trieInsertLocked(q)
	return q, true, nil
}

// admitLocked refuses one more destination for id: ErrDestinationLimit when
// MaxDestinations exist, ErrGroupLimit when id's group is new and MaxGroups groups hold
// destinations. It counts the refusal. d.mu must be held.
func (d *Dispatcher) admitLocked(id dest.Identity) error {
	if d.opts.MaxDestinations > 0 && len(d.queues)+len(d.logs) >= d.opts.MaxDestinations {
		d.DestinationRefusals.Add(1)
		return ErrDestinationLimit
	}
	if d.opts.MaxGroups > 0 && d.groups[id.Group] == 0 && len(d.groups) >= d.opts.MaxGroups {
		d.GroupRefusals.Add(1)
		return ErrGroupLimit
	}
	return nil
}

// Exists reports whether id's destination exists: its queue, or its log for a pattern
// registered with RegisterLog.
func (d *Dispatcher) Exists(id dest.Identity) bool {
	if e := d.hot.Load(); e != nil && e.id == id {
		return true
	}
	d.mu.RLock()
	defer d.mu.RUnlock()
	if e, ok := d.queues[id]; ok {
		d.hot.Store(e) // under mu: a Delete of e clears hot after this
		return true
	}
	_, ok := d.logs[id]
	return ok
}

// Ensure makes id's destination exist, creating it as traffic would (Get) when absent:
// its queue, or for a RegisterLog pattern its log's name. created reports a creation.
// A log's last use is refreshed, for Reclaim. Errors: ErrDestinationLimit (nothing was
// created), ErrNoQueue for a pattern with neither queues nor logs.
func (d *Dispatcher) Ensure(id dest.Identity) (created bool, err error) {
	if !id.Pattern.Valid() || !d.logPatterns[id.Pattern] {
		if d.factory(id.Pattern) == nil {
			return false, ErrNoQueue
		}
		d.mu.RLock()
		_, ok := d.queues[id]
		d.mu.RUnlock()
		if ok {
			return false, nil
		}
		_, created, err = d.getOrPut(id, d.Settings(id), true, false)
		return created, err
	}
	now := d.opts.Clock.Now().UnixMilli()
	d.mu.RLock()
	e, ok := d.logs[id]
	d.mu.RUnlock()
	if ok {
		e.last.Store(now)
		return false, nil
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if e, ok = d.logs[id]; ok {
		e.last.Store(now)
		return false, nil
	}
	if err := d.admitLocked(id); err != nil {
		return false, err
	}
	e = &logEntry{}
	e.last.Store(now)
	d.logs[id] = e
	d.groups[id.Group]++
	return true, nil
}

// CountRefusal counts a destination creation refused by a per-connection limit (the
// router's destination stage) in DestinationRefusals.
func (d *Dispatcher) CountRefusal() { d.DestinationRefusals.Add(1) }

// KnownLog records an existing log (found in the store at start-up): it counts toward
// MaxDestinations without being bounded by it.
func (d *Dispatcher) KnownLog(id dest.Identity) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if _, ok := d.logs[id]; !ok {
		e := &logEntry{}
		e.last.Store(d.opts.Clock.Now().UnixMilli())
		d.logs[id] = e
		d.groups[id.Group]++
	}
}

// GroupCount returns how many groups hold at least one destination (queue or log).
func (d *Dispatcher) GroupCount() int {
	d.mu.RLock()
	defer d.mu.RUnlock()
	return len(d.groups)
}

// Destinations returns how many destinations exist: dispatcher queues plus known logs.
func (d *Dispatcher) Destinations() int {
	d.mu.RLock()
	defer d.mu.RUnlock()
	return len(d.queues) + len(d.logs)
}

// MaxDestinations returns the configured bound (0: unlimited).
func (d *Dispatcher) MaxDestinations() int { return d.opts.MaxDestinations }

// Reclaim removes the traffic-created queues that have been empty, without consumers and
// without enqueues for at least idle (the first call that sees a queue idle marks it; a
// later call past idle removes it), and forgets them in the store (Options.Forget).
// Operator-created and restored queues are kept. Events-store logs are not reclaimed: a
// log's sequences are durable subscribers' positions. It returns how many it removed.
// Callers run it periodically (the broker, every idle/4).
func (d *Dispatcher) Reclaim(idle time.Duration) int {
	d.reclaimMu.Lock()
	defer d.reclaimMu.Unlock()
	now := d.opts.Clock.Now()
	d.mu.RLock()
	cand := make([]Queue, 0, len(d.queues))
	for id, e := range d.queues {
		if !d.manual[id] {
			cand = append(cand, e.q)
		}
	}
	d.mu.RUnlock()
	seen := make(map[dest.Identity]bool, len(cand))
	removed := 0
	for _, q := range cand {
		id := q.Identity()
		st := q.Stats() // takes the queue's lock: without d.mu
		if st.Messages > 0 || st.Consumers > 0 {
			continue
		}
		seen[id] = true
		m, ok := d.idle[id]
		if !ok || m.enqueued != st.Enqueued {
			d.idle[id] = idleMark{enqueued: st.Enqueued, since: now}
			continue
		}
		if now.Sub(m.since) < idle {
			continue
		}
		if err := d.Delete(id, false); err == nil {
			removed++
			d.Reclaimed.Add(1)
			delete(seen, id)
			if d.opts.Forget != nil {
				d.opts.Forget.ForgetDestination(id)
			}
		}
	}
	for id := range d.idle {
		if !seen[id] {
			delete(d.idle, id)
		}
	}
	return removed
}

func (d *Dispatcher) factory(p dest.Pattern) Factory {
	if !p.Valid() {
		return nil
	}
	return d.factories[p]
}

// Lookup returns the queue for exactly id.
func (d *Dispatcher) Lookup(id dest.Identity) (Queue, bool) {
	d.mu.RLock()
	defer d.mu.RUnlock()
	e, ok := d.queues[id]
	if !ok {
		return nil, false
	}
	return e.q, true
}

// Create makes the queue for id with s unless one exists (idempotent: an existing queue keeps
// its settings). It returns the queue and whether it was created. Errors: ErrNoQueue for a
// pattern without dispatcher queues.
func (d *Dispatcher) Create(id dest.Identity, s address.Settings) (Queue, bool, error) {
	q, created, err := d.GetOrPut(id, s)
	if err == nil && created && d.opts.Store != nil && d.persisted[id.Pattern] {
		d.opts.Store.SaveQueueSettings(id, &s)
	}
	return q, created, err
}

// SetPaused pauses or resumes the queue for id. Errors: ErrNoQueue.
func (d *Dispatcher) SetPaused(id dest.Identity, paused bool) error {
	q, ok := d.Lookup(id)
	if !ok {
		return ErrNoQueue
	}
	q.SetPaused(paused)
	if ps, ok := d.opts.Store.(PauseStore); ok && d.persisted[id.Pattern] {
		ps.SaveQueuePaused(id, paused)
	}
	return nil
}

// SetRingSize changes the ring size of the queue for id (reference 002). Errors: ErrNoQueue.
func (d *Dispatcher) SetRingSize(id dest.Identity, n int) error {
	q, ok := d.Lookup(id)
	if !ok {
		return ErrNoQueue
	}
	s, err := q.SetRingSize(n)
	if err != nil {
		return err
	}
	d.mu.Lock()
	if e, ok := d.queues[id]; ok && e.q == q {
		d.manual[id] = true // its settings are stored now: an operator's queue
	}
	d.mu.Unlock()
	if d.opts.Store != nil {
		d.opts.Store.SaveQueueSettings(id, &s)
	}
	return nil
}

// Delete removes the queue for id. A queue holding messages is refused with
// ErrQueueNotEmpty unless force is set; force discards its pending messages and stops its
// consumer. The next SEND creates a fresh queue. Errors: ErrNoQueue, ErrQueueNotEmpty.
func (d *Dispatcher) Delete(id dest.Identity, force bool) error {
	q, ok := d.Lookup(id)
	if !ok {
		return ErrNoQueue
	}
	// Stats takes the queue's lock, so it runs without d.mu (lock order, LOCKS.md).
	if !force && q.Stats().Messages > 0 {
		return ErrQueueNotEmpty
	}
	d.mu.Lock()
	if e, ok := d.queues[id]; !ok || e.q != q {
		d.mu.Unlock()
		return ErrNoQueue // deleted meanwhile
	}
	delete(d.queues, id)
	d.gen.Add(1)
	if e := d.hot.Load(); e != nil && e.id == id {
		d.hot.Store(nil)
	}
	if d.groups[id.Group]--; d.groups[id.Group] <= 0 {
		delete(d.groups, id.Group)
	}
	manual := d.manual[id]
	delete(d.manual, id)
	d.trieRemoveLocked(q)
	d.mu.Unlock()
	if d.opts.Store != nil && manual { // only operator queues have stored settings
		d.opts.Store.SaveQueueSettings(id, nil)
	}
	q.Purge()
	return nil
}

// DeleteWhere force-deletes every queue of pattern p whose channel starts with prefix (a
// connection's temp-queues when it closes).
func (d *Dispatcher) DeleteWhere(p dest.Pattern, prefix string) {
	d.mu.RLock()
	var ids []dest.Identity
	for id := range d.queues {
		if id.Pattern == p && len(id.Channel) > len(prefix) && id.Channel[:len(prefix)] == prefix {
			ids = append(ids, id)
		}
	}
	d.mu.RUnlock()
	for _, id := range ids {
		_ = d.Delete(id, true)
	}
}

// Groups returns the groups that hold at least one queue, sorted.
func (d *Dispatcher) Groups() []string {
	d.mu.RLock()
	defer d.mu.RUnlock()
	set := map[string]struct{}{}
	for id := range d.queues {
		set[id.Group] = struct{}{}
	}
	out := make([]string, 0, len(set))
	for g := range set {
		out = append(out, g)
	}
	sort.Strings(out)
	return out
}

// Generation changes whenever a queue is added or removed, so equal readings before and
// after Queues mean the list it returned is still the set of queues (the admin API keeps
// its sorted list on it). Safe for concurrent use.
func (d *Dispatcher) Generation() uint64 { return d.gen.Load() }

// Queues returns every queue, sorted by group then destination.
func (d *Dispatcher) Queues() []Queue {
	d.mu.RLock()
	keyed := make([]keyedQueue, 0, len(d.queues))
	for _, e := range d.queues {
		keyed = append(keyed, keyedQueue{group: e.id.Group, dest: e.id.Destination(), q: e.q})
	}
	d.mu.RUnlock()
	// Each destination's name is built once, not at every comparison (a shutdown with
	// 100,000 queues spent a second building them).
	slices.SortFunc(keyed, func(a, b keyedQueue) int {
		if c := strings.Compare(a.group, b.group); c != 0 {
			return c
		}
		return strings.Compare(a.dest, b.dest)
	})
	out := make([]Queue, len(keyed))
	for i, k := range keyed {
		out[i] = k.q
	}
	return out
}

// keyedQueue is a queue with its sort key, for Queues.
type keyedQueue struct {
	group, dest string
	q           Queue
}

// QueueStats is a point-in-time view of one queue for the admin API and metrics.
type QueueStats struct {
	Group       string
	Destination string
	Pattern     string
	// Messages is every message held (Artemis messageCount): ready + delivering + scheduled
	// for queues; buffered for events.
	Messages   int
	Delivering int
	Scheduled  int
	// PendingBytes is the bytes held.
	PendingBytes int64
	Consumers    int
	Paused       bool
	Settings     address.Settings
	Enqueued     uint64
	Dispatched   uint64
	Acked        uint64
	Dropped      uint64 // refused by DROP policy, or (events) drained with no subscriber
	RingRemoved  uint64
	Expired      uint64
	DeadLettered uint64
}
