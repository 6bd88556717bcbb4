// Package durables keeps the durable topic subscriptions of the peers' dialects (issue 26:
// RabbitMQ's durable:true with an id, ActiveMQ's activemq.subscriptionName and Artemis's
// durable-subscription-name with a client-id) in cluster mode.
//
// The model is the single node's (internal/topicsub, Artemis's): a durable subscription is
// a queue fed by the topic's fan-out. Here that queue is a cluster queue (a JetStream
// WorkQueue subject with its durable pull consumer, internal/cluster/queues), so what is
// published while no subscriber is attached is stored by a quorum of replicas and delivered
// on return at any node, with the queues' acknowledgements, redelivery, prefetch and
// dead-lettering. The registry (key → filter, selector, queue) is one JetStream key-value
// bucket; every node watches it and keeps the fan-out index its topic SENDs consult (the
// router's durable feed stage), so a SEND entering any node feeds every subscription its
// destination matches.
//
// A change (a SUBSCRIBE that creates or moves a subscription, an UNSUBSCRIBE that deletes
// one) is answered once every live node applied it (Options.Peers; at most SyncWait), so a
// SEND that follows the RECEIPT feeds the new subscription whichever node it enters. A node
// that does not answer in time is down or starting, and loads the whole registry before it
// serves clients.
//
// # Concurrency
//
// Registry is safe for concurrent use. Registry.mu serializes this node's changes; the
// watcher goroutine applies every change (this node's and others') to subs under idxMu and
// to the fan-out index (a topicsub.Index, with its own lock); Feeds reads only the index.
package durables

import (
	"cmp"
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/titan-broker/titan/internal/cluster"
	"github.com/titan-broker/titan/internal/dest"
	"github.com/titan-broker/titan/internal/dispatch"
	"github.com/titan-broker/titan/internal/selector"
	"github.com/titan-broker/titan/internal/topicsub"
)

// Bucket is the key-value bucket of the registry: one key per subscription, its value the
// JSON of a topicsub.Sub.
const Bucket = "TITAN_DURABLE_TOPICS"

// SyncSubject is the core NATS subject a node asks every node on to apply a registry
// revision before it answers its client (the payload is the revision, in decimal).
const SyncSubject = "titan.durables.sync"

// SyncWait bounds how long a change waits for the other nodes to apply it.
const SyncWait = 2 * time.Second

// opTimeout bounds one change's JetStream requests (bucket, queue).
const opTimeout = 10 * time.Second

// Queues is the port to the cluster queues pattern that holds the subscriptions' queues
// (implemented by internal/cluster/queues.Pattern). Both bounded by ctx.
type Queues interface {
	// CreateQueue makes id's queue (stream and durable consumer) exist cluster-wide.
	CreateQueue(ctx context.Context, id dest.Identity) (created bool, err error)
	// DropQueue deletes id's queue with the messages it holds; nil when it does not exist.
	// Errors: the JetStream API's.
	DropQueue(ctx context.Context, id dest.Identity) error
}

// Options configure a Registry.
type Options struct {
	// Max bounds the durable topic subscriptions cluster-wide, counted together with
	// Others (0: no limit; limits.max-durable-subscriptions). Two nodes creating the last
	// ones at the same instant may each pass it once (each counts what it has applied).
	Max int
	// Others returns how many other durable subscriptions count against Max; nil: none.
	Others func() int
	// Peers returns how many nodes (this one included) must apply a change before it is
	// answered: the cluster's live nodes. nil or a result below 1 waits for this node only.
	Peers func() int
	// Logger receives the registry's warnings; nil discards them.
	Logger *slog.Logger
}

// Registry is the cluster's set of durable topic subscriptions, as this node applied it.
// Create with Start; implements router.DurableTopics.
type Registry struct {
	o      Options
	nc     *nats.Conn
	kv     jetstream.KeyValue
	queues Queues
	log    *slog.Logger
	stop   context.CancelFunc
	done   chan struct{} // closed when the watcher goroutine ended
	sync   *nats.Subscription

	mu sync.Mutex // serializes this node's changes

	idxMu sync.RWMutex
	subs  map[string]*entry // by bucket key; guarded by idxMu
	idx   topicsub.Index    // the subscriptions' feeds, as on a single node
	n     atomic.Int64      // len(subs)

	appliedMu sync.Mutex
	applied   uint64        // the last revision the watcher applied; guarded by appliedMu
	advanced  chan struct{} // closed (and replaced) when applied grows; guarded by appliedMu
}

