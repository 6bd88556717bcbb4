package rpc

import (
	"errors"
	"hash/maphash"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/titan-broker/titan/internal/clock"
	"github.com/titan-broker/titan/internal/delivery"
	"github.com/titan-broker/titan/internal/dest"
	"github.com/titan-broker/titan/internal/frame"
	"github.com/titan-broker/titan/internal/lockorder"
	"github.com/titan-broker/titan/internal/message"
	"github.com/titan-broker/titan/internal/router/refusal"
)

// RPC header names.
const (
	HdrExecuted = "executed"
	HdrError    = "error"
)

// rpcBuckets are the response-time histogram's upper bounds in seconds.
var rpcBuckets = []float64{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10}

// Stats are the counters of one (group, pattern, channel) of requests.
type Stats struct {
	Group, Pattern, Channel string
	Requests, Responses     uint64
	Timeouts, NoResponder   uint64
	Late, Unknown           uint64 // responses dropped: after their timeout, or to no pending request
	// Buckets are cumulative counts of response times <= Bounds[i] seconds; Sum is in seconds.
	Bounds  []float64
	Buckets []uint64
	Count   uint64
	Sum     float64
}

type rpcCounters struct {
	requests, responses, timeouts, noResponder, late, unknown atomic.Uint64
	mu                                                        sync.Mutex
	buckets                                                   []uint64
	count                                                     uint64
	sum                                                       float64
}

func (c *rpcCounters) observe(d time.Duration) {
	s := d.Seconds()
	c.mu.Lock()
	if c.buckets == nil {
		c.buckets = make([]uint64, len(rpcBuckets))
	}
	for i, b := range rpcBuckets {
		if s <= b {
			c.buckets[i]++
		}
	}
	c.count++
	c.sum += s
	c.mu.Unlock()
}

type pendingRequest struct {
	key       requestKey
	request   dest.Identity // the command or query channel
	replyTo   dest.Identity
	corr      string
	started   time.Time
	timer     clock.Timer
	counters  *rpcCounters
	requester *delivery.Conn // the connection that sent it (its count of pending requests); may be nil
	// responder is the ack:auto responder holding a place of its credit for this request
	// (member.inFlight), nil for none yet; doneResponder once the request ended, so that
	// a place taken after that is given back at once (see hold and finish).
	responder atomic.Pointer[member]
}

// doneResponder marks a pending request that ended (pendingRequest.responder).
var doneResponder = &member{}

// hold records that r holds a place of its credit for pr; when pr already ended it gives
// the place back at once.
func (pr *pendingRequest) hold(r *member) {
	if !pr.responder.CompareAndSwap(nil, r) {
		r.release()
	}
}

// finish gives back the credit place pr holds, if any: pr ended (response, timeout, not
// delivered, Close). Idempotent.
func (pr *pendingRequest) finish() {
	if r := pr.responder.Swap(doneResponder); r != nil && r != doneResponder {
		r.release()
	}
}

// pendingShards is the number of shards of the pending requests (a power of two).
const pendingShards = 64

// rpcState is the request/response bookkeeping. Nothing broker-wide is locked on the
// request path (issue 32): responders are kept per request channel, each with its own
// lock; pending requests are sharded by their key (reply-to and correlation-id); counters
// and temp-queue owners are read without a lock.
type rpcState struct {
	channels sync.Map // dest.Identity → *channel: the responders of one request channel
	pending  [pendingShards]pendingShard
	counters counterSet
	owners   sync.Map     // temp-queue owner session id → *delivery.Conn
	inFlight atomic.Int64 // pending requests of the whole pattern (Options.MaxPending)
}

// channel is one request channel's responders and round-robin cursor.
type channel struct {
	mu   lockorder.Mutex[lockorder.RPCChannelRank]
	subs []*member // guarded by mu; replaced, never modified in place
	rr   int       // guarded by mu: the next responder to try
	dead bool      // guarded by mu: its last responder left; it is no longer in channels
	// cnt caches counters.get of the channel's identity, so that a request looks up its
	// channel once (one sync.Map lookup, not two); set on the channel's first request.
	cnt atomic.Pointer[rpcCounters]
}

// member is one responder of a request channel (its subscription). A client-ack
// responder's credit is its subscription's (delivery: unacknowledged requests under its
// prefetch). An ack:auto responder acknowledges nothing, so the pattern bounds it itself:
// at most max requests it was given await their response (or timeout) at once, so that one
// slow responder cannot be flooded while others have room (issue 32).
type member struct {
	sub  *delivery.Subscription
	auto bool  // ack:auto: bounded by inFlight < max
	max  int64 // its prefetch (delivery.DefaultPrefetch when unset)
	// inFlight counts the requests it was given that have not ended. Raised only under the
	// channel's mu (choose), so it never passes max; lowered without a lock (release).
	inFlight atomic.Int64
}

