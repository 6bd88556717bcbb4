package requests

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/titan-broker/titan/internal/cluster"
	"github.com/titan-broker/titan/internal/cluster/clustertest"
	"github.com/titan-broker/titan/internal/delivery"
	"github.com/titan-broker/titan/internal/dest"
	"github.com/titan-broker/titan/internal/frame"
	"github.com/titan-broker/titan/internal/message"
	"github.com/titan-broker/titan/internal/rpc"
)

// recorder stands in for the router's publish ports: it records what the pattern publishes
// (its executed:false answers, temp-queue messages).
type recorder struct {
	mu  sync.Mutex
	got []*message.Message
	ids []dest.Identity
}

func (r *recorder) Publish(id dest.Identity, m *message.Message, _ <-chan struct{}) (bool, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.got = append(r.got, m)
	r.ids = append(r.ids, id)
	return false, nil
}

func (r *recorder) DropOwned(string) {}

// answer returns the recorded message with correlation-id corr, if any.
func (r *recorder) answer(corr string) (*message.Message, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, m := range r.got {
		if v, _ := m.Header(frame.HdrCorrelationID); v == corr {
			return m, true
		}
	}
	return nil, false
}

func (r *recorder) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.got)
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

type rpcNode struct {
	req     *Pattern
	replies *recorder
	temps   *recorder
	reg     *delivery.Registry
}

