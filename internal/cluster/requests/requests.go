// Package requests is request/response (commands, queries) and temp-queues in cluster
// mode: the single-node rpc pattern keeps the bookkeeping, core NATS carries what crosses
// nodes.
package requests

import (
	"encoding/base64"
	"errors"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/titan-broker/titan/internal/cluster"
	"github.com/titan-broker/titan/internal/delivery"
	"github.com/titan-broker/titan/internal/dest"
	"github.com/titan-broker/titan/internal/dispatch"
	"github.com/titan-broker/titan/internal/message"
	"github.com/titan-broker/titan/internal/rpc"
)

// Subject kinds of request/response (core NATS, nothing stored).
const (
	kindCommand     = "cmd"
	kindCommandBare = "cmdb"
	kindQuery       = "qry"
	kindQueryBare   = "qryb"
	kindTemp        = "tmp"
)

// NATS header names of the request/response protocol between nodes.
const (
	hdrIdentity = "Titan-Id"      // base64url of encodeIdentity: a temp-queue message's identity
	hdrReplyKey = "Titan-Reply"   // base64url of requestKey(replyTo, corr)
	hdrClaim    = "Titan-Claim"   // the requesting node's claim subject
	hdrTimeout  = "Titan-Timeout" // the request's timeout, in ms
)

// Replies of a node to another's NATS request.
const (
	replyOK      = "ok"   // a request delivered to a responder; a temp-queue message queued
	replyBusy    = "busy" // no local responder of the request's channel had credit
	replyGone    = "gone" // the temp-queue's owner connection is gone
	replyDropped = "drop" // the temp-queue's address-full policy DROP discarded it
	replyPending = "p"    // a claim completed a pending request
	replyLate    = "l"    // a claim named a request that had timed out
	replyUnknown = "u"    // a claim named no request
)

// Tunables of request/response in cluster mode.
const (
	// responderQueue is the NATS queue group every responder subscription joins: NATS hands
	// each request to one member, weighted-random over all of them cluster-wide.
	responderQueue = "titan"
	// OfferTimeout bounds the wait for the responder's node to confirm a delivery (and the
	// request's own timeout bounds it further). A request whose confirmation does not come
	// (its responder unsubscribed while NATS still routed to it, or that node is down)
	// counts as delivered: its timeout answers it.
	OfferTimeout = 2 * time.Second
	// ClaimTimeout bounds a responder node's wait for the requester's node to match a
	// response; an unanswered claim treats the response as unrequested.
	ClaimTimeout = 2 * time.Second
	// TempTimeout bounds a SEND to a temp-queue owned on another node. Unanswered (the owner
	// left while NATS still routed to it, or its node is down), the message is dropped and
	// counted, as a response to a closed connection's temp-queue is.
	TempTimeout = 2 * time.Second
	// ProbeTimeout bounds the question whether a temp-queue owner lives on another node.
	ProbeTimeout = 2 * time.Second
	// lateGrace keeps a delivered request's claim route after its timeout, so a late
	// response is still matched (and dropped as late) by the requester's node.
	lateGrace = time.Minute
	// maxRouted bounds the claim routes a node keeps for requests it delivered; the oldest
	// expired ones go first, then any.
	maxRouted = 100000
	// aliveTTL is how long a remote temp-queue owner found alive is believed alive; a SEND
	// to it still fails with dispatch.ErrNoQueue when it left meanwhile.
	aliveTTL = time.Second
	// maxAlive bounds that cache.
	maxAlive = 4096
)