func newMember(sub *delivery.Subscription) *member {
	max := int64(sub.Prefetch)
	if max <= 0 {
		max = delivery.DefaultPrefetch
	}
	return &member{sub: sub, auto: sub.Ack == delivery.AckAuto, max: max}
}

// release gives back a place of r's credit (ack:auto).
func (r *member) release() { r.inFlight.Add(-1) }

// requestKey identifies a pending request: its reply-to destination and correlation-id. A
// struct, not a joined string, so that building it per request and per response allocates
// nothing.
type requestKey struct {
	replyTo dest.Identity
	corr    string
}

// pendingShard is one shard of the pending requests, by key.
type pendingShard struct {
	mu      sync.Mutex
	pending map[requestKey]*pendingRequest // guarded by mu
	expired map[requestKey]time.Time       // recently timed-out keys, for counting late responses; guarded by mu
	closed  bool                           // Close ran: no timer is armed; guarded by mu
	_       [64]byte                       // keeps shards' locks off each other's cache lines
}

func newRPCState() *rpcState {
	r := &rpcState{}
	for i := range r.pending {
		r.pending[i].pending = map[requestKey]*pendingRequest{}
		r.pending[i].expired = map[requestKey]time.Time{}
	}
	return r
}

var shardSeed = maphash.MakeSeed()

// shard returns key's shard, chosen by its reply-to channel and correlation-id (the parts
// that tell two requesters' keys apart).
func (r *rpcState) shard(key requestKey) *pendingShard {
	h := maphash.String(shardSeed, key.corr) ^ maphash.String(shardSeed, key.replyTo.Channel)
	return &r.pending[h&(pendingShards-1)]
}

// lookup returns the request channel id, or nil when it has no responder.
func (r *rpcState) lookup(id dest.Identity) *channel {
	if v, ok := r.channels.Load(id); ok {
		return v.(*channel)
	}
	return nil
}

// countersOf returns the counters of request channel id, whose responders are ch (nil for
// none), from ch's cache when it has one.
func (r *rpcState) countersOf(ch *channel, id dest.Identity) *rpcCounters {
	if ch == nil {
		return r.counters.get(id)
	}
	if c := ch.cnt.Load(); c != nil {
		return c
	}
	c := r.counters.get(id)
	ch.cnt.Store(c)
	return c
}

// counterSet holds the per-channel counters: read without a lock, created under mu.
type counterSet struct {
	m  sync.Map   // dest.Identity → *rpcCounters
	mu sync.Mutex // serializes creation
	n  int        // counters created; guarded by mu
}

// maxRPCChannels bounds the request channels with counters of their own; requests to
// further channels are counted together under the channel "_other" so that clients naming
// endless channels cannot grow the metrics without bound.
const maxRPCChannels = 1000

func (cs *counterSet) get(id dest.Identity) *rpcCounters {
	if c, ok := cs.m.Load(id); ok {
		return c.(*rpcCounters)
	}
	cs.mu.Lock()
	defer cs.mu.Unlock()
	if c, ok := cs.m.Load(id); ok {
		return c.(*rpcCounters)
	}
	if cs.n >= maxRPCChannels {
		id = dest.Identity{Group: "_other", Pattern: id.Pattern, Channel: "_other"}
		if c, ok := cs.m.Load(id); ok {
			return c.(*rpcCounters)
		}
	}
	c := &rpcCounters{}
	cs.m.Store(id, c)
	cs.n++
	return c
}

// maxExpired bounds the remembered timed-out requests, over all shards (oldest of a shard
// forgotten first).
const maxExpired = 10000