// entry is one subscription as applied from the bucket, with its feed (queue and compiled
// selector) in the index.
type entry struct {
	sub  topicsub.Sub
	feed *topicsub.Feed
}

// keyOf is the bucket key of k: one token, the hex of its three parts (a key holds only
// subject characters).
func keyOf(k topicsub.Key) string {
	return "s." + hex.EncodeToString([]byte(k.Group+"\x00"+k.Owner+"\x00"+k.Name))
}

// Start opens (creating it when absent) the registry's bucket on n, applies every stored
// subscription, and starts watching for changes and answering other nodes' sync requests;
// it returns once the stored registry is applied, so a node serves no SEND before it knows
// every subscription. Bounded by ctx. Stop ends it.
func Start(ctx context.Context, n *cluster.Node, queues Queues, o Options) (*Registry, error) {
	r := &Registry{o: o, nc: n.Conn(), queues: queues, log: o.Logger, subs: map[string]*entry{},
		advanced: make(chan struct{}), done: make(chan struct{})}
	if r.log == nil {
		r.log = slog.New(slog.DiscardHandler)
	}
	err := cluster.Attempt(ctx, func(ctx context.Context) error {
		var err error
		r.kv, err = n.JetStream().CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{
			Bucket: Bucket, Replicas: n.Replicas(), Storage: jetstream.FileStorage, History: 1,
			Description: "Titan: durable topic subscriptions (issue 26)",
		})
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("cluster: durable subscription bucket: %w", err)
	}
	wctx, stop := context.WithCancel(context.Background())
	w, err := r.kv.WatchAll(wctx)
	if err != nil {
		stop()
		return nil, fmt.Errorf("cluster: watching durable subscriptions: %w", err)
	}
	r.stop = stop
	loaded := make(chan struct{})
	go r.watch(w, loaded)
	select {
	case <-loaded:
	case <-ctx.Done():
		r.Stop()
		return nil, fmt.Errorf("cluster: loading durable subscriptions: %w", ctx.Err())
	}
	if r.sync, err = r.nc.Subscribe(SyncSubject, r.answerSync); err != nil {
		r.Stop()
		return nil, fmt.Errorf("cluster: durable subscription sync: %w", err)
	}
	return r, nil
}

// Stop ends the watcher and the sync subscription.
func (r *Registry) Stop() {
	if r.sync != nil {
		_ = r.sync.Unsubscribe()
	}
	r.stop()
	<-r.done
}

// watch applies the bucket's entries in revision order; the nil entry JetStream sends
// after the stored ones closes loaded.
func (r *Registry) watch(w jetstream.KeyWatcher, loaded chan struct{}) {
	defer close(r.done)
	defer func() { _ = w.Stop() }()
	first := true
	for e := range w.Updates() {
		if e == nil {
			if first {
				first = false
				close(loaded)
			}
			continue
		}
		r.apply(e)
	}
}

// apply makes the index agree with one bucket entry and records its revision.
func (r *Registry) apply(e jetstream.KeyValueEntry) {
	var next *entry
	if e.Operation() == jetstream.KeyValuePut {
		var s topicsub.Sub
		err := json.Unmarshal(e.Value(), &s)
		if err == nil && s.Selector != "" {
			var sel *selector.Selector
			if sel, err = selector.Compile(s.Selector); err == nil {
				next = &entry{sub: s, feed: &topicsub.Feed{Queue: s.Queue, Sel: sel}}
			}
		} else if err == nil {
			next = &entry{sub: s, feed: &topicsub.Feed{Queue: s.Queue}}
		}
		if err != nil {
			r.log.Error("undecodable durable subscription ignored", "key", e.Key(), "err", err)
		}
	}
	r.idxMu.Lock()
	if old := r.subs[e.Key()]; old != nil {
		r.indexLocked(old, false)
		delete(r.subs, e.Key())
	}
	if next != nil {
		r.subs[e.Key()] = next
		r.indexLocked(next, true)
	}
	r.n.Store(int64(len(r.subs)))
	r.idxMu.Unlock()
	r.appliedMu.Lock()
	if e.Revision() > r.applied {
		r.applied = e.Revision()
		close(r.advanced)
		r.advanced = make(chan struct{})
	}
	r.appliedMu.Unlock()
}

