package router

import (
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/titan-broker/titan/internal/delivery"
	"github.com/titan-broker/titan/internal/dest"
	"github.com/titan-broker/titan/internal/frame"
	"github.com/titan-broker/titan/internal/message"
)

// fakeClient records what the router writes.
type fakeClient struct {
	mu           sync.Mutex
	v            frame.Version
	frames       []*frame.Frame
	errs         []*frame.ProtocolError
	disconnected bool
}

func (c *fakeClient) Version() frame.Version                   { return c.v }
func (c *fakeClient) WriteMessage(p *frame.Buf, _ []byte) bool { frame.PutBuf(p); return true }
func (c *fakeClient) QueuedBytes() int64                       { return 0 }
func (c *fakeClient) WriteEvent(p *frame.Buf, _ []byte, _ bool) (bool, <-chan struct{}) {
	frame.PutBuf(p)
	return true, nil
}
func (c *fakeClient) ID() string { return "test" }
func (c *fakeClient) WriteFrame(f *frame.Frame) bool {
	c.mu.Lock()
	c.frames = append(c.frames, f.Clone())
	c.mu.Unlock()
	return true
}
func (c *fakeClient) Fail(pe *frame.ProtocolError) {
	c.mu.Lock()
	c.errs = append(c.errs, pe)
	c.mu.Unlock()
}
func (c *fakeClient) Disconnect()           { c.disconnected = true }
func (c *fakeClient) Done() <-chan struct{} { return nil }
func (c *fakeClient) answers() int          { return len(c.frames) + len(c.errs) }

// fakeEngine records publications; it stands in for every port.
type fakeEngine struct {
	published []dest.Identity
	msgs      []*message.Message
	failNext  error
	acks      []string
}

func (e *fakeEngine) Publish(id dest.Identity, m *message.Message, _ <-chan struct{}) (bool, error) {
	if e.failNext != nil {
		err := e.failNext
		e.failNext = nil
		return false, err
	}
	e.published = append(e.published, id)
	e.msgs = append(e.msgs, m)
	return false, nil
}
func (e *fakeEngine) Subscribe(sub *delivery.Subscription) error    { return nil }
func (e *fakeEngine) Unsubscribe(c *delivery.Conn, id string) error { return nil }
func (e *fakeEngine) Ack(c *delivery.Conn, key, sub string, nack bool) error {
	if key == "bad" {
		return delivery.ErrUnknownAck
	}
	e.acks = append(e.acks, key)
	return nil
}
func (e *fakeEngine) CloseConn(c *delivery.Conn)               {}
func (e *fakeEngine) NewConn(w delivery.Writer) *delivery.Conn { return delivery.NewConn(w, nil) }
func (e *fakeEngine) Request(id dest.Identity, m *message.Message, replyTo dest.Identity, corr string, timeout time.Duration, _ *delivery.Conn) error {
	return nil
}
func (e *fakeEngine) Respond(replyTo dest.Identity, corr string) (bool, bool) {
	return false, false
}
func (e *fakeEngine) CountDroppedResponse(replyTo dest.Identity, late bool) {}
func (e *fakeEngine) Own(session string, c *delivery.Conn)                  {}
func (e *fakeEngine) TempOwnerAlive(session string) bool                    { return false }
func (e *fakeEngine) Release(session string)                                {}

func newTest(o Options) (*Router, *fakeEngine, *Conn, *fakeClient) {
	e := &fakeEngine{}
	r := New(Ports{Deliveries: e, Events: e, Queues: e, EventsStore: e, Requests: e, TempQueues: e}, o)
	cl := &fakeClient{v: frame.V12}
	return r, e, r.Open(cl), cl
}

func fr(cmd frame.Command, body string, hdrs ...string) *frame.Frame {
	f := &frame.Frame{Command: cmd, Body: []byte(body)}
	for i := 0; i+1 < len(hdrs); i += 2 {
		f.Add(hdrs[i], hdrs[i+1])
	}
	return f
}