// Request sends m (a command or query to id) to one responder and arms its timeout; replyTo
// is where the response, or the broker's executed:false answer, goes; requester is the
// connection that sent it (nil for none: HTTP, embedded), whose pending requests are
// bounded by Options.MaxPendingByClient. It never fails for want of a responder: that
// answer is published at once instead. With Options.Responders the responder is whichever
// one that port offers m to (cluster mode: a responder of any node); otherwise one of this
// pattern's own, round-robin among those with credit (one whose writer refuses is skipped
// for the next, up to maxDeliverAttempts). Errors: ErrDuplicateRequest; a
// *PendingLimitError (ErrTooManyPending) over a bound on pending requests;
// refusal.ErrCanceled after Close.
func (p *Pattern) Request(id dest.Identity, m *message.Message, replyTo dest.Identity, corr string, timeout time.Duration, requester *delivery.Conn) error {
	r := p.rpc
	key := requestKey{replyTo, corr}
	sh := r.shard(key)
	if err := p.reserve(requester); err != nil {
		return err
	}
	remote := p.opts.Responders
	var ch *channel
	if remote == nil {
		ch = r.lookup(id)
	}
	cnt := r.countersOf(ch, id)
	var chosen *member
	if remote == nil {
		if chosen = ch.choose(); chosen == nil {
			p.release(requester)
			sh.mu.Lock() // a refusal comes before the "no responder" answer
			_, dup := sh.pending[key]
			closed := sh.closed
			sh.mu.Unlock()
			switch {
			case closed:
				return refusal.ErrCanceled
			case dup:
				return ErrDuplicateRequest
			}
			cnt.requests.Add(1)
			cnt.noResponder.Add(1)
			p.answer(replyTo, corr, "no responder")
			return nil
		}
	}
	pr := &pendingRequest{key: key, request: id, replyTo: replyTo, corr: corr, started: p.opts.Clock.Now(), counters: cnt, requester: requester}
	sh.mu.Lock()
	if _, dup := sh.pending[key]; dup || sh.closed {
		closed := sh.closed
		sh.mu.Unlock()
		p.release(requester)
		if chosen != nil && chosen.auto {
			chosen.release() // the place choose took: the request never reached it
		}
		if closed {
			return refusal.ErrCanceled
		}
		return ErrDuplicateRequest
	}
	sh.pending[key] = pr
	pr.timer = p.opts.Clock.AfterFunc(timeout, func() { p.expire(pr) })
	sh.mu.Unlock()
	cnt.requests.Add(1)
	var taken bool
	if remote != nil {
		taken = remote.Offer(id, m, replyTo, corr, timeout)
	} else {
		// A responder whose writer refuses (over its outbound limit) is stalled by the
		// refusal: the next one with credit gets the request. The place choose took of an
		// ack:auto responder's credit is held by the request until it ends (finish).
		for range maxDeliverAttempts {
			if taken = chosen.sub.Conn.Deliver(chosen.sub, m, nil, 0, 1); taken {
				if chosen.auto {
					pr.hold(chosen)
				}
				break
			}
			if chosen.auto {
				chosen.release()
			}
			if chosen = r.lookup(id).choose(); chosen == nil {
				break
			}
		}
	}
	if !taken {
		if p.take(pr) { // not already answered by its timeout or a response
			cnt.noResponder.Add(1)
			p.answer(replyTo, corr, "no responder")
		}
	}
	return nil
}

// maxDeliverAttempts bounds the responders a request is offered to before it is answered
// "no responder".
const maxDeliverAttempts = 8

// choose returns the next responder of ch with credit, round-robin, or nil (also for a nil
// ch: no responder). An ack:auto responder's credit is its own bound (member.max): the
// place it takes is the caller's, to hold for the request (pendingRequest.hold) or give
// back (member.release).
func (ch *channel) choose() *member {
	if ch == nil {
		return nil
	}
	ch.mu.Lock()
	defer ch.mu.Unlock()
	n := len(ch.subs)
	for i := range n {
		s := ch.subs[(ch.rr+i)%n]
		if s.auto && s.inFlight.Load() >= s.max {
			continue
		}
		if s.sub.HasCredit() {
			if s.auto {
				s.inFlight.Add(1)
			}
			ch.rr = (ch.rr + i + 1) % n
			return s
		}
	}
	return nil
}

// reserve counts one more pending request of requester and of the pattern, or refuses it
// over Options.MaxPendingByClient or Options.MaxPending.
func (p *Pattern) reserve(requester *delivery.Conn) error {
	if requester != nil {
		if n := requester.PendingRequests.Add(1); p.opts.MaxPendingByClient > 0 && n > int64(p.opts.MaxPendingByClient) {
			requester.PendingRequests.Add(-1)
			return p.byClientLimit
		}
	}
	if n := p.rpc.inFlight.Add(1); p.opts.MaxPending > 0 && n > int64(p.opts.MaxPending) {
		p.rpc.inFlight.Add(-1)
		if requester != nil {
			requester.PendingRequests.Add(-1)
		}
		return p.brokerLimit
	}
	return nil
}

// release undoes reserve: a request of requester is no longer pending.
func (p *Pattern) release(requester *delivery.Conn) {
	p.rpc.inFlight.Add(-1)
	if requester != nil {
		requester.PendingRequests.Add(-1)
	}
}

// take removes pr from the pending requests and stops its timer; it reports false when
// something else (a response, its timeout, Close) already took it.
func (p *Pattern) take(pr *pendingRequest) bool {
	sh := p.rpc.shard(pr.key)
	sh.mu.Lock()
	mine := sh.pending[pr.key] == pr
	if mine {
		delete(sh.pending, pr.key)
	}
	sh.mu.Unlock()
	if mine {
		pr.timer.Stop()
		pr.finish()
		p.release(pr.requester)
	}
	return mine
}

