package topicsub

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/titan-broker/titan/internal/address"
	"github.com/titan-broker/titan/internal/dest"
	"github.com/titan-broker/titan/internal/dispatch"
	"github.com/titan-broker/titan/internal/selector"
)

// MetaKey is the store metadata key holding the registry (a JSON array of Sub).
const MetaKey = "topic-durable-subscriptions"

// QueuePrefix is the first channel token of every durable subscription's queue
// (/queue/$durable/...): '$' keeps it apart from the names applications give queues.
const QueuePrefix = "$durable"

// Key identifies a durable subscription.
type Key struct {
	// Group is the destination group of the SUBSCRIBE ("default" when none).
	Group string `json:"group"`
	// Owner is the CONNECT client-id for ActiveMQ and Artemis subscriptions, "" for
	// RabbitMQ's.
	Owner string `json:"owner,omitempty"`
	// Name is the subscription name (RabbitMQ: the SUBSCRIBE id).
	Name string `json:"name"`
}

// Sub is one durable subscription.
type Sub struct {
	Key
	// Filter is the events destination it subscribes to, possibly a wildcard filter.
	Filter dest.Destination `json:"filter"`
	// Queue is the identity of the queue that holds its messages.
	Queue dest.Identity `json:"queue"`
	// Selector is the JMS message selector of the SUBSCRIBE that made it ("" for none): only
	// messages it selects enter the queue (Artemis: a durable subscription's filter).
	Selector string `json:"selector,omitempty"`
	// Created is when the subscription was made (or last retargeted).
	Created time.Time `json:"created"`

	feed *Feed // its entry in the fan-out index
}

// Meta is the metadata port of the store (implemented by store.Store): SetMeta is durable
// (fsync'd) when it returns.
type Meta interface {
	SetMeta(key string, value []byte) error
	Meta(key string) (value []byte, ok bool, err error)
}

// Options configure a Registry.
type Options struct {
	// Dispatcher creates, finds and deletes the subscriptions' queues (queues pattern).
	Dispatcher *dispatch.Dispatcher
	// Meta stores the registry; nil keeps it in memory only (--store memory).
	Meta Meta
	// Max bounds the durable subscriptions, counted together with Others (0: no limit;
	// limits.max-durable-subscriptions).
	Max int
	// Others returns how many other durable subscriptions (events-store durable-names)
	// count against Max; nil counts none.
	Others func() int
	// Now is the clock (default time.Now).
	Now func() time.Time
}

// Registry is the set of durable topic subscriptions. Create with New, then Load.
type Registry struct {
	o Options

	mu   sync.Mutex // serializes changes and the metadata write
	subs map[Key]*Sub

	idx Index        // the subscriptions' feeds
	n   atomic.Int64 // len(subs), read without mu by Feeds and Count
}

// New returns an empty Registry.
func New(o Options) *Registry {
	if o.Now == nil {
		o.Now = time.Now
	}
	return &Registry{o: o, subs: map[Key]*Sub{}}
}

// QueueOf returns the identity of the queue of the subscription k:
// (k.Group, queues, "$durable.<owner>.<name>"), owner "~" when empty, each part escaped.
func QueueOf(k Key) dest.Identity {
	owner := "~"
	if k.Owner != "" {
		owner = escape(k.Owner)
	}
	return dest.Identity{Group: k.Group, Pattern: dest.PatternQueues, Channel: QueuePrefix + "." + owner + "." + escape(k.Name)}
}