func TestResolvePicksRouteByCommandAndPattern(t *testing.T) {
	r, _, c, _ := newTest(Options{})
	cases := []struct {
		f    *frame.Frame
		want Route
	}{
		{fr(frame.CmdSend, "", "destination", "/topic/a"), RouteSendEvents},
		{fr(frame.CmdSend, "", "destination", "/events/a"), RouteSendEvents},
		{fr(frame.CmdSend, "", "destination", "/queue/a"), RouteSendQueue},
		{fr(frame.CmdSend, "", "destination", "/orders/created"), RouteSendEvents}, // bare, default events
		{fr(frame.CmdSend, "", "destination", "/queue//a"), RouteReject},
		{fr(frame.CmdSend, "", "destination", "/topic/a/*"), RouteReject},
		{fr(frame.CmdSend, ""), RouteReject},
		{fr(frame.CmdSubscribe, "", "destination", "/topic/a/*", "id", "1"), RouteSubscribe},
		{fr(frame.CmdSubscribe, "", "destination", "/queue/a/*", "id", "1"), RouteReject},
		{fr(frame.CmdAck, "", "id", "1"), RouteAck},
		{fr(frame.CmdNack, "", "id", "1"), RouteNack},
		{fr(frame.CmdBegin, "", "transaction", "t"), RouteBegin},
		{fr(frame.CmdDisconnect, ""), RouteDisconnect},
	}
	for _, tc := range cases {
		ctx := &Context{Conn: c, Frame: tc.f}
		if got := r.Resolve(ctx); got != tc.want {
			t.Errorf("%s: route %s, want %s", tc.f, got, tc.want)
		}
		if tc.want == RouteReject && ctx.Err == nil {
			t.Errorf("%s: reject without error", tc.f)
		}
	}
}

func TestBareDestinationFollowsDefaultPattern(t *testing.T) {
	r, _, c, _ := newTest(Options{DefaultPattern: dest.PatternQueues})
	ctx := &Context{Conn: c, Frame: fr(frame.CmdSend, "", "destination", "/orders/created")}
	if got := r.Resolve(ctx); got != RouteSendQueue {
		t.Fatalf("route %s, want send-queue", got)
	}
}

func TestDestinationErrorsAreSanitized(t *testing.T) {
	r, _, c, cl := newTest(Options{})
	r.Handle(c, fr(frame.CmdSend, "x", "destination", "/queue//secret-internal", "receipt", "r1"))
	// The body states the grammar's rule and never echoes the destination (DESIGN §2).
	if len(cl.errs) != 1 || cl.errs[0].Reason != "invalid destination" || cl.errs[0].Detail != destinationRule ||
		strings.Contains(cl.errs[0].Detail, "secret-internal") {
		t.Fatalf("errors %+v", cl.errs)
	}
	if cl.errs[0].ReceiptID != "r1" || !cl.errs[0].Fatal {
		t.Fatalf("error must echo receipt-id and be fatal: %+v", cl.errs[0])
	}
}

func TestFinalAnswersExactlyOnce(t *testing.T) {
	r, e, c, cl := newTest(Options{})
	r.Handle(c, fr(frame.CmdSend, "b", "destination", "/topic/a", "receipt", "1"))
	if cl.answers() != 1 || cl.frames[0].Command != frame.CmdReceipt || cl.frames[0].Value("receipt-id") != "1" {
		t.Fatalf("want one RECEIPT, got %v %v", cl.frames, cl.errs)
	}
	r.Handle(c, fr(frame.CmdSend, "b", "destination", "/topic/a"))
	if cl.answers() != 1 {
		t.Fatalf("no receipt asked: no answer expected, got %d", cl.answers())
	}
	e.failNext = ErrQueueFull
	r.Handle(c, fr(frame.CmdSend, "b", "destination", "/queue/a", "receipt", "2"))
	if cl.answers() != 2 || len(cl.errs) != 1 || cl.errs[0].Reason != "queue full" || cl.errs[0].ReceiptID != "2" {
		t.Fatalf("want one ERROR with receipt-id, got %v %v", cl.frames, cl.errs)
	}
}

type panicStage struct{}

func (panicStage) Apply(*Context) { panic("boom") }