func (p *Pattern) expire(pr *pendingRequest) {
	if !p.timers.Enter() {
		return // closed
	}
	defer p.timers.Leave()
	sh := p.rpc.shard(pr.key)
	sh.mu.Lock()
	if sh.closed || sh.pending[pr.key] != pr {
		sh.mu.Unlock()
		return
	}
	delete(sh.pending, pr.key)
	if len(sh.expired) >= maxExpired/pendingShards {
		var oldest requestKey
		var ot time.Time
		found := false
		for k, t := range sh.expired {
			if !found || t.Before(ot) {
				oldest, ot, found = k, t, true
			}
		}
		delete(sh.expired, oldest)
	}
	sh.expired[pr.key] = p.opts.Clock.Now()
	sh.mu.Unlock()
	pr.finish()
	p.release(pr.requester)
	pr.counters.timeouts.Add(1)
	p.answer(pr.replyTo, pr.corr, "timeout")
}

// answer publishes the broker's executed:false response to replyTo. An answer to a
// temp-queue whose connection is gone is refused by the temp-queue publisher
// (refusal.ErrNoQueue: it would recreate an orphan queue) and counted as dropped.
func (p *Pattern) answer(replyTo dest.Identity, corr, reason string) {
	m := &message.Message{
		ID: p.opts.MessageID(), Group: replyTo.Group, Destination: replyTo.OwnerDestination(),
		TimestampMs: p.opts.Clock.Now().UnixMilli(),
		Headers: []frame.Header{
			{Key: frame.HdrCorrelationID, Value: corr},
			{Key: HdrExecuted, Value: "false"},
			{Key: HdrError, Value: reason},
		},
	}
	_, err := p.opts.Replies.Publish(replyTo, m, nil)
	switch {
	case errors.Is(err, refusal.ErrNoQueue):
		p.CountDroppedResponse(replyTo, false)
	case err != nil:
		p.log.Warn("request answer not delivered", "reply_to", replyTo.String(), "err", err)
	}
}

// Respond matches a SEND to replyTo carrying correlation-id corr against the pending requests.
// It returns pending=true when it completed a request (the caller publishes the response as
// usual), late=true when the request had already timed out (the caller drops it).
func (p *Pattern) Respond(replyTo dest.Identity, corr string) (pending, late bool) {
	key := requestKey{replyTo, corr}
	sh := p.rpc.shard(key)
	sh.mu.Lock()
	pr, ok := sh.pending[key]
	if ok {
		delete(sh.pending, key)
		sh.mu.Unlock()
		pr.timer.Stop()
		pr.finish()
		p.release(pr.requester)
		pr.counters.responses.Add(1)
		pr.counters.observe(p.opts.Clock.Now().Sub(pr.started))
		return true, false
	}
	_, late = sh.expired[key]
	if late {
		delete(sh.expired, key)
	}
	sh.mu.Unlock()
	return false, late
}

// CountDroppedResponse counts a response the caller dropped (late or unknown) against the
// request channel's counters when known, else against the reply destination.
func (p *Pattern) CountDroppedResponse(replyTo dest.Identity, late bool) {
	// Reply destinations (temp-queues above all) come and go: count them under one series
	// per pattern rather than one per destination.
	c := p.rpc.counters.get(dest.Identity{Group: "_replies", Pattern: replyTo.Pattern, Channel: "_replies"})
	if late {
		c.late.Add(1)
	} else {
		c.unknown.Add(1)
	}
}

// Pending returns the number of requests awaiting a response (or their timeout).
func (p *Pattern) Pending() int { return int(p.rpc.inFlight.Load()) }

// Stats returns the request/response counters per channel, sorted.
func (p *Pattern) Stats() []Stats {
	var out []Stats
	p.rpc.counters.m.Range(func(k, v any) bool {
		id, c := k.(dest.Identity), v.(*rpcCounters)
		c.mu.Lock()
		st := Stats{
			Group: id.Group, Pattern: id.Pattern.String(), Channel: id.Channel,
			Requests: c.requests.Load(), Responses: c.responses.Load(), Timeouts: c.timeouts.Load(),
			NoResponder: c.noResponder.Load(), Late: c.late.Load(), Unknown: c.unknown.Load(),
			Bounds: rpcBuckets, Buckets: append([]uint64(nil), c.buckets...), Count: c.count, Sum: c.sum,
		}
		if st.Buckets == nil {
			st.Buckets = make([]uint64, len(rpcBuckets))
		}
		c.mu.Unlock()
		out = append(out, st)
		return true
	})
	sort.Slice(out, func(i, j int) bool {
		if out[i].Group != out[j].Group {
			return out[i].Group < out[j].Group
		}
		return out[i].Pattern+out[i].Channel < out[j].Pattern+out[j].Channel
	})
	return out
}
