package dispatch

import (
	"errors"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/titan-broker/titan/internal/dest"
	"github.com/titan-broker/titan/internal/frame"
	"github.com/titan-broker/titan/internal/message"
)

// Request/response (DESIGN §2, commands and queries). A requester SENDs to /command/<ch> or
// /query/<ch> with reply-to and correlation-id; exactly one responder subscribed to that group
// and channel receives it (round-robin). The responder SENDs its answer to the reply-to
// destination with the same correlation-id. When no responder is subscribed, or the timeout
// passes first, the broker itself answers on reply-to with executed:false and
// error:no responder or error:timeout, so a requester never waits in silence. A response that
// arrives after its timeout, or names no pending request, is dropped and counted.

// Errors of the request path.
var (
	// ErrDuplicateRequest is returned by Request for a correlation-id already pending on the
	// same reply-to destination.
	ErrDuplicateRequest = errors.New("dispatch: correlation-id already pending")
)

// RPC header names.
const (
	HdrExecuted = "executed"
	HdrError    = "error"
)

// rpcBuckets are the response-time histogram's upper bounds in seconds.
var rpcBuckets = []float64{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10}

// RPCStats are the counters of one (group, pattern, channel) of requests.
type RPCStats struct {
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
	key      string
	request  dest.Identity // the command or query channel
	replyTo  dest.Identity
	corr     string
	started  time.Time
	timer    *time.Timer
	counters *rpcCounters
}

// rpcState is the engine's request/response bookkeeping.
type rpcState struct {
	mu         sync.Mutex
	responders map[dest.Identity][]*Subscription // guarded by mu
	rr         map[dest.Identity]int             // guarded by mu
	pending    map[string]*pendingRequest        // by reply-to identity + correlation-id; guarded by mu
	expired    map[string]time.Time              // recently timed-out keys, for counting late responses; guarded by mu
	counters   map[dest.Identity]*rpcCounters    // guarded by mu
	owners     map[string]*Conn                  // temp-queue owner session ids → connection; guarded by mu
}

func newRPCState() *rpcState {
	return &rpcState{
		responders: map[dest.Identity][]*Subscription{}, rr: map[dest.Identity]int{},
		pending: map[string]*pendingRequest{}, expired: map[string]time.Time{},
		counters: map[dest.Identity]*rpcCounters{}, owners: map[string]*Conn{},
	}
}

// maxRPCChannels bounds the request channels with counters of their own; requests to
// further channels are counted together under the channel "_other" so that clients naming
// endless channels cannot grow the metrics without bound.
const maxRPCChannels = 1000

func (r *rpcState) countersLocked(id dest.Identity) *rpcCounters {
	c := r.counters[id]
	if c == nil {
		if len(r.counters) >= maxRPCChannels {
			id = dest.Identity{Group: "_other", Pattern: id.Pattern, Channel: "_other"}
			if c = r.counters[id]; c != nil {
				return c
			}
		}
		c = &rpcCounters{}
		r.counters[id] = c
	}
	return c
}

func pendingKey(replyTo dest.Identity, corr string) string {
	return replyTo.Group + "\x00" + replyTo.Pattern.String() + "\x00" + replyTo.Channel + "\x00" + corr
}

// maxExpired bounds the remembered timed-out requests (oldest forgotten first).
const maxExpired = 10000

// Request sends m (a command or query to id) to one responder and arms its timeout; replyTo
// is where the response, or the broker's executed:false answer, goes. It never fails for want
// of a responder: that answer is published at once instead. Errors: ErrDuplicateRequest.
func (e *Engine) Request(id dest.Identity, m *message.Message, replyTo dest.Identity, corr string, timeout time.Duration) error {
	e.noteGroup(id.Group)
	r := e.rpc
	key := pendingKey(replyTo, corr)
	r.mu.Lock()
	if _, dup := r.pending[key]; dup {
		r.mu.Unlock()
		return ErrDuplicateRequest
	}
	cnt := r.countersLocked(id)
	cnt.requests.Add(1)
	subs := r.responders[id]
	var chosen *Subscription
	n := len(subs)
	start := r.rr[id]
	for i := 0; i < n; i++ {
		s := subs[(start+i)%n]
		if s.hasCredit() {
			chosen = s
			r.rr[id] = (start + i + 1) % n
			break
		}
	}
	if chosen == nil {
		r.mu.Unlock()
		cnt.noResponder.Add(1)
		e.answer(replyTo, m, corr, "no responder")
		return nil
	}
	p := &pendingRequest{key: key, request: id, replyTo: replyTo, corr: corr, started: e.opts.Now(), counters: cnt}
	r.pending[key] = p
	p.timer = time.AfterFunc(timeout, func() { e.expire(p) })
	r.mu.Unlock()
	if !chosen.Conn.deliver(chosen, m, nil, 0, 1) {
		r.mu.Lock()
		delete(r.pending, key)
		r.mu.Unlock()
		p.timer.Stop()
		cnt.noResponder.Add(1)
		e.answer(replyTo, m, corr, "no responder")
	}
	return nil
}

func (e *Engine) expire(p *pendingRequest) {
	r := e.rpc
	r.mu.Lock()
	if r.pending[p.key] != p {
		r.mu.Unlock()
		return
	}
	delete(r.pending, p.key)
	if len(r.expired) >= maxExpired {
		oldest, ot := "", time.Time{}
		for k, t := range r.expired {
			if oldest == "" || t.Before(ot) {
				oldest, ot = k, t
			}
		}
		delete(r.expired, oldest)
	}
	r.expired[p.key] = e.opts.Now()
	r.mu.Unlock()
	p.counters.timeouts.Add(1)
	e.answer(p.replyTo, nil, p.corr, "timeout")
}

