package rpc

import (
	"bytes"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/titan-broker/titan/internal/clock"
	"github.com/titan-broker/titan/internal/delivery"
	"github.com/titan-broker/titan/internal/dest"
	"github.com/titan-broker/titan/internal/frame"
	"github.com/titan-broker/titan/internal/message"
	"github.com/titan-broker/titan/internal/router/refusal"
)

// recWriter is a responder's delivery.Writer: it records the bodies of the MESSAGEs
// written to it, or refuses them while full.
type recWriter struct {
	mu     sync.Mutex
	full   bool
	bodies []string
}

func (w *recWriter) Version() frame.Version { return frame.V12 }
func (w *recWriter) QueuedBytes() int64     { return 0 }
func (w *recWriter) WriteMessage(p *frame.Buf, shared []byte) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.full {
		return false
	}
	frame.PutBuf(p)
	_, body, _ := bytes.Cut(shared, []byte("\n\n"))
	w.bodies = append(w.bodies, string(bytes.TrimRight(body, "\x00\n")))
	return true
}
func (w *recWriter) WriteEvent(p *frame.Buf, s []byte, _ bool) (bool, <-chan struct{}) {
	return w.WriteMessage(p, s), nil
}
func (w *recWriter) got() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.bodies...)
}

// answers records the broker's executed:false answers: "<corr>:<error>".
type answers struct {
	mu  sync.Mutex
	got []string
}

func (a *answers) Publish(_ dest.Identity, m *message.Message, _ <-chan struct{}) (bool, error) {
	corr, _ := m.Header(frame.HdrCorrelationID)
	reason, _ := m.Header(HdrError)
	a.mu.Lock()
	a.got = append(a.got, corr+":"+reason)
	a.mu.Unlock()
	return false, nil
}
func (a *answers) DropOwned(string) {}
func (a *answers) list() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return strings.Join(a.got, " ")
}

var (
	cmd     = dest.Identity{Group: "default", Pattern: dest.PatternCommands, Channel: "work"}
	replyTo = dest.Identity{Group: "default", Pattern: dest.PatternQueues, Channel: "replies"}
)

func newPattern(o Options) (*Pattern, *answers) {
	a := &answers{}
	o.Replies, o.TempQueues = a, a
	return New(o), a
}

func responder(t *testing.T, p *Pattern, id string, ack delivery.AckMode, prefetch int) (*recWriter, *delivery.Subscription) {
	t.Helper()
	w := &recWriter{}
	sub := &delivery.Subscription{ID: id, Conn: delivery.NewConn(w, nil), Group: "default",
		Dest: dest.Destination{Pattern: dest.PatternCommands, Channel: "work"}, Ack: ack, Prefetch: prefetch}
	if err := p.Subscribe(sub); err != nil {
		t.Fatal(err)
	}
	return w, sub
}

func req(body string) *message.Message {
	return &message.Message{ID: body, Group: "default", Destination: "/command/work", Body: []byte(body)}
}