// indexLocked adds (add) or removes e from the fan-out index. idxMu held.
func (r *Registry) indexLocked(e *entry, add bool) {
	if add {
		r.idx.Add(e.sub.Group, e.sub.Filter, e.feed)
	} else {
		r.idx.Remove(e.sub.Group, e.sub.Filter, e.feed)
	}
}

// waitApplied waits until this node applied revision rev or ctx ends; it reports whether
// it did.
func (r *Registry) waitApplied(ctx context.Context, rev uint64) bool {
	for {
		r.appliedMu.Lock()
		ok, ch := r.applied >= rev, r.advanced
		r.appliedMu.Unlock()
		if ok {
			return true
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return false
		}
	}
}

// answerSync answers a node's sync request once this node applied the revision it names
// (no answer when it could not within SyncWait).
func (r *Registry) answerSync(msg *nats.Msg) {
	rev, err := strconv.ParseUint(string(msg.Data), 10, 64)
	if err != nil || msg.Reply == "" {
		return
	}
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), SyncWait)
		defer cancel()
		if r.waitApplied(ctx, rev) {
			_ = msg.Respond(nil)
		}
	}()
}

// syncAll returns once every live node (Options.Peers) applied revision rev, or after
// SyncWait (logged: the missing nodes are down or starting).
func (r *Registry) syncAll(rev uint64) {
	ctx, cancel := context.WithTimeout(context.Background(), SyncWait)
	defer cancel()
	want := 1
	if r.o.Peers != nil {
		want = max(r.o.Peers(), 1)
	}
	if want == 1 {
		r.waitApplied(ctx, rev)
		return
	}
	inbox := nats.NewInbox()
	sub, err := r.nc.SubscribeSync(inbox)
	if err != nil {
		r.waitApplied(ctx, rev)
		return
	}
	defer func() { _ = sub.Unsubscribe() }()
	if err := r.nc.PublishRequest(SyncSubject, inbox, []byte(strconv.FormatUint(rev, 10))); err != nil {
		r.waitApplied(ctx, rev)
		return
	}
	got := 0
	for got < want {
		if _, err := sub.NextMsgWithContext(ctx); err != nil {
			r.log.Warn("durable subscription change not confirmed by every node", "revision", rev, "confirmed", got, "nodes", want)
			return
		}
		got++
	}
}

// AttachDurable implements router.DurableTopics: the queue of the subscription (group,
// owner, name) over filter with selector sel (nil: none), creating it — its queue made,
// then its registry entry stored and applied by every node — or moving it to filter and
// sel (its stored messages are discarded: Artemis and RabbitMQ recreate it). Strings are
// copied. Errors: dispatch.ErrDurableSubscriptionLimit (nothing made), a JetStream failure
// (errNotStored).
func (r *Registry) AttachDurable(group, owner, name string, filter dest.Destination, sel *selector.Selector) (dest.Identity, error) {
	k := topicsub.Key{Group: strings.Clone(group), Owner: strings.Clone(owner), Name: strings.Clone(name)}
	filter.Channel = strings.Clone(filter.Channel)
	src := ""
	if sel != nil {
		src = sel.String()
	}
	key := keyOf(k)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.idxMu.RLock()
	cur := r.subs[key]
	r.idxMu.RUnlock()
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	q := topicsub.QueueOf(k)
	switch {
	case cur != nil && cur.sub.Filter == filter && cur.sub.Selector == src:
		return cur.sub.Queue, nil
	case cur != nil:
		// Moved to another topic or selector: start afresh. No node feeds the old filter
		// any more before the queue is emptied, so none of its messages is left in it.
		if err := r.unregister(ctx, key); err != nil {
			return dest.Identity{}, err
		}
		if err := r.queues.DropQueue(ctx, cur.sub.Queue); err != nil {
			return dest.Identity{}, notStored(err)
		}
	case r.o.Max > 0:
		others := 0
		if r.o.Others != nil {
			others = r.o.Others()
		}
		if int(r.n.Load())+others >= r.o.Max {
			return dest.Identity{}, dispatch.ErrDurableSubscriptionLimit
		}
	}
	if _, err := r.queues.CreateQueue(ctx, q); err != nil {
		return dest.Identity{}, notStored(err)
	}
	data, err := json.Marshal(topicsub.Sub{Key: k, Filter: filter, Queue: q, Selector: src, Created: time.Now().UTC()})
	if err != nil {
		return dest.Identity{}, notStored(err)
	}
	var rev uint64
	if err := cluster.Attempt(ctx, func(ctx context.Context) error {
		var err error
		rev, err = r.kv.Put(ctx, key, data)
		return err
	}); err != nil {
		return dest.Identity{}, notStored(err)
	}
	r.syncAll(rev)
	return q, nil
}