func newRPCNode(t *testing.T, n *cluster.Node) *rpcNode {
	t.Helper()
	rn := &rpcNode{replies: &recorder{}, temps: &recorder{}, reg: &delivery.Registry{}}
	req, err := New(n, rpc.Options{Replies: rn.replies, TempQueues: rn.temps}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(req.Close)
	rn.req = req
	return rn
}

// responder subscribes a responder of group/channel (commands) on n and returns its writer.
func (rn *rpcNode) responder(t *testing.T, group, channel string) *clustertest.CountingWriter {
	t.Helper()
	w := &clustertest.CountingWriter{}
	c := rn.reg.NewConn(w)
	sub := &delivery.Subscription{ID: "r", Conn: c, Group: group, Dest: dest.Destination{Pattern: dest.PatternCommands, Channel: channel}, Ack: delivery.AckAuto}
	if err := rn.req.Subscribe(sub); err != nil {
		t.Fatal(err)
	}
	return w
}

func command(group, channel string) dest.Identity {
	return dest.Identity{Group: group, Pattern: dest.PatternCommands, Channel: channel}
}

// Requests from one node reach responders on the two others (load-balanced), responses
// are matched on the requester's node, timeouts and missing responders are answered with
// executed:false, and groups do not see each other.
func TestRequestsAcrossNodes(t *testing.T) {
	nodes := clustertest.StartNodes(t)
	a, b, c := newRPCNode(t, nodes[0]), newRPCNode(t, nodes[1]), newRPCNode(t, nodes[2])
	wb, wc := b.responder(t, "default", "jobs"), c.responder(t, "default", "jobs")
	replyTo := dest.Identity{Group: "default", Pattern: dest.PatternQueues, Channel: "replies"}
	send := func(id dest.Identity, corr string, timeout time.Duration) {
		t.Helper()
		m := &message.Message{ID: corr, Group: id.Group, Destination: id.Destination(), Headers: []frame.Header{{Key: frame.HdrCorrelationID, Value: corr}}}
		if err := a.req.Request(id, m, replyTo, corr, timeout, nil); err != nil {
			t.Fatal(err)
		}
	}
	// NATS propagates the responders' interest to node a asynchronously.
	i := 0
	waitFor(t, "responders visible from node a", func() bool {
		i++
		corr := fmt.Sprintf("warm-%d", i)
		before := a.replies.count()
		send(command("default", "jobs"), corr, time.Minute)
		if a.replies.count() > before { // answered "no responder" at once
			return false
		}
		if p, _ := b.req.Respond(replyTo, corr); !p {
			if p, _ = c.req.Respond(replyTo, corr); !p {
				t.Fatalf("%s was delivered but neither responder node matched its response", corr)
			}
		}
		return wb.N.Load() > 0 && wc.N.Load() > 0
	})
	const n = 40
	b0, c0 := wb.N.Load(), wc.N.Load()
	for i := range n {
		send(command("default", "jobs"), fmt.Sprintf("lb-%d", i), time.Minute)
	}
	waitFor(t, "all requests delivered", func() bool { return wb.N.Load()+wc.N.Load()-b0-c0 == n })
	if wb.N.Load() == b0 || wc.N.Load() == c0 {
		t.Errorf("requests per responder node: b %d, c %d: want both to get work", wb.N.Load()-b0, wc.N.Load()-c0)
	}
	// Each response is matched (once) on node a through the node that delivered it.
	for i := range n {
		corr := fmt.Sprintf("lb-%d", i)
		pb, _ := b.req.Respond(replyTo, corr)
		pc, _ := c.req.Respond(replyTo, corr)
		if pb == pc {
			t.Errorf("%s: pending on b %v, on c %v: want exactly one", corr, pb, pc)
		}
	}
	if a.req.Claims.Load() != 0 || b.req.Claims.Load()+c.req.Claims.Load() < n {
		t.Errorf("claims: a %d, b %d, c %d", a.req.Claims.Load(), b.req.Claims.Load(), c.req.Claims.Load())
	}

	// A timeout is answered executed:false on node a; the response after it is late.
	send(command("default", "jobs"), "slow-1", 100*time.Millisecond)
	waitFor(t, "the timeout answer", func() bool { _, ok := a.replies.answer("slow-1"); return ok })
	m, _ := a.replies.answer("slow-1")
	if ex, _ := m.Header(rpc.HdrExecuted); ex != "false" {
		t.Errorf("timeout answer executed:%q", ex)
	}
	if e, _ := m.Header(rpc.HdrError); e != "timeout" {
		t.Errorf("timeout answer error:%q", e)
	}
	_, lb := b.req.Respond(replyTo, "slow-1")
	_, lc := c.req.Respond(replyTo, "slow-1")
	if lb == lc {
		t.Errorf("late response: late on b %v, on c %v: want exactly one", lb, lc)
	}

	// A responder without credit (client acks, prefetch 1, one unacknowledged) takes no
	// further request: answered "no responder", as single-node.
	wOne := &clustertest.CountingWriter{}
	one := &delivery.Subscription{ID: "one", Conn: b.reg.NewConn(wOne), Group: "default", Dest: dest.Destination{Pattern: dest.PatternCommands, Channel: "one"}, Ack: delivery.AckClientIndividual, Prefetch: 1}
	if err := b.req.Subscribe(one); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the credit-bound responder visible from node a", func() bool {
		i++
		corr := fmt.Sprintf("one-%d", i)
		send(command("default", "one"), corr, time.Minute)
		_, answered := a.replies.answer(corr)
		return !answered
	})
	send(command("default", "one"), "one-busy", time.Minute)
	if m, ok := a.replies.answer("one-busy"); !ok {
		t.Errorf("a request to a responder without credit was not answered")
	} else if e, _ := m.Header(rpc.HdrError); e != "no responder" {
		t.Errorf("a request to a responder without credit: error:%q, want no responder", e)
	}
	if wOne.N.Load() != 1 {
		t.Errorf("the credit-bound responder got %d requests, want 1", wOne.N.Load())
	}

	// A responder on the requester's own node: matched there, nothing routed.
	wa := a.responder(t, "default", "here")
	send(command("default", "here"), "here-1", time.Minute)
	if wa.N.Load() != 1 {
		t.Errorf("the responder on the requester's node got %d requests, want 1", wa.N.Load())
	}
	if p, _ := a.req.Respond(replyTo, "here-1"); !p {
		t.Errorf("a response on the requester's node did not complete its request")
	}
	a.req.mu.Lock()
	routed := len(a.req.routed)
	a.req.mu.Unlock()
	if routed != 0 {
		t.Errorf("node a routed %d of its own requests", routed)
	}

	// No responder of the channel, or of the group: answered at once.
	for _, id := range []dest.Identity{command("default", "nobody"), command("market", "jobs")} {
		corr := "none-" + id.Group
		send(id, corr, time.Minute)
		m, ok := a.replies.answer(corr)
		if !ok {
			t.Fatalf("%s: no answer", id)
		}
		if e, _ := m.Header(rpc.HdrError); e != "no responder" {
			t.Errorf("%s: error:%q, want no responder", id, e)
		}
	}
}