// Pattern is request/response (commands, queries) and temp-queues in cluster mode: the
// router's Requests port, with the single-node pattern (rpc.Pattern: pending requests,
// timeouts answered with executed:false, counters, local temp-queue owners) doing the
// bookkeeping, and core NATS carrying what crosses nodes:
//
//   - Every responder SUBSCRIBE is a NATS queue subscription (queue group "titan") on
//     t.<group>.cmd.<channel> or t.<group>.qry.<channel>, so a request goes to exactly one
//     responder of its group and channel, wherever it is (NATS picks weighted-random among
//     them; a request finding none is answered "no responder" at once, as single-node).
//   - The requesting node keeps the pending request and its timeout. The responder's node
//     remembers where each request it delivered came from; a response SENT there (to the
//     reply-to, with the correlation-id) is first matched on the requesting node by a claim
//     request, so a response after the timeout is dropped as late exactly as single-node.
//   - A temp-queue lives on its owner connection's node (it dies with the connection). Its
//     NATS interest, t.*.tmp.<session>.>, is made on first use (issue 28: not one NATS
//     subscription per connection): when the connection's temp-queue is first made or
//     looked up as a destination (a SEND or a request's reply-to naming it) or subscribed
//     to (TempSubscriber) — the ways its name reaches another node — so a SEND from any
//     node reaches it, and a SEND
//     after the owner left is refused as single-node refuses it. An idle connection costs
//     no NATS subscription.
//
// Groups stay separate namespaces: the group is a subject token.
type Pattern struct {
	*rpc.Pattern
	nc    *nats.Conn
	log   *slog.Logger
	claim string // this node's claim subject
	now   func() time.Time

	// mu guards the maps below (lock order: internal/broker/LOCKS.md). While held, the only
	// lock taken is a responder's delivery.Conn.mu (its credit check); never held while
	// calling NATS, delivering or calling the rpc.Pattern.
	mu         sync.Mutex
	responders map[*delivery.Subscription]*nats.Subscription // guarded by mu
	local      map[dest.Identity][]*delivery.Subscription    // responders here, by channel; guarded by mu
	rr         map[dest.Identity]int                         // guarded by mu
	owners     map[string]*nats.Subscription                 // temp-queue owner sessions here (nil: no NATS interest yet); guarded by mu
	routed     map[string]routedRequest                      // requests delivered here for other nodes; guarded by mu
	// held counts, per ack:auto responder here, the requests it was given that have not
	// ended (no response SENT through this node, no timeout yet); heldBy names each one's
	// responder by request key. An ack:auto responder takes at most its prefetch-count
	// (delivery.DefaultPrefetch when unset) at once, as on a single node (rpc.member).
	// Guarded by mu.
	held   map[*delivery.Subscription]int
	heldBy map[string]heldRequest
	holds  uint64 // numbers the holds, so a stale timeout releases nothing
	// holding is len(heldBy), read without mu: a response costs no key and no lock while
	// no ack:auto responder here holds a request.
	holding  atomic.Int64
	alive    map[string]time.Time // remote owners found alive, until; guarded by mu
	claimSub *nats.Subscription

	// Offered, Busy and Claims count requests sent to responders over NATS, requests a
	// responder node could not deliver, and responses matched on another node.
	Offered, Busy, Claims atomic.Uint64
	// TempInterests is the number of NATS subscriptions this node holds for temp-queue
	// owners (connections whose temp-queues were used).
	TempInterests atomic.Int64
}

// routedRequest is where a request delivered here came from.
type routedRequest struct {
	claim string
	until time.Time
}

// New returns request/response and temp-queues over n's connection; o configures
// the underlying rpc.Pattern (its Responders is set to the returned Pattern). Errors: the
// NATS connection's (subscribing this node's claim subject).
func New(n *cluster.Node, o rpc.Options, log *slog.Logger) (*Pattern, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	r := &Pattern{
		nc: n.Conn(), log: log, claim: nats.NewInbox(), now: time.Now,
		responders: make(map[*delivery.Subscription]*nats.Subscription), local: make(map[dest.Identity][]*delivery.Subscription),
		rr: make(map[dest.Identity]int), owners: make(map[string]*nats.Subscription),
		routed: make(map[string]routedRequest), alive: make(map[string]time.Time),
		held: make(map[*delivery.Subscription]int), heldBy: make(map[string]heldRequest),
	}
	o.Responders = r
	if o.Clock != nil {
		r.now = o.Clock.Now
	}
	r.Pattern = rpc.New(o)
	sub, err := r.nc.Subscribe(r.claim, r.onClaim)
	if err != nil {
		return nil, err
	}
	r.claimSub = sub
	return r, nil
}

// requestSubject is the NATS subject of a command or query channel.
func requestSubject(id dest.Identity) string {
	kind := kindCommand
	switch {
	case id.Pattern == dest.PatternQueries && id.Bare:
		kind = kindQueryBare
	case id.Pattern == dest.PatternQueries:
		kind = kindQuery
	case id.Bare:
		kind = kindCommandBare
	}
	return cluster.SubjectOf(id, kind)
}