// TestRoundRobinSkipsRespondersWithoutCredit checks responder choice: requests go
// round-robin among the responders, skipping one at its prefetch (client ack) or whose
// writer refused (stalled), and with none able to take it the broker answers
// "no responder" at once.
func TestRoundRobinSkipsRespondersWithoutCredit(t *testing.T) {
	p, ans := newPattern(Options{})
	defer p.Close()
	a, _ := responder(t, p, "a", delivery.AckAuto, 0)
	b, _ := responder(t, p, "b", delivery.AckAuto, 0)
	c, csub := responder(t, p, "c", delivery.AckClientIndividual, 1)
	for i := range 6 {
		if err := p.Request(cmd, req("r"+strconv.Itoa(i)), replyTo, "k"+strconv.Itoa(i), time.Minute, nil); err != nil {
			t.Fatal(err)
		}
	}
	// c took r2 and is then at its prefetch: a and b share the rest in turn.
	if g := strings.Join(a.got(), " ") + "|" + strings.Join(b.got(), " ") + "|" + strings.Join(c.got(), " "); g != "r0 r3 r5|r1 r4|r2" {
		t.Fatalf("a|b|c got %s, want r0 r3 r5|r1 r4|r2", g)
	}
	// c acknowledges: it has credit again and is next in turn after a and b.
	key, _ := csub.OldestPending()
	if err := csub.Conn.Ack(key, "c", false); err != nil {
		t.Fatal(err)
	}
	a.full, b.full = true, true
	for _, k := range []string{"x", "y"} {
		if err := p.Request(cmd, req(k), replyTo, k, time.Minute, nil); err != nil {
			t.Fatal(err)
		}
	}
	// x: a and b refuse (stalled), c takes it; y: nobody has credit.
	if g := strings.Join(c.got(), " "); g != "r2 x" {
		t.Fatalf("c got %q, want r2 x", g)
	}
	if g := ans.list(); g != "y:no responder" {
		t.Fatalf("answers %q, want y:no responder", g)
	}
	if p.Pending() != 7 {
		t.Fatalf("%d pending, want 7 (every request a responder took)", p.Pending())
	}
}

// TestTimeoutAndLateResponse checks a request's life under the clock port: unanswered, it
// times out exactly at its timeout with the broker's "timeout" answer; a response after that
// is late (dropped, counted); a response before it completes it, stops its timer and is
// observed in the histogram; an unknown response is neither.
func TestTimeoutAndLateResponse(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p, ans := newPattern(Options{Clock: clock.Real})
		defer p.Close()
		responder(t, p, "a", delivery.AckAuto, 0)
		if err := p.Request(cmd, req("slow"), replyTo, "slow", 5*time.Second, nil); err != nil {
			t.Fatal(err)
		}
		if err := p.Request(cmd, req("fast"), replyTo, "fast", 5*time.Second, nil); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Second)
		if pending, late := p.Respond(replyTo, "fast"); !pending || late {
			t.Fatalf("response in time: pending %v late %v", pending, late)
		}
		time.Sleep(4*time.Second - time.Nanosecond)
		synctest.Wait()
		if ans.list() != "" {
			t.Fatalf("answered before the timeout: %q", ans.list())
		}
		time.Sleep(time.Nanosecond)
		synctest.Wait()
		if g := ans.list(); g != "slow:timeout" {
			t.Fatalf("answers %q, want slow:timeout", g)
		}
		if pending, late := p.Respond(replyTo, "slow"); pending || !late {
			t.Fatalf("response after the timeout: pending %v late %v, want late", pending, late)
		}
		if pending, late := p.Respond(replyTo, "nobody"); pending || late {
			t.Fatalf("unknown response: pending %v late %v", pending, late)
		}
		time.Sleep(time.Minute) // the answered request's timer was stopped
		synctest.Wait()
		st := p.Stats()
		if len(st) != 1 || st[0].Requests != 2 || st[0].Responses != 1 || st[0].Timeouts != 1 || st[0].Count != 1 || st[0].Sum != 1 {
			t.Fatalf("stats %+v", st)
		}
		if ans.list() != "slow:timeout" || p.Pending() != 0 {
			t.Fatalf("answers %q, pending %d", ans.list(), p.Pending())
		}
	})
}

// TestDuplicateCorrelationID checks that a correlation-id already pending on the same
// reply-to is refused, and accepted again once its request completed.
func TestDuplicateCorrelationID(t *testing.T) {
	p, _ := newPattern(Options{})
	defer p.Close()
	responder(t, p, "a", delivery.AckAuto, 0)
	if err := p.Request(cmd, req("1"), replyTo, "k", time.Minute, nil); err != nil {
		t.Fatal(err)
	}
	if err := p.Request(cmd, req("2"), replyTo, "k", time.Minute, nil); !errors.Is(err, ErrDuplicateRequest) {
		t.Fatalf("duplicate: %v", err)
	}
	other := dest.Identity{Group: "default", Pattern: dest.PatternQueues, Channel: "other"}
	if err := p.Request(cmd, req("3"), other, "k", time.Minute, nil); err != nil {
		t.Fatalf("same correlation-id, another reply-to: %v", err)
	}
	p.Respond(replyTo, "k")
	if err := p.Request(cmd, req("4"), replyTo, "k", time.Minute, nil); err != nil {
		t.Fatalf("after the response: %v", err)
	}
}