// An ack:auto responder on another node takes at most its prefetch-count of requests at
// once, as on a single node (issue 32): the next request is answered "no responder"; a
// response SENT through the responder's node, or a request's timeout, gives a place back.
func TestAutoAckResponderCreditAcrossNodes(t *testing.T) {
	nodes := clustertest.StartNodes(t)
	a, b := newRPCNode(t, nodes[0]), newRPCNode(t, nodes[1])
	w := &clustertest.CountingWriter{}
	sub := &delivery.Subscription{ID: "two", Conn: b.reg.NewConn(w), Group: "default",
		Dest: dest.Destination{Pattern: dest.PatternCommands, Channel: "two"}, Ack: delivery.AckAuto, Prefetch: 2}
	if err := b.req.Subscribe(sub); err != nil {
		t.Fatal(err)
	}
	replyTo := dest.Identity{Group: "default", Pattern: dest.PatternQueues, Channel: "replies"}
	send := func(corr string, timeout time.Duration) {
		t.Helper()
		id := command("default", "two")
		m := &message.Message{ID: corr, Group: id.Group, Destination: id.Destination(), Headers: []frame.Header{{Key: frame.HdrCorrelationID, Value: corr}}}
		if err := a.req.Request(id, m, replyTo, corr, timeout, nil); err != nil {
			t.Fatal(err)
		}
	}
	noResponder := func(corr string) bool {
		m, ok := a.replies.answer(corr)
		if !ok {
			return false
		}
		e, _ := m.Header(rpc.HdrError)
		return e == "no responder"
	}
	i := 0
	waitFor(t, "the responder visible from node a", func() bool { // each try is answered: no place is kept
		i++
		corr := fmt.Sprintf("warm-%d", i)
		send(corr, time.Minute)
		if noResponder(corr) {
			return false
		}
		if p, _ := b.req.Respond(replyTo, corr); !p {
			t.Fatalf("%s delivered but its response matched nothing", corr)
		}
		return true
	})
	base := w.N.Load()
	send("r1", time.Minute)
	send("r2", time.Minute)
	send("r3", time.Minute)
	if got := w.N.Load() - base; got != 2 {
		t.Fatalf("the ack:auto responder with prefetch-count 2 got %d of 3 requests, want 2", got)
	}
	if !noResponder("r3") {
		t.Fatalf("the third request was not answered no responder")
	}
	// A response passing node b gives its place back.
	if p, _ := b.req.Respond(replyTo, "r1"); !p {
		t.Fatalf("the response to r1 matched nothing")
	}
	send("r4", time.Minute)
	if got := w.N.Load() - base; got != 3 {
		t.Fatalf("after one response the responder got %d requests in all, want 3", got)
	}
	// A timeout gives its place back too.
	send("r5", time.Minute) // no place: answered no responder
	if !noResponder("r5") {
		t.Fatalf("r5 was not answered no responder")
	}
	b.req.Respond(replyTo, "r2") // r2's place goes to brief
	send("brief", 100*time.Millisecond)
	if got := w.N.Load() - base; got != 4 {
		t.Fatalf("the responder got %d requests in all, want 4", got)
	}
	waitFor(t, "brief's timeout answer on node a", func() bool { _, ok := a.replies.answer("brief"); return ok })
	waitFor(t, "brief's place given back on node b", func() bool {
		b.req.mu.Lock()
		defer b.req.mu.Unlock()
		return b.req.held[sub] == 1 // r4 only
	})
	send("r6", time.Minute)
	if got := w.N.Load() - base; got != 5 {
		t.Fatalf("after brief's timeout the responder got %d requests in all, want 5", got)
	}
	// Detaching drops its count.
	b.req.Detach(sub, nil)
	b.req.mu.Lock()
	_, kept := b.req.held[sub]
	b.req.mu.Unlock()
	if kept {
		t.Errorf("a detached responder's count is kept")
	}
}