// DeleteDurable implements router.DurableTopics: the subscription (group, owner, name) is
// removed from the registry (every node stops feeding it) and then its queue with the
// messages it holds. Unlike the single node, a subscription another connection still
// consumes is not refused (cluster mode cannot tell: README). Errors:
// dispatch.ErrNoDurableSubscription, a JetStream failure (errNotStored; the subscription
// stays).
func (r *Registry) DeleteDurable(group, owner, name string) error {
	key := keyOf(topicsub.Key{Group: group, Owner: owner, Name: name})
	r.mu.Lock()
	defer r.mu.Unlock()
	r.idxMu.RLock()
	cur := r.subs[key]
	r.idxMu.RUnlock()
	if cur == nil {
		return dispatch.ErrNoDurableSubscription
	}
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	if err := r.unregister(ctx, key); err != nil {
		return err
	}
	if err := r.queues.DropQueue(ctx, cur.sub.Queue); err != nil {
		r.log.Warn("durable subscription deleted; its queue was not", "queue", cur.sub.Queue.String(), "err", err)
	}
	return nil
}

// unregister deletes key from the bucket and returns once every live node applied that
// (no node feeds the subscription any more). Errors: a JetStream failure (errNotStored).
// r.mu held.
func (r *Registry) unregister(ctx context.Context, key string) error {
	var rev uint64
	if err := cluster.Attempt(ctx, func(ctx context.Context) error {
		if err := r.kv.Delete(ctx, key); err != nil {
			return err
		}
		// The delete marker's revision is at most the bucket's last one: once every node
		// applied that, none feeds the subscription any more.
		st, err := r.kv.Status(ctx)
		if err != nil {
			return err
		}
		if bs, ok := st.(*jetstream.KeyValueBucketStatus); ok {
			rev = bs.StreamInfo().State.LastSeq
		}
		return nil
	}); err != nil {
		return notStored(err)
	}
	r.syncAll(rev)
	return nil
}

// Feeds implements router.DurableTopics: it appends to dst the queue of every
// subscription whose filter matches the events destination id (same group and bare-ness,
// dest.Match on the channel) and whose selector selects m. One atomic load when there are
// none; allocates only to grow dst.
func (r *Registry) Feeds(id dest.Identity, m selector.Message, dst []dest.Identity) []dest.Identity {
	if r.n.Load() == 0 {
		return dst
	}
	r.idx.Match(id, func(f *topicsub.Feed) {
		if f.Sel.Matches(m) { // a nil selector selects every message
			dst = append(dst, f.Queue)
		}
	})
	return dst
}

// Has reports whether the subscription (group, owner, name) exists, as this node applied
// the registry (the security ledger's port: who made which durable subscription).
func (r *Registry) Has(group, owner, name string) bool {
	r.idxMu.RLock()
	defer r.idxMu.RUnlock()
	_, ok := r.subs[keyOf(topicsub.Key{Group: group, Owner: owner, Name: name})]
	return ok
}

// List returns every durable topic subscription this node applied, sorted by group,
// owner, name.
func (r *Registry) List() []topicsub.Sub {
	r.idxMu.RLock()
	out := make([]topicsub.Sub, 0, len(r.subs))
	for _, e := range r.subs {
		out = append(out, e.sub)
	}
	r.idxMu.RUnlock()
	slices.SortFunc(out, func(a, b topicsub.Sub) int {
		return cmp.Or(cmp.Compare(a.Group, b.Group), cmp.Compare(a.Owner, b.Owner), cmp.Compare(a.Name, b.Name))
	})
	return out
}

// Count returns the number of durable topic subscriptions this node applied.
func (r *Registry) Count() int { return int(r.n.Load()) }