// TestPendingBounds checks the bounds on pending requests: per connection and for the
// pattern, a request over one is refused with a *PendingLimitError naming its key (its
// Refusal gives the ERROR), and every way a request ends — response, timeout, no
// responder, Close — gives its place back.
func TestPendingBounds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p, _ := newPattern(Options{MaxPending: 5, MaxPendingByClient: 2})
		responder(t, p, "a", delivery.AckAuto, 0)
		c1 := delivery.NewConn(&recWriter{}, nil)
		c2 := delivery.NewConn(&recWriter{}, nil)
		send := func(c *delivery.Conn, corr string) error {
			return p.Request(cmd, req(corr), replyTo, corr, time.Second, c)
		}
		for _, k := range []string{"a1", "a2"} {
			if err := send(c1, k); err != nil {
				t.Fatal(err)
			}
		}
		err := send(c1, "a3")
		var le *PendingLimitError
		if !errors.As(err, &le) || !errors.Is(err, ErrTooManyPending) || le.Key != KeyMaxPendingByClient {
			t.Fatalf("third request of one connection: %v, want the per-connection bound", err)
		}
		if msg, detail := le.Refusal(); msg != "too many pending requests" || !strings.Contains(detail, KeyMaxPendingByClient) {
			t.Fatalf("refusal %q / %q", msg, detail)
		}
		for _, k := range []string{"b1", "b2"} {
			if err := send(c2, k); err != nil {
				t.Fatal(err)
			}
		}
		if err := send(nil, "n1"); err != nil {
			t.Fatal(err)
		}
		if err := send(nil, "n2"); !errors.As(err, &le) || le.Key != KeyMaxPending {
			t.Fatalf("sixth pending request: %v, want the broker bound", err)
		}
		if c1.PendingRequests.Load() != 2 || p.Pending() != 5 {
			t.Fatalf("c1 %d, pattern %d pending", c1.PendingRequests.Load(), p.Pending())
		}
		p.Respond(replyTo, "a1") // a response frees c1's place
		if err := send(c1, "a4"); err != nil {
			t.Fatalf("after a response: %v", err)
		}
		time.Sleep(time.Second) // every request times out
		synctest.Wait()
		if c1.PendingRequests.Load() != 0 || c2.PendingRequests.Load() != 0 || p.Pending() != 0 {
			t.Fatalf("after the timeouts: c1 %d, c2 %d, pattern %d pending", c1.PendingRequests.Load(), c2.PendingRequests.Load(), p.Pending())
		}
		// No responder: the request is answered at once and holds no place.
		p2, _ := newPattern(Options{MaxPendingByClient: 1})
		for _, k := range []string{"x", "y"} {
			if err := p2.Request(cmd, req(k), replyTo, k, time.Minute, c1); err != nil {
				t.Fatalf("no responder: %v", err)
			}
		}
		// Close gives back the places of the requests it ends.
		if err := send(c1, "z"); err != nil {
			t.Fatal(err)
		}
		p.Close()
		p2.Close()
		if c1.PendingRequests.Load() != 0 || p.Pending() != 0 {
			t.Fatalf("after Close: c1 %d, pattern %d", c1.PendingRequests.Load(), p.Pending())
		}
		if err := send(c1, "after"); !errors.Is(err, refusal.ErrCanceled) {
			t.Fatalf("after Close: %v", err)
		}
	})
}