// localDestinations stands in for the dispatcher's destination port.
type localDestinations struct{ made map[dest.Identity]bool }

func (d *localDestinations) Exists(id dest.Identity) bool { return d.made[id] }
func (d *localDestinations) Ensure(id dest.Identity) (bool, error) {
	created := !d.made[id]
	d.made[id] = true
	return created, nil
}

// A temp-queue owned on node a gets its NATS interest on first use, not at CONNECT (issue
// 28: an idle connection costs no NATS subscription); it is then reachable from node b
// while its owner lives, and refused once it left.
func TestTempQueueAcrossNodes(t *testing.T) {
	nodes := clustertest.StartNodes(t)
	a, b := newRPCNode(t, nodes[0]), newRPCNode(t, nodes[1])
	const session = "titan-0123456789abcdef"
	a.req.Own(session, a.reg.NewConn(&clustertest.CountingWriter{}))
	id := dest.Identity{Group: dest.DefaultGroup, Pattern: dest.PatternTempQueue, Channel: session + ".replies.x"}
	if n := a.req.TempInterests.Load(); n != 0 {
		t.Fatalf("%d temp-queue NATS subscriptions for a connection that used none, want 0", n)
	}
	if b.req.TempOwnerAlive(session) {
		t.Fatal("an owner whose temp-queues were never used is visible from another node")
	}
	ad := a.req.TempDestinations(&localDestinations{made: map[dest.Identity]bool{}})
	if _, err := ad.Ensure(id); err != nil { // the temp-queue's first use (a reply-to naming it)
		t.Fatal(err)
	}
	ad.Exists(id) // a second use makes nothing more
	if n := a.req.TempInterests.Load(); n != 1 {
		t.Fatalf("%d temp-queue NATS subscriptions after first use, want 1", n)
	}
	waitFor(t, "the owner visible from node b", func() bool { return b.req.TempOwnerAlive(session) })
	if b.req.TempOwnerAlive("titan-fedcba9876543210") || b.req.TempOwnerAlive("replies") {
		t.Errorf("an unknown session is alive")
	}
	m := &message.Message{ID: "t-1", Group: id.Group, Destination: id.Destination(), Body: []byte("hi")}
	if _, err := b.req.Temp().Publish(id, m, nil); err != nil {
		t.Fatal(err)
	}
	if a.temps.count() != 1 || b.temps.count() != 0 || a.temps.ids[0] != id || string(a.temps.got[0].Body) != "hi" {
		t.Fatalf("temp-queue message: on a %v, on b %d", a.temps.ids, b.temps.count())
	}
	d := b.req.TempDestinations(nil) // never asked: the queue is not this node's
	if !d.Exists(id) {
		t.Errorf("a remote owner's temp-queue is created on the sender's node")
	}
	a.req.Release(session)
	if n := a.req.TempInterests.Load(); n != 0 {
		t.Errorf("%d temp-queue NATS subscriptions after the owner left, want 0", n)
	}
	// Gone: once the owner's departure reached node b, a SEND is dropped and counted (not
	// refused: that would close the sender's connection for a requester that left).
	waitFor(t, "the owner gone", func() bool { return !b.req.TempOwnerAlive(session) })
	dropped, err := b.req.Temp().Publish(id, m, nil)
	if err != nil || !dropped {
		t.Errorf("a SEND to a departed owner's temp-queue: dropped %v, err %v", dropped, err)
	}
	var unknown uint64
	for _, st := range b.req.Stats() {
		unknown += st.Unknown
	}
	if unknown != 1 {
		t.Errorf("responses counted as dropped on node b: %d, want 1", unknown)
	}
	if a.temps.count() != 1 {
		t.Errorf("node a queued %d temp-queue messages, want 1", a.temps.count())
	}
}

