package dispatch

import (
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/titan-broker/titan/internal/address"
	"github.com/titan-broker/titan/internal/clock"
	"github.com/titan-broker/titan/internal/dest"
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
}

// Options configure a Dispatcher.
type Options struct {
	// Settings returns traffic-created queues' settings (default address.Defaults).
	Settings SettingsSource
	// Store, when set, keeps operator-created queue settings across restarts.
	Store SettingsStore
	// Clock is the time source (default clock.Real).
	Clock clock.Clock
}

// Dispatcher maps each exact identity to its one queue (reference 000's Dispatcher:
// getOrPut, lookup, delete, searchAll). Patterns register the Factory of their queue type;
// the map is shared so that operators see every queue in one place. Safe for concurrent use.
type Dispatcher struct {
	Counters

	opts      Options
	factories [dest.MaxPattern + 1]Factory
	persisted [dest.MaxPattern + 1]bool // operator settings of these patterns are stored

	mu      sync.RWMutex // guards queues and trie; never held while taking a queue's or Conn's lock (except in Factory.NewQueue)
	queues  map[dest.Identity]Queue
	trie    map[trieRoot]*trieNode
	stop    chan struct{} // closed by Close: ends every wait for room
	stopped sync.Once
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
	return &Dispatcher{opts: o, queues: make(map[dest.Identity]Queue), trie: make(map[trieRoot]*trieNode), stop: make(chan struct{})}
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

// Get returns the queue for id, creating it with the settings a traffic-created queue gets
// (Settings) when absent; the settings are only computed then. Errors as GetOrPut.
func (d *Dispatcher) Get(id dest.Identity) (Queue, error) {
	d.mu.RLock()
	q, ok := d.queues[id]
	d.mu.RUnlock()
	if ok {
		return q, nil
	}
	q, _, err := d.GetOrPut(id, d.Settings(id))
	return q, err
}

// GetOrPut atomically returns the queue for id, creating it with s by its pattern's factory
// when absent (the reference's Dispatcher.getOrPut). created reports whether it was
// created. An existing queue's settings are never replaced. Errors: ErrNoQueue when the
// pattern has no dispatcher queues.
func (d *Dispatcher) GetOrPut(id dest.Identity, s address.Settings) (q Queue, created bool, err error) {
	d.mu.RLock()
	q, ok := d.queues[id]
	d.mu.RUnlock()
	if ok {
		return q, false, nil
	}
	f := d.factory(id.Pattern)
	if f == nil {
		return nil, false, ErrNoQueue
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if q, ok = d.queues[id]; ok {
		return q, false, nil
	}
	q = f.NewQueue(id, s)
	d.queues[id] = q
	d.trieInsertLocked(q)
	return q, true, nil
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
	q, ok := d.queues[id]
	return q, ok
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
	if d.queues[id] != q {
		d.mu.Unlock()
		return ErrNoQueue // deleted meanwhile
	}
	delete(d.queues, id)
	d.trieRemoveLocked(q)
	d.mu.Unlock()
	if d.opts.Store != nil {
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

// Queues returns every queue, sorted by group then destination.
func (d *Dispatcher) Queues() []Queue {
	d.mu.RLock()
	out := make([]Queue, 0, len(d.queues))
	for _, q := range d.queues {
		out = append(out, q)
	}
	d.mu.RUnlock()
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i].Identity(), out[j].Identity()
		if a.Group != b.Group {
			return a.Group < b.Group
		}
		return a.Destination() < b.Destination()
	})
	return out
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