// tempSubject is the NATS subject of a temp-queue (channel "<session>.<name>").
func tempSubject(id dest.Identity) string { return cluster.SubjectOf(id, kindTemp) }

// ownerSubject is the filter a temp-queue owner's node subscribes for its session, in
// every group.
func ownerSubject(session string) string {
	return cluster.SubjectOf(dest.Identity{Group: "*", Channel: session}, kindTemp) + ".>"
}

// probeSubject asks whether session owns temp-queues: "$probe" is never a group (groups
// are [a-zA-Z0-9_-]), so it never names a temp-queue.
func probeSubject(session string) string {
	return cluster.SubjectOf(dest.Identity{Group: "$probe", Channel: session}, kindTemp) + ".alive"
}

// encodeIdentity is id as one string: group, pattern, bare flag and channel, separated
// by NUL (which no group or channel holds).
func encodeIdentity(id dest.Identity) string {
	bare := "0"
	if id.Bare {
		bare = "1"
	}
	return id.Group + "\x00" + strconv.Itoa(int(id.Pattern)) + "\x00" + bare + "\x00" + id.Channel
}

// decodeIdentity reverses encodeIdentity; ok is false for anything else.
func decodeIdentity(s string) (dest.Identity, bool) {
	parts := strings.SplitN(s, "\x00", 4)
	if len(parts) != 4 {
		return dest.Identity{}, false
	}
	p, err := strconv.Atoi(parts[1])
	if err != nil || !dest.Pattern(p).Valid() || parts[0] == "" || parts[3] == "" {
		return dest.Identity{}, false
	}
	return dest.Identity{Group: parts[0], Pattern: dest.Pattern(p), Bare: parts[2] == "1", Channel: parts[3]}, true
}

// requestKey names a pending request across nodes: its reply-to identity and
// correlation-id (the key rpc.Pattern matches responses by).
func requestKey(replyTo dest.Identity, corr string) string {
	return encodeIdentity(replyTo) + "\x00" + corr
}

// decodeKey reverses requestKey.
func decodeKey(k string) (dest.Identity, string, bool) {
	i := strings.LastIndexByte(k, 0)
	if i < 0 {
		return dest.Identity{}, "", false
	}
	id, ok := decodeIdentity(k[:i])
	return id, k[i+1:], ok
}

var b64 = base64.RawURLEncoding