func TestRequestKeyRoundTrip(t *testing.T) {
	for _, id := range []dest.Identity{
		{Group: "default", Pattern: dest.PatternTempQueue, Channel: "titan-0123456789abcdef.replies"},
		{Group: "g-1", Pattern: dest.PatternQueues, Channel: "a b.c:d", Bare: true},
	} {
		for _, corr := range []string{"", "c-1", "with\x00nul?"} {
			got, gotCorr, ok := decodeKey(requestKey(id, corr))
			if corr == "with\x00nul?" {
				continue // a correlation-id with NUL is cut at it; never produced by STOMP frames
			}
			if !ok || got != id || gotCorr != corr {
				t.Errorf("round trip of %v %q: %v %q %v", id, corr, got, gotCorr, ok)
			}
		}
	}
	if _, _, ok := decodeKey("garbage"); ok {
		t.Errorf("garbage decoded")
	}
	cases := map[string]string{
		requestSubject(command("g", "a.b")):                                                   "t.g.cmd.a.b",
		requestSubject(dest.Identity{Group: "g", Pattern: dest.PatternQueries, Channel: "x"}): "t.g.qry.x",
		ownerSubject("titan-0123456789abcdef"):                                                "t.*.tmp.titan-0123456789abcdef.>",
		probeSubject("titan-0123456789abcdef"):                                                "t.$probe.tmp.titan-0123456789abcdef.alive",
	}
	for got, want := range cases {
		if got != want {
			t.Errorf("subject %q, want %q", got, want)
		}
	}
	for s, want := range map[string]bool{"titan-0123456789abcdef": true, "titan-native": false, "titan-0123456789ABCDEF": false, "replies": false} {
		if isSessionID(s) != want {
			t.Errorf("isSessionID(%q) = %v", s, !want)
		}
	}
}

// BenchmarkRequestAcrossNodes measures one request from node a delivered to a responder
// on node b, and its response matched back on node a (two NATS round trips).
func BenchmarkRequestAcrossNodes(b *testing.B) {
	nodes := clustertest.StartNodes(b)
	mk := func(n *cluster.Node) *rpcNode {
		rn := &rpcNode{replies: &recorder{}, temps: &recorder{}, reg: &delivery.Registry{}}
		req, err := New(n, rpc.Options{Replies: rn.replies, TempQueues: rn.temps}, nil)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(req.Close)
		rn.req = req
		return rn
	}
	ra, rb := mk(nodes[0]), mk(nodes[1])
	w := &clustertest.CountingWriter{}
	sub := &delivery.Subscription{ID: "r", Conn: rb.reg.NewConn(w), Group: "default", Dest: dest.Destination{Pattern: dest.PatternCommands, Channel: "jobs"}, Ack: delivery.AckAuto}
	if err := rb.req.Subscribe(sub); err != nil {
		b.Fatal(err)
	}
	id := command("default", "jobs")
	replyTo := dest.Identity{Group: "default", Pattern: dest.PatternQueues, Channel: "replies"}
	deadline := time.Now().Add(15 * time.Second)
	for w.N.Load() == 0 {
		if time.Now().After(deadline) {
			b.Fatal("responder not visible")
		}
		m := &message.Message{ID: "warm", Group: "default", Destination: "/command/jobs"}
		_ = ra.req.Request(id, m, replyTo, fmt.Sprint("warm-", time.Now().UnixNano()), time.Minute, nil)
		time.Sleep(10 * time.Millisecond)
	}
	body := make([]byte, 128)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		i++
		corr := "c-" + fmt.Sprint(i)
		m := &message.Message{ID: corr, Group: "default", Destination: "/command/jobs", Body: body}
		if err := ra.req.Request(id, m, replyTo, corr, time.Minute, nil); err != nil {
			b.Fatal(err)
		}
		if p, _ := rb.req.Respond(replyTo, corr); !p {
			b.Fatalf("%s not pending", corr)
		}
	}
}