// TestResponderLeavesChannel checks that a channel whose last responder left takes a new
// responder, and its requests no longer reach the one that left.
func TestResponderLeavesChannel(t *testing.T) {
	p, ans := newPattern(Options{})
	defer p.Close()
	w, sub := responder(t, p, "a", delivery.AckAuto, 0)
	sub.Conn.Detach(sub)
	if err := p.Request(cmd, req("1"), replyTo, "1", time.Minute, nil); err != nil {
		t.Fatal(err)
	}
	w2, _ := responder(t, p, "b", delivery.AckAuto, 0)
	if err := p.Request(cmd, req("2"), replyTo, "2", time.Minute, nil); err != nil {
		t.Fatal(err)
	}
	if len(w.got()) != 0 || strings.Join(w2.got(), " ") != "2" || ans.list() != "1:no responder" {
		t.Fatalf("left %v, new %v, answers %q", w.got(), w2.got(), ans.list())
	}
}

// TestTempOwners checks the temp-queue owner registry: a SEND to the temp-queue of a
// connection that released it is refused with refusal.ErrNoQueue.
func TestTempOwners(t *testing.T) {
	p, _ := newPattern(Options{})
	defer p.Close()
	p.Own("s1", delivery.NewConn(&recWriter{}, nil))
	tq := dest.Identity{Group: "default", Pattern: dest.PatternTempQueue, Channel: "s1.r"}
	if _, err := p.Temp().Publish(tq, req("x"), nil); err != nil || !p.TempOwnerAlive("s1") {
		t.Fatalf("live owner: %v", err)
	}
	p.Release("s1")
	if _, err := p.Temp().Publish(tq, req("x"), nil); !errors.Is(err, refusal.ErrNoQueue) {
		t.Fatalf("released owner: %v, want refusal.ErrNoQueue", err)
	}
}

// TestResponseTimeHistogram checks the response-time histogram's buckets: cumulative, each
// response counted in every bucket whose bound is at or above its time (a time on a bound
// is in that bucket), one over the last bound in Count only.
func TestResponseTimeHistogram(t *testing.T) {
	var c rpcCounters
	for _, d := range []time.Duration{time.Millisecond, 3 * time.Millisecond, 11 * time.Second} {
		c.observe(d)
	}
	p := &Pattern{rpc: newRPCState()}
	p.rpc.counters.m.Store(cmd, &c)
	st := p.Stats()
	want := []uint64{1, 1, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2}
	if len(st) != 1 || fmt.Sprint(st[0].Buckets) != fmt.Sprint(want) || st[0].Count != 3 {
		t.Fatalf("stats %+v, want buckets %v and count 3", st, want)
	}
	if s := st[0].Sum; s < 11.003 || s > 11.0041 {
		t.Fatalf("sum %v, want 11.004", s)
	}
}

// inFlight returns the requests responder sub of cmd holds a place of its credit for.
func inFlight(t *testing.T, p *Pattern, sub *delivery.Subscription) int64 {
	t.Helper()
	ch := p.rpc.lookup(cmd)
	ch.mu.Lock()
	defer ch.mu.Unlock()
	for _, m := range ch.subs {
		if m.sub == sub {
			return m.inFlight.Load()
		}
	}
	t.Fatalf("responder %s is not subscribed", sub.ID)
	return 0
}