func TestStagePanicBecomesError(t *testing.T) {
	r, e, c, cl := newTest(Options{SendStages: []Stage{panicStage{}}})
	r.Handle(c, fr(frame.CmdSend, "b", "destination", "/topic/a", "receipt", "9"))
	if len(cl.errs) != 1 || cl.errs[0].Reason != "internal error" || cl.errs[0].ReceiptID != "9" {
		t.Fatalf("errs %+v", cl.errs)
	}
	if len(e.published) != 0 {
		t.Fatal("publish ran after a failed stage")
	}
}

type recordStage struct{ seen *[]string }

func (s recordStage) Apply(c *Context) { *s.seen = append(*s.seen, c.Message.Destination) }

func TestCustomStageRunsBetweenRouteAndPublish(t *testing.T) {
	var seen []string
	r, e, c, _ := newTest(Options{SendStages: []Stage{recordStage{&seen}}})
	r.Handle(c, fr(frame.CmdSend, "b", "destination", "/topic/a/b"))
	if len(seen) != 1 || seen[0] != "/topic/a/b" || len(e.published) != 1 {
		t.Fatalf("seen %v published %v", seen, e.published)
	}
}

func TestGroupValidation(t *testing.T) {
	r, e, c, cl := newTest(Options{})
	r.Handle(c, fr(frame.CmdSend, "b", "destination", "/topic/a", "group", "market"))
	if len(e.published) != 1 || e.published[0].Group != "market" {
		t.Fatalf("published %v", e.published)
	}
	r.Handle(c, fr(frame.CmdSend, "b", "destination", "/topic/a", "group", ""))
	if e.published[1].Group != "default" {
		t.Fatalf("empty group must be default, got %q", e.published[1].Group)
	}
	r.Handle(c, fr(frame.CmdSend, "b", "destination", "/topic/a", "group", "bad group!"))
	if len(cl.errs) != 1 || cl.errs[0].Reason != "invalid group" || !cl.errs[0].Fatal {
		t.Fatalf("errs %+v", cl.errs)
	}
}

func TestTransactionBuffersUntilCommit(t *testing.T) {
	r, e, c, cl := newTest(Options{})
	r.Handle(c, fr(frame.CmdBegin, "", "transaction", "t1"))
	r.Handle(c, fr(frame.CmdSend, "one", "destination", "/queue/a", "transaction", "t1"))
	r.Handle(c, fr(frame.CmdAck, "", "id", "7", "transaction", "t1"))
	if len(e.published) != 0 || len(e.acks) != 0 {
		t.Fatal("transactional frames took effect before COMMIT")
	}
	r.Handle(c, fr(frame.CmdCommit, "", "transaction", "t1", "receipt", "c"))
	if len(e.published) != 1 || string(e.msgs[0].Body) != "one" || len(e.acks) != 1 {
		t.Fatalf("after commit: published %v acks %v", e.published, e.acks)
	}
	if cl.frames[len(cl.frames)-1].Value("receipt-id") != "c" {
		t.Fatal("COMMIT receipt missing")
	}
	r.Handle(c, fr(frame.CmdBegin, "", "transaction", "t2"))
	r.Handle(c, fr(frame.CmdSend, "two", "destination", "/queue/a", "transaction", "t2"))
	r.Handle(c, fr(frame.CmdAbort, "", "transaction", "t2"))
	r.Handle(c, fr(frame.CmdCommit, "", "transaction", "t2"))
	if len(e.published) != 1 {
		t.Fatal("aborted SEND was published")
	}
	if len(cl.errs) != 1 || cl.errs[0].Reason != "unknown transaction" {
		t.Fatalf("COMMIT after ABORT: %+v", cl.errs)
	}
}

