// Package eventlog is the events-store pattern (DESIGN §2, §5; reference 004): a durable
// append-only log per (group, channel) in the store, read by replay subscriptions. Each
// subscription chooses where it starts (start-position), may keep its position across
// reconnects and restarts (durable-name), and is fed by an outbox poller whose interval a
// feedback regulator stretches while the connection sheds and shrinks on clean deliveries.
//
// # Lifecycle
//
// The pattern starts one poller goroutine per subscription and owns it: Detach stops it and
// Close stops and waits for every one, so nothing reads or writes the store after Close.
//
// # Concurrency
//
// Everything exported is safe for concurrent use. A publication takes no pattern-wide lock
// (issue 32): it finds its log's state in a sync.Map and takes that log's tail lock, then
// its readers lock, one after the other. Pattern.mu guards the reader set (subscribe,
// detach, close, stats); a reader's own mutex guards its positions. None is held while
// calling the store.
package eventlog

import (
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/titan-broker/titan/internal/delivery"
	"github.com/titan-broker/titan/internal/dest"
	"github.com/titan-broker/titan/internal/dispatch"
	"github.com/titan-broker/titan/internal/message"
)

// LogStore is the port to durable per-identity logs, implemented by durable.Log. Safe for
// concurrent use.
type LogStore interface {
	// Scan calls fn for records of id's log with seq >= from in order, until fn returns false.
	Scan(id dest.Identity, from uint64, fn func(seq uint64, data []byte) bool) error
	// Bounds returns the first held and last assigned sequence of id's log (0, 0 when empty
	// and never written).
	Bounds(id dest.Identity) (first, last uint64, err error)
	// SeekTime returns the first sequence whose message was accepted at or after t (last+1
	// when none).
	SeekTime(id dest.Identity, t time.Time) (uint64, error)
	// SavePosition durably records a durable subscription's position — the sequence up to
	// which everything was acknowledged — and acked, the sequences above it acknowledged
	// individually (ascending), which a resumed subscription does not deliver again.
	SavePosition(key string, seq uint64, acked []uint64) error
	// SavePositionLazy records it durably at the store's next sync (group-committed with
	// other writes; a Sync makes it durable): a crash before then only moves the position
	// back, to messages delivered again.
	SavePositionLazy(key string, seq uint64, acked []uint64) error
	// Position returns a saved position and its individually acknowledged sequences.
	Position(key string) (seq uint64, acked []uint64, ok bool, err error)
}

// Spawner starts a tracked goroutine; Go returns false once its owner is shutting down.
type Spawner interface {
	Go(name string, fn func()) bool
}

// Options configure a Pattern.
type Options struct {
	// Store holds the logs; nil disables the pattern (dispatch.ErrNotStored).
	Store LogStore
	// PollBase and PollMax bound the pollers' regulated interval (defaults 1 s and 30 s,
	// reference 004).
	PollBase, PollMax time.Duration
	// Spawner starts the pollers (default: plain go).
	Spawner Spawner
	// Logger receives the pattern's events; nil discards them.
	Logger *slog.Logger
	// MaxDurableSubscriptions bounds the durable subscriptions the store holds (live and
	// offline); a SUBSCRIBE that would create one more fails with
	// dispatch.ErrDurableSubscriptionLimit. 0 means unlimited. Enforced when Store is also
	// a DurableStore.
	MaxDurableSubscriptions int
	// OtherDurables, when set, returns the other durable subscriptions that count against
	// MaxDurableSubscriptions (the durable topic subscriptions of package topicsub).
	OtherDurables func() int
}

// Pattern is the events-store pattern. Create with New.
type Pattern struct {
	d    *dispatch.Dispatcher
	opts Options
	log  *slog.Logger
	wg   sync.WaitGroup // running pollers

	// live holds, by identity, the logState of every log with subscriptions: a publication
	// finds its log here without a lock and takes only that log's lock (issue 32).
	live sync.Map // dest.Identity → *logState

	mu      sync.Mutex                         // guards the fields below; never taken by Publish
	readers map[*delivery.Subscription]*reader // live readers by subscription
	closed  bool                               // Close ran: no poller starts

	durables durables // durable subscriptions: count, limit, live keys (durable.go)
}

// logState is one log's live readers and shared tail.
type logState struct {
	mu sync.Mutex
	// readers is replaced under mu, never modified in place, so that a publication reads it
	// without a lock (nil: none yet).
	readers atomic.Pointer[[]*reader]
	refs    int  // subscriptions holding the tail, including ones still subscribing; guarded by mu
	dead    bool // guarded by mu: refs fell to 0 and it left Pattern.live
	tail    tail
}

// setReadersLocked replaces lg's reader list with the result of fn on a copy of it. lg.mu held.
func (lg *logState) setReadersLocked(fn func([]*reader) []*reader) {
	var cur []*reader
	if rs := lg.readers.Load(); rs != nil {
		cur = *rs
	}
	next := fn(slices.Clip(cur))
	lg.readers.Store(&next)
}

// New returns the events-store pattern; d supplies the counters.
func New(d *dispatch.Dispatcher, o Options) *Pattern {
	p := &Pattern{d: d, opts: o, log: o.Logger, readers: map[*delivery.Subscription]*reader{}}
	if p.log == nil {
		p.log = slog.New(slog.DiscardHandler)
	}
	return p
}