// TestAutoAckResponderCredit checks that an ack:auto responder's credit is bounded by its
// prefetch (issue 32): it is given at most prefetch requests awaiting their response, the
// others go to responders with room (a slow one is not flooded) or, with none, are
// answered "no responder"; a place comes back when its request ends — by a response, by
// its timeout (a late response then gives back nothing twice), by a writer's refusal
// before delivery, by Close.
func TestAutoAckResponderCredit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p, ans := newPattern(Options{Clock: clock.Real})
		slow, slowSub := responder(t, p, "slow", delivery.AckAuto, 2)
		request := func(k string) {
			t.Helper()
			if err := p.Request(cmd, req(k), replyTo, k, 10*time.Second, nil); err != nil {
				t.Fatal(err)
			}
		}
		for _, k := range []string{"r0", "r1", "r2"} {
			request(k)
		}
		if g := strings.Join(slow.got(), " "); g != "r0 r1" || ans.list() != "r2:no responder" {
			t.Fatalf("slow got %q, answers %q; want r0 r1 and r2:no responder", g, ans.list())
		}
		// A second responder with room takes what the slow one has no credit for.
		fast, _ := responder(t, p, "fast", delivery.AckAuto, 0) // no prefetch-count: delivery.DefaultPrefetch
		for _, k := range []string{"r3", "r4", "r5"} {
			request(k)
		}
		if g := strings.Join(slow.got(), " ") + "|" + strings.Join(fast.got(), " "); g != "r0 r1|r3 r4 r5" {
			t.Fatalf("slow|fast got %s, want r0 r1|r3 r4 r5", g)
		}
		// A response gives the slow responder its place back.
		if pending, _ := p.Respond(replyTo, "r0"); !pending {
			t.Fatal("r0 not pending")
		}
		if n := inFlight(t, p, slowSub); n != 1 {
			t.Fatalf("slow holds %d places after a response, want 1", n)
		}
		request("r6") // round-robin: after fast took r5, slow is next and has room
		if g := strings.Join(slow.got(), " "); g != "r0 r1 r6" {
			t.Fatalf("slow got %q, want r0 r1 r6", g)
		}
		// Timeouts give the places back; a late response gives back nothing twice.
		time.Sleep(10 * time.Second)
		synctest.Wait()
		if _, late := p.Respond(replyTo, "r1"); !late {
			t.Fatal("r1 not late after its timeout")
		}
		if n := inFlight(t, p, slowSub); n != 0 {
			t.Fatalf("slow holds %d places after the timeouts, want 0", n)
		}
		// A writer's refusal gives back the place taken for it: the request goes on to the
		// next responder.
		slow.mu.Lock()
		slow.full = true
		slow.mu.Unlock()
		request("r7") // fast is next
		request("r8") // slow refuses (and is stalled): fast takes it
		if n := inFlight(t, p, slowSub); n != 0 {
			t.Fatalf("slow holds %d places after refusing, want 0", n)
		}
		if g := strings.Join(fast.got(), " "); !strings.HasSuffix(g, "r7 r8") {
			t.Fatalf("fast got %q, want it to end with r7 r8", g)
		}
		// Close ends every pending request and gives back its place.
		p.Close()
		ch := p.rpc.lookup(cmd)
		for _, m := range ch.subs {
			if n := m.inFlight.Load(); n != 0 {
				t.Fatalf("%s holds %d places after Close, want 0", m.sub.ID, n)
			}
		}
	})
}

// TestClientAckResponderCreditIsItsPrefetch checks that a client-ack responder's credit
// stays its unacknowledged requests (delivery): a response does not give it back, its ACK
// does.
func TestClientAckResponderCreditIsItsPrefetch(t *testing.T) {
	p, ans := newPattern(Options{})
	defer p.Close()
	w, sub := responder(t, p, "c", delivery.AckClientIndividual, 1)
	for _, k := range []string{"a", "b"} {
		if err := p.Request(cmd, req(k), replyTo, k, time.Minute, nil); err != nil {
			t.Fatal(err)
		}
	}
	p.Respond(replyTo, "a")
	if err := p.Request(cmd, req("c"), replyTo, "c", time.Minute, nil); err != nil {
		t.Fatal(err)
	}
	if g := strings.Join(w.got(), " "); g != "a" || ans.list() != "b:no responder c:no responder" {
		t.Fatalf("got %q, answers %q; want a, then b and c answered no responder", g, ans.list())
	}
	key, _ := sub.OldestPending()
	if err := sub.Conn.Ack(key, "c", false); err != nil {
		t.Fatal(err)
	}
	if err := p.Request(cmd, req("d"), replyTo, "d", time.Minute, nil); err != nil {
		t.Fatal(err)
	}
	if g := strings.Join(w.got(), " "); g != "a d" {
		t.Fatalf("got %q after the ACK, want a d", g)
	}
}