func TestRequiredHeaders(t *testing.T) {
	cases := []struct {
		f      *frame.Frame
		reason string
	}{
		{fr(frame.CmdSend, ""), "missing destination header"},
		{fr(frame.CmdSubscribe, "", "destination", "/topic/a"), "missing id header"},
		{fr(frame.CmdUnsubscribe, ""), "missing id header"},
		{fr(frame.CmdAck, ""), "missing id header"},
		{fr(frame.CmdNack, ""), "missing id header"},
		{fr(frame.CmdBegin, ""), "missing transaction header"},
		{fr(frame.CmdCommit, ""), "missing transaction header"},
		{fr(frame.CmdAbort, ""), "missing transaction header"},
		{fr(frame.CmdAck, "", "id", "bad"), "unknown ack id"},
		{fr(frame.CmdSend, "", "destination", "/topic/a", "transaction", "nope"), "unknown transaction"},
		{fr(frame.CmdSubscribe, "", "destination", "/topic/a", "id", "1", "ack", "sometimes"), "invalid ack mode"},
		{fr(frame.CmdSubscribe, "", "destination", "/topic/a", "id", "1", "prefetch-count", "-1"), "invalid prefetch-count"},
		{fr(frame.CmdSend, "", "destination", "/topic/a", "expires", "soon"), "invalid expires header"},
		{fr(frame.CmdSend, "", "destination", "/queue/a", "delay", "9223372036854775807"), "invalid delay header"},
	}
	for _, tc := range cases {
		r, _, c, cl := newTest(Options{})
		r.Handle(c, tc.f)
		if len(cl.errs) != 1 || cl.errs[0].Reason != tc.reason || !cl.errs[0].Fatal {
			t.Errorf("%s: errs %+v, want %q", tc.f, cl.errs, tc.reason)
		}
	}
}

func TestIngressHeaderMapping(t *testing.T) {
	r, e, c, _ := newTest(Options{})
	r.Handle(c, fr(frame.CmdSend, "b",
		"destination", "/topic/a", "content-type", "text/plain", "x-trace", "1", "x-trace", "2",
		"stomp.content-type", "spoof", "x-titan-metadata", "spoof", "message-id", "spoof",
		"subscription", "spoof", "redelivered", "true", "correlation-id", "c1", "receipt", "r",
		"dlq-original-destination", "/queue/payroll", "dlq-reason", "spoof", "delivery-count", "9", "sequence", "7"))
	m := e.msgs[0]
	got := map[string]string{}
	for _, h := range m.Headers {
		if _, dup := got[h.Key]; dup {
			t.Fatalf("duplicate header %s", h.Key)
		}
		got[h.Key] = h.Value
	}
	want := map[string]string{"content-type": "text/plain", "x-trace": "1", "correlation-id": "c1"}
	if len(got) != len(want) {
		t.Fatalf("headers %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Fatalf("header %s=%q, want %q (all %v)", k, got[k], v, got)
		}
	}
}

func BenchmarkMapIngress(b *testing.B) {
	in := []frame.Header{{Key: "destination", Value: "/queue/a"}, {Key: "content-type", Value: "application/json"},
		{Key: "receipt", Value: "1"}, {Key: "x-trace", Value: "abc"}, {Key: "correlation-id", Value: "c"}, {Key: "stomp.x", Value: "y"}}
	var buf [16]frame.Header
	b.ReportAllocs()
	for b.Loop() {
		_ = MapIngress(buf[:0], in)
	}
}

func TestTransactionByteLimit(t *testing.T) {
	r, e, c, cl := newTest(Options{MaxTransactionBytes: 100})
	r.Handle(c, fr(frame.CmdBegin, "", "transaction", "t"))
	r.Handle(c, fr(frame.CmdSend, strings.Repeat("x", 60), "destination", "/queue/a", "transaction", "t"))
	r.Handle(c, fr(frame.CmdSend, strings.Repeat("x", 60), "destination", "/queue/a", "transaction", "t", "receipt", "r"))
	if len(cl.errs) != 1 || cl.errs[0].Reason != "transaction too large" || cl.errs[0].ReceiptID != "r" || len(e.published) != 0 {
		t.Fatalf("errs %+v published %d", cl.errs, len(e.published))
	}
}

// blockingTask finishes once release is closed.
type blockingTask struct{ release chan struct{} }

func (t blockingTask) finish() { <-t.release }