// Publish tells the live readers of id that m was appended (m must already be in the log:
// m.Sequence set by the store stage). A reader that is caught up (m is its next sequence),
// idle and not busy gets m delivered here, on the publisher's goroutine, as the queues do;
// any other reader's poller is kicked and fetches it (from the shared tail). So a live
// tail costs no goroutine hand-off per message (issue 33). Errors: dispatch.ErrNotStored
// for a message that was not stored.
func (p *Pattern) Publish(id dest.Identity, m *message.Message, _ <-chan struct{}) (dropped bool, err error) {
	p.d.Published.Add(1)
	if m.Sequence == 0 {
		return false, dispatch.ErrNotStored
	}
	v, ok := p.live.Load(id)
	if !ok {
		return false, nil
	}
	lg := v.(*logState)
	lg.tail.put(m)
	if rs := lg.readers.Load(); rs != nil {
		for _, ls := range *rs {
			if !ls.offer(m) {
				ls.poller.Kick() // the poller fetches it from the live tail
			}
		}
	}
	return false, nil
}

// Subscribe registers sub on its connection and starts its reader at sub.Start (or its
// durable position). Errors: delivery.ErrDuplicateSubscription; dispatch.ErrNotStored when
// there is no store or the pattern is closed; the store's error reading the log's bounds.
func (p *Pattern) Subscribe(sub *delivery.Subscription) error {
	sub.Owner = p
	if p.opts.Store == nil {
		return dispatch.ErrNotStored
	}
	if err := sub.Conn.Add(sub); err != nil {
		return err
	}
	id := sub.Identity()
	lg := p.holdLog(id) // held until Detach: a reader's tail stays the log's tail while it reads
	ls, err := p.newReader(sub, id, lg)
	if err != nil {
		p.releaseLog(id, lg)
		sub.Conn.Remove(sub)
		return err
	}
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		p.releaseLog(id, lg)
		p.releaseDurable(ls.key)
		sub.Conn.Remove(sub)
		return dispatch.ErrNotStored
	}
	p.readers[sub] = ls
	p.wg.Add(1)
	p.mu.Unlock()
	lg.mu.Lock()
	lg.setReadersLocked(func(rs []*reader) []*reader { return append(rs, ls) })
	lg.mu.Unlock()
	sub.SetFeed(ls.poller)
	run := func() {
		defer p.wg.Done()
		ls.poller.Run()
	}
	if !p.goroutine("outbox-poller", run) {
		p.wg.Done()
		sub.Conn.Detach(sub)
		return dispatch.ErrNotStored
	}
	return nil
}

func (p *Pattern) goroutine(name string, fn func()) bool {
	if p.opts.Spawner == nil {
		go fn()
		return true
	}
	return p.opts.Spawner.Go(name, fn)
}

// Detach implements delivery.Owner: the reader's poller stops and a durable position is
// saved. The log keeps unacknowledged messages; a durable subscription resumes at them.
func (p *Pattern) Detach(sub *delivery.Subscription, _ []delivery.Unacked) {
	p.mu.Lock()
	ls := p.readers[sub]
	if ls != nil {
		delete(p.readers, sub)
	}
	p.mu.Unlock()
	if ls != nil {
		lg := ls.log
		lg.mu.Lock()
		lg.setReadersLocked(func(rs []*reader) []*reader {
			if i := slices.Index(rs, ls); i >= 0 {
				return append(rs[:i:i], rs[i+1:]...)
			}
			return rs
		})
		lg.mu.Unlock()
		p.releaseLog(ls.id, lg)
		ls.stop()
	}
}

// holdLog returns id's live log state, made if needed, with one more hold on it.
func (p *Pattern) holdLog(id dest.Identity) *logState {
	for {
		v, _ := p.live.LoadOrStore(id, &logState{})
		lg := v.(*logState)
		lg.mu.Lock()
		if lg.dead { // its last hold was just released: make a new one
			lg.mu.Unlock()
			continue
		}
		lg.refs++
		lg.mu.Unlock()
		return lg
	}
}

// releaseLog drops a subscription's hold on id's log state lg and forgets it (its tail
// too) once no subscription holds it. Counting holds, rather than the live readers, keeps
// a tail that a Subscribe still setting up its reader uses: that reader relies on every
// publish after its Bounds reaching its tail.
func (p *Pattern) releaseLog(id dest.Identity, lg *logState) {
	lg.mu.Lock()
	if lg.refs--; lg.refs == 0 {
		lg.dead = true
		p.live.CompareAndDelete(id, lg)
	}
	lg.mu.Unlock()
}

// Close stops every reader, saves durable positions and waits until every poller has
// returned; later Subscribes fail. After Close nothing of the pattern touches the store.
// Idempotent.
func (p *Pattern) Close() {
	p.mu.Lock()
	p.closed = true
	var all []*reader
	for _, ls := range p.readers {
		all = append(all, ls)
	}
	p.mu.Unlock()
	for _, ls := range all {
		ls.poller.Stop()
	}
	p.wg.Wait()
	for _, ls := range all {
		ls.poller.Quiesce() // an inline delivery (Publish) still running
		ls.savePosition(false)
	}
}

// Stats summarises the pollers for metrics.
type Stats struct {
	Pollers     int
	MaxInterval time.Duration // the longest current regulated interval
	Sheds       uint64        // sheds across live pollers
	Skipped     uint64        // fetches skipped while busy, across live pollers
}

// Stats returns the current poller summary.
func (p *Pattern) Stats() Stats {
	p.mu.Lock()
	defer p.mu.Unlock()
	var st Stats
	for _, ls := range p.readers {
		st.Pollers++
		reg := ls.poller.Regulator()
		st.MaxInterval = max(st.MaxInterval, reg.Interval())
		st.Sheds += reg.Sheds.Load()
		st.Skipped += ls.poller.Skipped.Load()
	}
	return st
}