// escape makes s one valid channel token: '%', '.', '/', '~', '*', '>', '#', control bytes
// and an empty s are percent-encoded.
func escape(s string) string {
	if s == "" {
		return "%"
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '%' || c == '.' || c == '/' || c == '~' || c == '*' || c == '>' || c == '#' || c < 0x20 || c == 0x7f:
			fmt.Fprintf(&b, "%%%02X", c)
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}

// Load reads the stored registry and makes each subscription's queue exist (with the
// address settings of its topic when it has none yet). Call once, at start, before traffic.
func (r *Registry) Load() error {
	if r.o.Meta == nil {
		return nil
	}
	v, ok, err := r.o.Meta.Meta(MetaKey)
	if err != nil || !ok {
		return err
	}
	var all []Sub
	if err := json.Unmarshal(v, &all); err != nil {
		return fmt.Errorf("topicsub: stored registry: %w", err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for i := range all {
		s := all[i]
		s.feed = &Feed{Queue: s.Queue}
		if s.Selector != "" {
			sel, err := selector.Compile(s.Selector)
			if err != nil {
				return fmt.Errorf("topicsub: stored selector of %s: %w", s.Queue, err)
			}
			s.feed.Sel = sel
		}
		if _, ok := r.o.Dispatcher.Lookup(s.Queue); !ok {
			_, _, _ = r.o.Dispatcher.Create(s.Queue, r.settings(s.Key, s.Filter))
		}
		r.subs[s.Key] = &s
		r.indexLocked(&s, true)
	}
	r.n.Store(int64(len(r.subs)))
	return nil
}

// settings are the address settings of the topic the subscription filters (matched on its
// channel, with the queues pattern's defaults): the topic's bounds apply to its queue.
func (r *Registry) settings(k Key, f dest.Destination) address.Settings {
	return r.o.Dispatcher.Settings(dest.Identity{Group: k.Group, Pattern: dest.PatternQueues, Channel: f.Channel})
}

// indexLocked adds (add) or removes s from the fan-out index. r.mu held.
func (r *Registry) indexLocked(s *Sub, add bool) {
	if add {
		r.idx.Add(s.Group, s.Filter, s.feed)
	} else {
		r.idx.Remove(s.Group, s.Filter, s.feed)
	}
}

// saveLocked writes the registry (fsync'd). r.mu held.
func (r *Registry) saveLocked() error {
	if r.o.Meta == nil {
		return nil
	}
	all := make([]Sub, 0, len(r.subs))
	for _, s := range r.subs {
		all = append(all, *s)
	}
	sort.Slice(all, func(i, j int) bool { return less(all[i].Key, all[j].Key) })
	data, err := json.Marshal(all)
	if err != nil {
		return err
	}
	return r.o.Meta.SetMeta(MetaKey, data)
}

func less(a, b Key) bool {
	if a.Group != b.Group {
		return a.Group < b.Group
	}
	if a.Owner != b.Owner {
		return a.Owner < b.Owner
	}
	return a.Name < b.Name
}

// Attach returns the queue of the durable subscription k over filter (an events
// destination; k and filter are copied, so they may point into a read buffer), creating it when it does not exist: its queue is made and the registry
// stored before Attach returns, so messages published from then on are kept, across
// restarts too. A subscription that exists with another filter is moved to the new one
// (Artemis and RabbitMQ recreate it): its pending messages are dropped. created reports a
// new subscription.
//
// Errors: dispatch.ErrDurableSubscriptionLimit (a new one over Options.Max; nothing made),
// dispatch.ErrDurableSubscriptionInUse (moving one that has consumers), a store error
// (nothing made).
func (r *Registry) Attach(k Key, filter dest.Destination) (queue dest.Identity, created bool, err error) {
	return r.AttachSelected(k, filter, nil)
}

// AttachSelected is Attach with a JMS message selector (nil for none): only messages sel
// selects enter the subscription's queue, so what it rejects is never stored for it
// (Artemis's durable subscription filter). A subscription that exists with another
// selector is made afresh, as for another filter (Artemis recreates its queue).
func (r *Registry) AttachSelected(k Key, filter dest.Destination, sel *selector.Selector) (queue dest.Identity, created bool, err error) {
	src := ""
	if sel != nil {
		src = sel.String()
	}
	// k's strings may point into a connection's read buffer: the registry keeps copies.
	k = Key{Group: strings.Clone(k.Group), Owner: strings.Clone(k.Owner), Name: strings.Clone(k.Name)}
	r.mu.Lock()
	defer r.mu.Unlock()
	if s, ok := r.subs[k]; ok {
		if _, live := r.o.Dispatcher.Lookup(s.Queue); live && s.Filter == filter && s.Selector == src {
			return s.Queue, false, nil
		}
		// Moved to another topic, or its queue was deleted by an operator: start afresh.
		if q, ok := r.o.Dispatcher.Lookup(s.Queue); ok {
			if q.Stats().Consumers > 0 {
				return dest.Identity{}, false, dispatch.ErrDurableSubscriptionInUse
			}
			_ = r.o.Dispatcher.Delete(s.Queue, true)
		}
		r.indexLocked(s, false)
		delete(r.subs, k)
	} else if r.o.Max > 0 {
		others := 0
		if r.o.Others != nil {
			others = r.o.Others()
		}
		if len(r.subs)+others >= r.o.Max {
			return dest.Identity{}, false, dispatch.ErrDurableSubscriptionLimit
		}
		created = true
	} else {
		created = true
	}
	s := &Sub{Key: k, Filter: filter, Queue: QueueOf(k), Selector: src, Created: r.o.Now().UTC()}
	s.feed = &Feed{Queue: s.Queue, Sel: sel}
	s.Filter.Channel = strings.Clone(filter.Channel)
	if _, _, err := r.o.Dispatcher.Create(s.Queue, r.settings(k, filter)); err != nil {
		return dest.Identity{}, false, err
	}
	r.subs[k] = s
	if err := r.saveLocked(); err != nil {
		delete(r.subs, k)
		_ = r.o.Dispatcher.Delete(s.Queue, true)
		r.n.Store(int64(len(r.subs)))
		return dest.Identity{}, false, err
	}
	r.indexLocked(s, true)
	r.n.Store(int64(len(r.subs)))
	return s.Queue, created, nil
}

// Delete removes the durable subscription k and its queue with the messages it holds
// (RabbitMQ's UNSUBSCRIBE with durable:true, ActiveMQ's and Artemis's UNSUBSCRIBE naming
// it, the operator's titan durable delete). Errors: dispatch.ErrNoDurableSubscription,
// dispatch.ErrDurableSubscriptionInUse (a connection still consumes it), a store error (the
// subscription stays).
func (r *Registry) Delete(k Key) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	s, ok := r.subs[k]
	if !ok {
		return dispatch.ErrNoDurableSubscription
	}
	q, live := r.o.Dispatcher.Lookup(s.Queue)
	if live && q.Stats().Consumers > 0 {
		return dispatch.ErrDurableSubscriptionInUse
	}
	delete(r.subs, k)
	if err := r.saveLocked(); err != nil {
		r.subs[k] = s
		return err
	}
	r.indexLocked(s, false)
	r.n.Store(int64(len(r.subs)))
	if live {
		_ = r.o.Dispatcher.Delete(s.Queue, true)
	}
	return nil
}

// Feeds appends to dst, and returns, the queue of every durable subscription whose filter
// matches the events destination id (same group, same bare-ness, dest.Match on the channel)
// and whose selector selects m (Artemis: a durable subscription's selector decides what
// enters its queue); m is only read. It costs one atomic load when there are none, and
// allocates only to grow dst (nothing when no subscription is fed). A subscription whose
// queue an operator deleted is forgotten instead (not recreated by the SEND).
func (r *Registry) Feeds(id dest.Identity, m selector.Message, dst []dest.Identity) []dest.Identity {
	if r.n.Load() == 0 {
		return dst
	}
	var gone []dest.Identity
	r.idx.Match(id, func(f *Feed) {
		if _, ok := r.o.Dispatcher.Lookup(f.Queue); !ok {
			gone = append(gone, f.Queue) // an operator deleted its queue (titan queue delete)
			return
		}
		if f.Sel.Matches(m) { // a nil selector selects every message
			dst = append(dst, f.Queue)
		}
	})
	for _, q := range gone {
		r.dropDeleted(q)
	}
	return dst
}

// dropDeleted forgets the subscription whose queue q an operator deleted: deleting a
// durable subscription's queue deletes the subscription, as in Artemis.
func (r *Registry) dropDeleted(q dest.Identity) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.o.Dispatcher.Lookup(q); ok {
		return // made again meanwhile
	}
	for k, s := range r.subs {
		if s.Queue == q {
			delete(r.subs, k)
			if err := r.saveLocked(); err != nil {
				r.subs[k] = s
				return
			}
			r.indexLocked(s, false)
			r.n.Store(int64(len(r.subs)))
			return
		}
	}
}

// Count returns the number of durable topic subscriptions.
func (r *Registry) Count() int { return int(r.n.Load()) }

// List returns every durable topic subscription, sorted by key.
func (r *Registry) List() []Sub {
	r.mu.Lock()
	out := make([]Sub, 0, len(r.subs))
	for _, s := range r.subs {
		out = append(out, *s)
	}
	r.mu.Unlock()
	sort.Slice(out, func(i, j int) bool { return less(out[i].Key, out[j].Key) })
	return out
}

// Find returns the subscription whose queue is q.
func (r *Registry) Find(q dest.Identity) (Sub, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, s := range r.subs {
		if s.Queue == q {
			return *s, true
		}
	}
	return Sub{}, false
}

// AttachDurable is AttachSelected for the router's port (router.DurableTopics).
func (r *Registry) AttachDurable(group, owner, name string, filter dest.Destination, sel *selector.Selector) (dest.Identity, error) {
	q, _, err := r.AttachSelected(Key{Group: group, Owner: owner, Name: name}, filter, sel)
	return q, err
}

// DeleteDurable is Delete for the router's port (router.DurableTopics).
func (r *Registry) DeleteDurable(group, owner, name string) error {
	return r.Delete(Key{Group: group, Owner: owner, Name: name})
}