// isSessionID reports whether s has the form of a client session id ("titan-<16 hex>",
// session.Session.ID), the only owners a temp-queue can have on another node.
func isSessionID(s string) bool {
	h, ok := strings.CutPrefix(s, "titan-")
	if !ok || len(h) != 16 {
		return false
	}
	for i := 0; i < len(h); i++ {
		if c := h[i]; !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

// Subscribe registers sub as a responder of its (group, pattern, channel) cluster-wide: a
// NATS queue subscription on the channel's subject. Errors:
// delivery.ErrDuplicateSubscription, the NATS connection's.
func (r *Pattern) Subscribe(sub *delivery.Subscription) error {
	sub.Owner = r
	if err := sub.Conn.Add(sub); err != nil {
		return err
	}
	id := sub.Identity()
	ns, err := r.nc.QueueSubscribe(requestSubject(id), responderQueue, func(msg *nats.Msg) { r.onRequest(sub, msg) })
	if err != nil {
		sub.Conn.Remove(sub)
		return err
	}
	r.mu.Lock()
	r.responders[sub] = ns
	r.local[id] = append(r.local[id], sub)
	r.mu.Unlock()
	return nil
}

// Detach implements delivery.Owner: sub stops responding. A request it received and did
// not answer times out on the requester's node.
func (r *Pattern) Detach(sub *delivery.Subscription, _ []delivery.Unacked) {
	id := sub.Identity()
	r.mu.Lock()
	ns := r.responders[sub]
	delete(r.responders, sub)
	delete(r.held, sub) // its heldBy entries release nothing now (releaseLocked)
	if delivery.RemoveFromList(r.local, id, sub) {
		delete(r.rr, id)
	}
	r.mu.Unlock()
	if ns != nil {
		_ = ns.Unsubscribe()
	}
}

// offerAttempts bounds how often a request is offered again after the responder node NATS
// picked had no responder with credit (NATS picks anew each time).
const offerAttempts = 3

// Offer implements rpc.Responders: m goes to one responder of id on any node, over NATS.
// It reports false when no responder is subscribed anywhere (NATS has no responders) or
// offerAttempts picks all landed on nodes without a responder with credit.
func (r *Pattern) Offer(id dest.Identity, m *message.Message, replyTo dest.Identity, corr string, timeout time.Duration) bool {
	data := message.Encode(nil, m)
	key := b64.EncodeToString([]byte(requestKey(replyTo, corr)))
	ms := strconv.FormatInt(timeout.Milliseconds(), 10)
	wait := min(OfferTimeout, max(timeout, time.Millisecond))
	for range offerAttempts {
		msg := nats.NewMsg(requestSubject(id))
		msg.Data = data
		msg.Header.Set(hdrReplyKey, key)
		msg.Header.Set(hdrClaim, r.claim)
		msg.Header.Set(hdrTimeout, ms)
		r.Offered.Add(1)
		resp, err := r.nc.RequestMsg(msg, wait)
		switch {
		case err == nil:
			if string(resp.Data) == replyOK {
				return true
			}
			r.Busy.Add(1) // that node's responders had no credit: NATS may pick another
		case errors.Is(err, nats.ErrNoResponders):
			return false
		default:
			// Delivered or not, its timeout will answer it.
			r.log.Warn("request offer unconfirmed", "channel", id.String(), "err", err)
			return true
		}
	}
	return false
}

// onRequest delivers a request that NATS handed to local responder sub (or, when sub has
// no credit, to another local responder of the channel that has) and answers the
// requesting node.
func (r *Pattern) onRequest(sub *delivery.Subscription, msg *nats.Msg) {
	m, err := message.Decode(msg.Data)
	rawKey, kerr := b64.DecodeString(msg.Header.Get(hdrReplyKey))
	if err != nil || kerr != nil {
		r.log.Warn("undecodable request from another node", "subject", msg.Subject)
		_ = msg.Respond([]byte(replyBusy))
		return
	}
	key, claim := string(rawKey), msg.Header.Get(hdrClaim)
	ms, _ := strconv.ParseInt(msg.Header.Get(hdrTimeout), 10, 64)
	id := sub.Identity()
	target := sub
	r.mu.Lock()
	if !r.creditLocked(target) {
		target = nil
		subs := r.local[id]
		n, start := len(subs), r.rr[id]
		for i := 0; i < n; i++ {
			if s := subs[(start+i)%n]; r.creditLocked(s) {
				target = s
				r.rr[id] = (start + i + 1) % n
				break
			}
		}
	}
	routed := claim != "" && claim != r.claim // a request of this node is matched locally
	if target != nil && routed {
		r.routeLocked(key, routedRequest{claim: claim, until: r.now().Add(time.Duration(ms)*time.Millisecond + lateGrace)})
	}
	auto := target != nil && target.Ack == delivery.AckAuto
	var hold uint64
	if auto {
		hold = r.holdLocked(key, target)
	}
	r.mu.Unlock()
	// The route and the hold are recorded before delivery: the responder may answer at once.
	if target == nil || !target.Conn.Deliver(target, m, nil, 0, 1) {
		r.mu.Lock()
		if routed {
			delete(r.routed, key)
		}
		if auto {
			r.releaseLocked(key, hold)
		}
		r.mu.Unlock()
		_ = msg.Respond([]byte(replyBusy))
		return
	}
	if auto {
		// The requesting node answers a request nobody responded to at its timeout; the
		// responder's place is given back then too.
		time.AfterFunc(time.Duration(max(ms, 1))*time.Millisecond, func() {
			r.mu.Lock()
			r.releaseLocked(key, hold)
			r.mu.Unlock()
		})
	}
	_ = msg.Respond([]byte(replyOK))
}

// creditLocked reports whether responder s may take a request now: room in its outbound
// buffer and, for ack:auto, fewer requests held than its prefetch-count (ack:client ones
// are bounded by their unacknowledged requests, in HasCredit). r.mu held.
func (r *Pattern) creditLocked(s *delivery.Subscription) bool {
	if !s.HasCredit() {
		return false
	}
	if s.Ack != delivery.AckAuto {
		return true
	}
	limit := s.Prefetch
	if limit <= 0 {
		limit = delivery.DefaultPrefetch
	}
	return r.held[s] < limit
}

// heldRequest is the ack:auto responder a request was given to, and the hold's number.
type heldRequest struct {
	sub *delivery.Subscription
	n   uint64
}

// holdLocked records that request key was given to ack:auto responder s and returns the
// hold's number. A key already held (a request offered again) is released first. r.mu held.
func (r *Pattern) holdLocked(key string, s *delivery.Subscription) uint64 {
	r.releaseLocked(key, 0)
	r.holds++
	r.heldBy[key] = heldRequest{sub: s, n: r.holds}
	r.holding.Store(int64(len(r.heldBy)))
	r.held[s]++
	return r.holds
}

// releaseLocked gives back the place request key holds at its responder, if it holds one:
// the response passed this node, the request timed out, or it was not delivered. n names
// the hold to release (a timeout's, so that it releases nothing once the key was answered
// and reused); 0 releases whichever holds the key. r.mu held.
func (r *Pattern) releaseLocked(key string, n uint64) {
	h, ok := r.heldBy[key]
	if !ok || n != 0 && h.n != n {
		return
	}
	delete(r.heldBy, key)
	r.holding.Store(int64(len(r.heldBy)))
	s := h.sub
	if n, ok := r.held[s]; ok { // gone once s detached
		if n <= 1 {
			delete(r.held, s)
		} else {
			r.held[s] = n - 1
		}
	}
}

// routeLocked records where a delivered request came from, within maxRouted. r.mu held.
func (r *Pattern) routeLocked(key string, rt routedRequest) {
	if len(r.routed) >= maxRouted {
		now := r.now()
		for k, v := range r.routed {
			if now.After(v.until) {
				delete(r.routed, k)
			}
		}
		for k := range r.routed {
			if len(r.routed) < maxRouted {
				break
			}
			delete(r.routed, k)
		}
	}
	r.routed[key] = rt
}

// Respond matches a response SENT to replyTo with correlation-id corr: against this node's
// pending requests first, then, for a request this node delivered for another node, on that
// node (a claim request). pending and late are as rpc.Pattern.Respond's.
func (r *Pattern) Respond(replyTo dest.Identity, corr string) (pending, late bool) {
	var key string
	if r.holding.Load() > 0 { // the response passes the responder's node: its place is free
		key = requestKey(replyTo, corr)
		r.mu.Lock()
		r.releaseLocked(key, 0)
		r.mu.Unlock()
	}
	if pending, late = r.Pattern.Respond(replyTo, corr); pending || late {
		return pending, late
	}
	if key == "" {
		key = requestKey(replyTo, corr)
	}
	r.mu.Lock()
	rt, ok := r.routed[key]
	if ok {
		delete(r.routed, key)
	}
	r.mu.Unlock()
	if !ok {
		return false, false
	}
	resp, err := r.nc.Request(rt.claim, []byte(key), ClaimTimeout)
	if err != nil {
		r.log.Debug("response claim unanswered", "reply_to", replyTo.String(), "err", err)
		return false, false
	}
	r.Claims.Add(1)
	switch string(resp.Data) {
	case replyPending:
		return true, false
	case replyLate:
		return false, true
	}
	return false, false
}

// onClaim matches another node's response against this node's pending requests.
func (r *Pattern) onClaim(msg *nats.Msg) {
	replyTo, corr, ok := decodeKey(string(msg.Data))
	ans := replyUnknown
	if ok {
		switch pending, late := r.Pattern.Respond(replyTo, corr); {
		case pending:
			ans = replyPending
		case late:
			ans = replyLate
		}
	}
	_ = msg.Respond([]byte(ans))
}

// Own registers c as the owner of session id's temp-queues. They become reachable from
// every node on first use (interest).
func (r *Pattern) Own(session string, c *delivery.Conn) {
	r.Pattern.Own(session, c)
	r.mu.Lock()
	r.owners[session] = nil
	r.mu.Unlock()
}

// interest makes session's temp-queues reachable from every node: its NATS subscription,
// made once, while session is owned here. The subscription is flushed to this node's
// server before interest returns, so it is known to the other nodes (routes carry it
// ahead of anything this node publishes later) before the temp-queue's name can reach them.
func (r *Pattern) interest(session string) {
	r.mu.Lock()
	ns, owned := r.owners[session]
	r.mu.Unlock()
	if !owned || ns != nil {
		return
	}
	ns, err := r.nc.Subscribe(ownerSubject(session), r.onTemp)
	if err != nil {
		r.log.Warn("temp-queues not reachable from other nodes", "session", session, "err", err)
		return
	}
	r.mu.Lock()
	cur, owned := r.owners[session]
	keep := owned && cur == nil
	if keep {
		r.owners[session] = ns
		r.TempInterests.Add(1)
	}
	r.mu.Unlock()
	if !keep { // released meanwhile, or another caller made it first
		_ = ns.Unsubscribe()
		return
	}
	if err := r.nc.FlushTimeout(ProbeTimeout); err != nil {
		r.log.Warn("temp-queue interest not confirmed by the server", "session", session, "err", err)
	}
}

// Release ends session id's ownership on every node and drops its temp-queues.
func (r *Pattern) Release(session string) {
	r.mu.Lock()
	ns := r.owners[session]
	delete(r.owners, session)
	if ns != nil {
		r.TempInterests.Add(-1)
	}
	r.mu.Unlock()
	if ns != nil {
		_ = ns.Unsubscribe()
	}
	r.Pattern.Release(session)
}

// TempOwnerAlive reports whether session id owns live temp-queues on this node or, for a
// session id of another node's client, on any node (asked over NATS; a positive answer is
// remembered for aliveTTL).
func (r *Pattern) TempOwnerAlive(session string) bool {
	if r.Pattern.TempOwnerAlive(session) {
		return true
	}
	if !isSessionID(session) {
		return false
	}
	now := r.now()
	r.mu.Lock()
	until, ok := r.alive[session]
	r.mu.Unlock()
	if ok && now.Before(until) {
		return true
	}
	resp, err := r.nc.Request(probeSubject(session), nil, ProbeTimeout)
	if err != nil || string(resp.Data) != replyOK {
		return false
	}
	r.mu.Lock()
	if len(r.alive) >= maxAlive {
		clear(r.alive)
	}
	r.alive[session] = now.Add(aliveTTL)
	r.mu.Unlock()
	return true
}

// Temp returns the publisher of temp-queue messages: to the local queue when the owner is
// here, over NATS to the owner's node otherwise. A SEND to the temp-queue of a connection
// closed here is refused with dispatch.ErrNoQueue, as single-node; one to an owner that
// left another node is dropped and counted (see ownerGone).
func (r *Pattern) Temp() rpc.Publisher { return tempPublisher{r} }

type tempPublisher struct{ r *Pattern }

func (t tempPublisher) Publish(id dest.Identity, m *message.Message, cancel <-chan struct{}) (bool, error) {
	r := t.r
	owner, _, _ := strings.Cut(id.Channel, ".")
	if r.Pattern.TempOwnerAlive(owner) || !isSessionID(owner) {
		return r.Pattern.Temp().Publish(id, m, cancel)
	}
	msg := nats.NewMsg(tempSubject(id))
	msg.Data = message.Encode(nil, m)
	msg.Header.Set(hdrIdentity, b64.EncodeToString([]byte(encodeIdentity(id))))
	resp, err := r.nc.RequestMsg(msg, TempTimeout)
	switch {
	case errors.Is(err, nats.ErrNoResponders) || errors.Is(err, nats.ErrTimeout):
		return r.ownerGone(id)
	case err != nil:
		return false, err
	}
	switch string(resp.Data) {
	case replyOK:
		return false, nil
	case replyDropped:
		return true, nil
	case replyGone:
		return r.ownerGone(id)
	}
	return false, errors.New(string(resp.Data))
}

// ownerGone settles a message to a temp-queue whose owner on another node left after it was
// found alive (or whose node did not answer): it is dropped and counted as a response
// nobody awaits, the outcome single-node gives a SEND to a closed connection's temp-queue
// (its route drops and counts it). Refusing it instead would fail the SEND with a fatal
// ERROR and close the responder's connection for a requester that merely left.
func (r *Pattern) ownerGone(id dest.Identity) (dropped bool, err error) {
	r.Pattern.CountDroppedResponse(id, false)
	return true, nil
}

// onTemp queues a temp-queue message SENT on another node, or answers a probe.
func (r *Pattern) onTemp(msg *nats.Msg) {
	if strings.HasPrefix(msg.Subject, "t.$probe.") {
		_ = msg.Respond([]byte(replyOK))
		return
	}
	raw, err := b64.DecodeString(msg.Header.Get(hdrIdentity))
	id, ok := decodeIdentity(string(raw))
	m, merr := message.Decode(msg.Data)
	if err != nil || !ok || merr != nil || id.Pattern != dest.PatternTempQueue {
		_ = msg.Respond([]byte("undecodable temp-queue message"))
		return
	}
	dropped, err := r.Pattern.Temp().Publish(id, m, nil)
	ans := replyOK
	switch {
	case errors.Is(err, dispatch.ErrNoQueue):
		ans = replyGone
	case err != nil:
		ans = err.Error()
	case dropped:
		ans = replyDropped
	}
	_ = msg.Respond([]byte(ans))
}

// Destinations is the destination-creating port (router.Destinations) of a node.
type Destinations interface {
	Exists(id dest.Identity) bool
	Ensure(id dest.Identity) (created bool, err error)
}

// TempDestinations wraps d so that a SEND to a temp-queue owned on another node creates
// nothing here (the queue lives on its owner's node), and so that a temp-queue owned here
// gets its NATS interest when it is first made or looked up.
func (r *Pattern) TempDestinations(d Destinations) Destinations { return tempDestinations{d, r} }

type tempDestinations struct {
	Destinations
	r *Pattern
}

func (t tempDestinations) remote(id dest.Identity) bool {
	if id.Pattern != dest.PatternTempQueue {
		return false
	}
	owner, _, _ := strings.Cut(id.Channel, ".")
	return isSessionID(owner) && !t.r.Pattern.TempOwnerAlive(owner)
}

// local makes the NATS interest of a temp-queue owned here.
func (t tempDestinations) local(id dest.Identity) {
	if id.Pattern != dest.PatternTempQueue {
		return
	}
	owner, _, _ := strings.Cut(id.Channel, ".")
	t.r.interest(owner)
}

func (t tempDestinations) Exists(id dest.Identity) bool {
	if t.remote(id) {
		return true
	}
	t.local(id)
	return t.Destinations.Exists(id)
}

func (t tempDestinations) Ensure(id dest.Identity) (bool, error) {
	if t.remote(id) {
		return false, nil
	}
	t.local(id)
	return t.Destinations.Ensure(id)
}

// CountRefusal passes a per-connection limit refusal on to the wrapped port when it counts
// them (dispatch.Dispatcher).
func (t tempDestinations) CountRefusal() {
	if c, ok := t.Destinations.(interface{ CountRefusal() }); ok {
		c.CountRefusal()
	}
}

// Responders returns the number of responder subscriptions on this node.
func (r *Pattern) Responders() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.responders)
}

// Subscriber is the temp-queue subscribing port of a node (router.Subscriber; the node's
// queues pattern holds temp-queues).
type Subscriber interface {
	Subscribe(sub *delivery.Subscription) error
}

// TempSubscriber wraps s so that a SUBSCRIBE to a temp-queue makes its owner's NATS
// interest (a client learns its temp-queue's full name from its session id, so another
// node may send to it from then on).
func (r *Pattern) TempSubscriber(s Subscriber) Subscriber { return tempSubscriber{s, r} }

type tempSubscriber struct {
	Subscriber
	r *Pattern
}

func (t tempSubscriber) Subscribe(sub *delivery.Subscription) error {
	if id := sub.Identity(); id.Pattern == dest.PatternTempQueue {
		owner, _, _ := strings.Cut(id.Channel, ".")
		t.r.interest(owner)
	}
	return t.Subscriber.Subscribe(sub)
}