// Late SENDs (published after their commit: events-store) are bounded together across
// connections: one connection may have the whole pipelineLateBudget in flight, two share it,
// and a late SEND that finds it used up waits (on any connection) until the late SENDs in
// flight are down to pipelineLateResume, while SENDs published before their commit (queues)
// still go in.
func TestPipelineLateBudgetIsSharedByConnections(t *testing.T) {
	budget := newLateBudget()
	a, b := newPipeline(nil, budget), newPipeline(nil, budget)
	done := make(chan struct{})
	relA := make([]chan struct{}, pipelineLateBudget/2)
	relB := make([]chan struct{}, pipelineLateBudget/2)
	for i := range relA {
		relA[i], relB[i] = make(chan struct{}), make(chan struct{})
		a.push(signalTask{relA[i], done}, true)
		b.push(signalTask{relB[i], done}, true)
	}
	b.push(countingTask{new(atomic.Int64)}, false) // an early SEND is not held by the budget
	pushed, full := make(chan struct{}), make(chan struct{})
	budget.onFull = func() { close(full) }
	go func() {
		a.push(countingTask{new(atomic.Int64)}, true)
		close(pushed)
	}()
	<-full // the late SEND found the budget used up
	for i, rel := range relB {
		close(rel)
		<-done
		select {
		case <-pushed:
			if inFlight := pipelineLateBudget - i - 1; inFlight > pipelineLateResume {
				t.Fatalf("the late SEND went in with %d late SENDs in flight, above the resume mark %d", inFlight, pipelineLateResume)
			}
		default:
		}
	}
	<-pushed
	for _, rel := range relA {
		close(rel)
		<-done
	}
	a.close()
	b.close()
	if n := budget.n.Load(); n != 0 {
		t.Fatalf("%d late SENDs counted in flight after every one finished", n)
	}
	// One connection alone may fill the whole budget.
	c := newPipeline(nil, budget)
	budget.onFull = func() { t.Error("a late SEND waited below the budget") }
	release := make(chan struct{})
	for range pipelineLateBudget {
		c.push(blockingTask{release}, true)
	}
	close(release)
	c.close()
}

// signalTask finishes once release is closed, then reports it on done.
type signalTask struct {
	release chan struct{}
	done    chan<- struct{}
}

func (t signalTask) finish() { <-t.release; t.done <- struct{}{} }

// A push that found the pipeline full goes in only once the pipeline drained to its resume
// mark, not as soon as one SEND finished (which would wake the read goroutine once per
// SEND).
func TestPipelineFullPushResumesAtHalfDepth(t *testing.T) {
	p := newPipeline(nil, newLateBudget())
	done := make(chan struct{})
	rels := make([]chan struct{}, pipelineDepth)
	for i := range rels {
		rels[i] = make(chan struct{})
		p.push(signalTask{rels[i], done}, false)
	}
	pushed, full := make(chan struct{}), make(chan struct{})
	p.onFull = func() { close(full) }
	go func() {
		p.push(countingTask{new(atomic.Int64)}, false)
		close(pushed)
	}()
	<-full // the push found the pipeline full
	for i := range rels {
		close(rels[i])
		<-done
		select {
		case <-pushed:
			if inFlight := pipelineDepth - i - 1; inFlight > pipelineResume {
				t.Fatalf("the push went in with %d in flight, above the resume mark %d", inFlight, pipelineResume)
			}
		default:
		}
	}
	<-pushed
	p.close()
}

// countingTask counts its finish.
type countingTask struct{ done *atomic.Int64 }

func (t countingTask) finish() { t.done.Add(1) }

// drain returns only once every pushed SEND finished, and never misses the last one's
// wake-up, however pushes (early and late) and drains interleave with the worker.
func TestPipelineDrainWaitsForEveryPushed(t *testing.T) {
	p := newPipeline(nil, newLateBudget())
	defer p.close()
	var done atomic.Int64
	pushed := int64(0)
	for i := range 20000 {
		p.push(countingTask{&done}, i%7 == 0)
		pushed++
		if i%13 == 0 {
			p.drain()
			if got := done.Load(); got != pushed {
				t.Fatalf("drain returned with %d of %d SENDs finished", got, pushed)
			}
			if p.pending() {
				t.Fatal("pending after drain")
			}
		}
	}
	p.drain()
	if got := done.Load(); got != pushed {
		t.Fatalf("drain returned with %d of %d SENDs finished", got, pushed)
	}
}