// answer publishes the broker's executed:false response to replyTo. An answer to a
// temp-queue whose connection is gone is dropped (it would recreate an orphan queue).
func (e *Engine) answer(replyTo dest.Identity, req *message.Message, corr, reason string) {
	if replyTo.Pattern == dest.PatternTempQueue && !e.TempOwnerAlive(tempOwner(replyTo.Channel)) {
		e.CountDroppedResponse(replyTo, false)
		return
	}
	m := &message.Message{
		ID: message.NewID("titan"), Group: replyTo.Group, Destination: replyTo.Destination(),
		TimestampMs: e.opts.Now().UnixMilli(),
		Headers: []frame.Header{
			{Key: frame.HdrCorrelationID, Value: corr},
			{Key: HdrExecuted, Value: "false"},
			{Key: HdrError, Value: reason},
		},
	}
	if _, err := e.Publish(replyTo, m); err != nil {
		e.log.Warn("request answer not delivered", "reply_to", replyTo.String(), "err", err)
	}
}

// Respond matches a SEND to replyTo carrying correlation-id corr against the pending requests.
// It returns pending=true when it completed a request (the caller publishes the response as
// usual), late=true when the request had already timed out (the caller drops it).
func (e *Engine) Respond(replyTo dest.Identity, corr string) (pending, late bool) {
	r := e.rpc
	key := pendingKey(replyTo, corr)
	r.mu.Lock()
	p, ok := r.pending[key]
	if ok {
		delete(r.pending, key)
		r.mu.Unlock()
		p.timer.Stop()
		p.counters.responses.Add(1)
		p.counters.observe(e.opts.Now().Sub(p.started))
		return true, false
	}
	_, late = r.expired[key]
	if late {
		delete(r.expired, key)
	}
	r.mu.Unlock()
	return false, late
}

// CountDroppedResponse counts a response the caller dropped (late or unknown) against the
// request channel's counters when known, else against the reply destination.
func (e *Engine) CountDroppedResponse(replyTo dest.Identity, late bool) {
	r := e.rpc
	r.mu.Lock()
	// Reply destinations (temp-queues above all) come and go: count them under one series
	// per pattern rather than one per destination.
	c := r.countersLocked(dest.Identity{Group: "_replies", Pattern: replyTo.Pattern, Channel: "_replies"})
	r.mu.Unlock()
	if late {
		c.late.Add(1)
	} else {
		c.unknown.Add(1)
	}
}

// RPCStats returns the request/response counters per channel, sorted.
func (e *Engine) RPCStats() []RPCStats {
	r := e.rpc
	r.mu.Lock()
	out := make([]RPCStats, 0, len(r.counters))
	for id, c := range r.counters {
		c.mu.Lock()
		st := RPCStats{
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
	}
	r.mu.Unlock()
	sort.Slice(out, func(i, j int) bool {
		if out[i].Group != out[j].Group {
			return out[i].Group < out[j].Group
		}
		return out[i].Pattern+out[i].Channel < out[j].Pattern+out[j].Channel
	})
	return out
}

// SetTempOwner registers (or, with c nil, removes) the connection owning session id's
// temp-queues.
func (e *Engine) SetTempOwner(session string, c *Conn) {
	r := e.rpc
	r.mu.Lock()
	if c == nil {
		delete(r.owners, session)
	} else {
		r.owners[session] = c
	}
	r.mu.Unlock()
}

// TempOwnerAlive reports whether session id owns live temp-queues.
func (e *Engine) TempOwnerAlive(session string) bool {
	r := e.rpc
	r.mu.Lock()
	defer r.mu.Unlock()
	_, ok := r.owners[session]
	return ok
}

func (e *Engine) addResponder(sub *Subscription) {
	id := dest.IdentityOf(sub.Group, sub.Dest)
	r := e.rpc
	r.mu.Lock()
	r.responders[id] = append(r.responders[id], sub)
	r.mu.Unlock()
}

func (e *Engine) removeResponder(sub *Subscription) {
	id := dest.IdentityOf(sub.Group, sub.Dest)
	r := e.rpc
	r.mu.Lock()
	if removeFromList(r.responders, id, sub) {
		delete(r.rr, id)
	}
	r.mu.Unlock()
}

// DropTempQueues deletes every temp-queue owned by session (its connection closed): pending
// replies are discarded, as the queue lives only as long as its connection (RabbitMQ
// temp-queue semantics).
func (e *Engine) DropTempQueues(session string) {
	e.SetTempOwner(session, nil)
	prefix := session + "."
	e.mu.RLock()
	var ids []dest.Identity
	for id := range e.queues {
		if id.Pattern == dest.PatternTempQueue && len(id.Channel) > len(prefix) && id.Channel[:len(prefix)] == prefix {
			ids = append(ids, id)
		}
	}
	e.mu.RUnlock()
	for _, id := range ids {
		_ = e.Delete(id, true)
	}
}

// tempOwner returns the owning session id of a temp-queue channel ("<session>.<name>").
func tempOwner(channel string) string {
	for i := 0; i < len(channel); i++ {
		if channel[i] == '.' {
			return channel[:i]
		}
	}
	return channel
}
