package rpc

import (
	"errors"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/titan-broker/titan/internal/clock"
	"github.com/titan-broker/titan/internal/delivery"
	"github.com/titan-broker/titan/internal/dest"
	"github.com/titan-broker/titan/internal/dispatch"
	"github.com/titan-broker/titan/internal/frame"
	"github.com/titan-broker/titan/internal/message"
)

// Errors of the request path.
var (
	// ErrDuplicateRequest is returned by Request for a correlation-id already pending on the
	// same reply-to destination.
	ErrDuplicateRequest = errors.New("rpc: correlation-id already pending")
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
	key      string
	request  dest.Identity // the command or query channel
	replyTo  dest.Identity
	corr     string
	started  time.Time
	timer    clock.Timer
	counters *rpcCounters
}

// rpcState is the request/response bookkeeping.
type rpcState struct {
	mu         sync.Mutex
	responders map[dest.Identity][]*delivery.Subscription // guarded by mu
	rr         map[dest.Identity]int                      // guarded by mu
	pending    map[string]*pendingRequest                 // by reply-to identity + correlation-id; guarded by mu
	expired    map[string]time.Time                       // recently timed-out keys, for counting late responses; guarded by mu
	counters   map[dest.Identity]*rpcCounters             // guarded by mu
	closed     bool                                       // Close ran: no timer is armed; guarded by mu
	owners     map[string]*delivery.Conn                  // temp-queue owner session ids → connection; guarded by mu
}

func newRPCState() *rpcState {
	return &rpcState{
		responders: map[dest.Identity][]*delivery.Subscription{}, rr: map[dest.Identity]int{},
		pending: map[string]*pendingRequest{}, expired: map[string]time.Time{},
		counters: map[dest.Identity]*rpcCounters{}, owners: map[string]*delivery.Conn{},
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
// of a responder: that answer is published at once instead. With Options.Responders the
// responder is whichever one that port offers m to (cluster mode: a responder of any node);
// otherwise one of this pattern's own, round-robin among those with credit. Errors:
// ErrDuplicateRequest; dispatch.ErrCanceled after Close.
func (p *Pattern) Request(id dest.Identity, m *message.Message, replyTo dest.Identity, corr string, timeout time.Duration) error {
	r := p.rpc
	key := pendingKey(replyTo, corr)
	r.mu.Lock()
	if _, dup := r.pending[key]; dup {
		r.mu.Unlock()
		return ErrDuplicateRequest
	}
	cnt := r.countersLocked(id)
	cnt.requests.Add(1)
	remote := p.opts.Responders
	var chosen *delivery.Subscription
	if remote == nil {
		subs := r.responders[id]
		n := len(subs)
		start := r.rr[id]
		for i := 0; i < n; i++ {
			s := subs[(start+i)%n]
			if s.HasCredit() {
				chosen = s
				r.rr[id] = (start + i + 1) % n
				break
			}
		}
		if chosen == nil {
			r.mu.Unlock()
			cnt.noResponder.Add(1)
			p.answer(replyTo, corr, "no responder")
			return nil
		}
	}
	if r.closed {
		r.mu.Unlock()
		return dispatch.ErrCanceled // closed: the broker is shutting down
	}
	pr := &pendingRequest{key: key, request: id, replyTo: replyTo, corr: corr, started: p.opts.Clock.Now(), counters: cnt}
	r.pending[key] = pr
	pr.timer = p.opts.Clock.AfterFunc(timeout, func() { p.expire(pr) })
	r.mu.Unlock()
	var taken bool
	if remote != nil {
		taken = remote.Offer(id, m, replyTo, corr, timeout)
	} else {
		taken = chosen.Conn.Deliver(chosen, m, nil, 0, 1)
	}
	if !taken {
		r.mu.Lock()
		mine := r.pending[key] == pr // not already answered by its timeout
		if mine {
			delete(r.pending, key)
		}
		r.mu.Unlock()
		pr.timer.Stop()
		if mine {
			cnt.noResponder.Add(1)
			p.answer(replyTo, corr, "no responder")
		}
	}
	return nil
}

func (p *Pattern) expire(pr *pendingRequest) {
	if !p.timers.Enter() {
		return // closed
	}
	defer p.timers.Leave()
	r := p.rpc
	r.mu.Lock()
	if r.closed || r.pending[pr.key] != pr {
		r.mu.Unlock()
		return
	}
	delete(r.pending, pr.key)
	if len(r.expired) >= maxExpired {
		oldest, ot := "", time.Time{}
		for k, t := range r.expired {
			if oldest == "" || t.Before(ot) {
				oldest, ot = k, t
			}
		}
		delete(r.expired, oldest)
	}
	r.expired[pr.key] = p.opts.Clock.Now()
	r.mu.Unlock()
	pr.counters.timeouts.Add(1)
	p.answer(pr.replyTo, pr.corr, "timeout")
}

// answer publishes the broker's executed:false response to replyTo. An answer to a
// temp-queue whose connection is gone is refused by the temp-queue publisher
// (dispatch.ErrNoQueue: it would recreate an orphan queue) and counted as dropped.
func (p *Pattern) answer(replyTo dest.Identity, corr, reason string) {
	m := &message.Message{
		ID: p.opts.MessageID(), Group: replyTo.Group, Destination: replyTo.Destination(),
		TimestampMs: p.opts.Clock.Now().UnixMilli(),
		Headers: []frame.Header{
			{Key: frame.HdrCorrelationID, Value: corr},
			{Key: HdrExecuted, Value: "false"},
			{Key: HdrError, Value: reason},
		},
	}
	_, err := p.opts.Replies.Publish(replyTo, m, nil)
	switch {
	case errors.Is(err, dispatch.ErrNoQueue):
		p.CountDroppedResponse(replyTo, false)
	case err != nil:
		p.log.Warn("request answer not delivered", "reply_to", replyTo.String(), "err", err)
	}
}

// Respond matches a SEND to replyTo carrying correlation-id corr against the pending requests.
// It returns pending=true when it completed a request (the caller publishes the response as
// usual), late=true when the request had already timed out (the caller drops it).
func (p *Pattern) Respond(replyTo dest.Identity, corr string) (pending, late bool) {
	r := p.rpc
	key := pendingKey(replyTo, corr)
	r.mu.Lock()
	pr, ok := r.pending[key]
	if ok {
		delete(r.pending, key)
		r.mu.Unlock()
		pr.timer.Stop()
		pr.counters.responses.Add(1)
		pr.counters.observe(p.opts.Clock.Now().Sub(pr.started))
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
func (p *Pattern) CountDroppedResponse(replyTo dest.Identity, late bool) {
	r := p.rpc
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

// Stats returns the request/response counters per channel, sorted.
func (p *Pattern) Stats() []Stats {
	r := p.rpc
	r.mu.Lock()
	out := make([]Stats, 0, len(r.counters))
	for id, c := range r.counters {
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
