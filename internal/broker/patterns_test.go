package broker

import (
	"errors"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/titan-broker/titan/internal/address"
	"github.com/titan-broker/titan/internal/delivery"
	"github.com/titan-broker/titan/internal/dest"
	"github.com/titan-broker/titan/internal/dispatch"
	"github.com/titan-broker/titan/internal/event"
	"github.com/titan-broker/titan/internal/frame"
	"github.com/titan-broker/titan/internal/message"
	"github.com/titan-broker/titan/internal/testwait"
)

// recordingWriter keeps every MESSAGE body it is given.
type recordingWriter struct {
	mu     sync.Mutex
	bodies []string
	full   bool
	// congested, when set, is returned by WriteEvent as the connection's congestion.
	congested chan struct{}
}

// WriteEvent records like WriteMessage; forced writes pass a full writer.
func (w *recordingWriter) WriteEvent(prefix *frame.Buf, shared []byte, force bool) (bool, <-chan struct{}) {
	w.mu.Lock()
	full, c := w.full, w.congested
	w.full = full && !force
	w.mu.Unlock()
	ok := w.WriteMessage(prefix, shared)
	w.mu.Lock()
	w.full = full
	w.mu.Unlock()
	if !ok || c == nil {
		return ok, nil
	}
	return true, c
}

func (w *recordingWriter) Version() frame.Version { return frame.V12 }
func (w *recordingWriter) QueuedBytes() int64     { return 0 }
func (w *recordingWriter) WriteMessage(prefix *frame.Buf, shared []byte) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.full {
		return false
	}
	frame.PutBuf(prefix)
	// The body sits between the blank line and the terminator (NUL, LF) of the shared tail.
	i := len(shared) - len(frame.Terminator)
	j := i
	for j > 0 && !(shared[j-1] == '\n' && shared[j-2] == '\n') {
		j--
	}
	w.bodies = append(w.bodies, string(shared[j:i]))
	return true
}

func (w *recordingWriter) got() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.bodies...)
}

func msg(body string) *message.Message {
	return &message.Message{ID: body, Group: "default", Destination: "/x", Body: []byte(body)}
}

func events(ch string) dest.Identity {
	return dest.Identity{Group: "default", Pattern: dest.PatternEvents, Channel: ch}
}

func subscribe(t *testing.T, e *engine, w delivery.Writer, group string, d dest.Destination) *delivery.Subscription {
	t.Helper()
	s := &delivery.Subscription{ID: "s", Conn: delivery.NewConn(w, nil), Group: group, Dest: d}
	if err := e.Subscribe(s); err != nil {
		t.Fatal(err)
	}
	return s
}

func TestExactIdentityNeverFallsBack(t *testing.T) {
	e := newEngine(engineOptions{FanoutMode: true})
	parent, child := &recordingWriter{}, &recordingWriter{}
	subscribe(t, e, parent, "default", dest.Destination{Pattern: dest.PatternEvents, Channel: "orders"})
	subscribe(t, e, child, "default", dest.Destination{Pattern: dest.PatternEvents, Channel: "orders.created"})
	if _, err := e.Publish(events("orders.created"), msg("c")); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Publish(events("orders.cancelled"), msg("x")); err != nil {
		t.Fatal(err)
	}
	testwait.Eventually(t, 5*time.Second, `len(child.got()) == 1`, func() bool { return len(child.got()) == 1 })
	if _, ok := e.Lookup(events("orders")); ok {
		t.Fatal("publishing to /orders/created created a queue for /orders")
	}
	testwait.Eventually(t, 5*time.Second, "orders.cancelled dispatched", func() bool {
		q, _ := e.Lookup(events("orders.cancelled"))
		return q.Stats().Dispatched == 1
	})
	if len(parent.got()) != 0 {
		t.Fatalf("/orders subscriber got %v", parent.got())
	}
	if n := len(e.Queues()); n != 2 {
		t.Fatalf("%d queues, want 2 independent ones", n)
	}
}

func TestSameDestinationInTwoGroupsIsTwoQueues(t *testing.T) {
	e := newEngine(engineOptions{FanoutMode: true})
	a, b := &recordingWriter{}, &recordingWriter{}
	subscribe(t, e, a, "market", dest.Destination{Pattern: dest.PatternEvents, Channel: "orders"})
	subscribe(t, e, b, "notification", dest.Destination{Pattern: dest.PatternEvents, Channel: "orders"})
	_, _ = e.Publish(dest.Identity{Group: "market", Pattern: dest.PatternEvents, Channel: "orders"}, msg("m"))
	_, _ = e.Publish(dest.Identity{Group: "notification", Pattern: dest.PatternEvents, Channel: "orders"}, msg("n"))
	testwait.Eventually(t, 5*time.Second, `len(a.got()) == 1 && len(b.got()) == 1`, func() bool { return len(a.got()) == 1 && len(b.got()) == 1 })
	if a.got()[0] != "m" || b.got()[0] != "n" {
		t.Fatalf("market %v notification %v", a.got(), b.got())
	}
	if g := e.Groups(); len(g) != 2 || g[0] != "market" || g[1] != "notification" {
		t.Fatalf("groups holding a queue: %v", g)
	}
}

func TestFIFOUnderConcurrentProducers(t *testing.T) {
	e := newEngine(engineOptions{FanoutMode: true})
	w := &recordingWriter{}
	subscribe(t, e, w, "default", dest.Destination{Pattern: dest.PatternEvents, Channel: "f"})
	const producers, each = 4, 500
	var wg sync.WaitGroup
	for p := range producers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				if _, err := e.Publish(events("f"), msg(strconv.Itoa(p)+":"+strconv.Itoa(i))); err != nil {
					t.Error(err)
				}
			}
		}()
	}
	wg.Wait()
	testwait.Eventually(t, 5*time.Second, `len(w.got()) == producers*each`, func() bool { return len(w.got()) == producers*each })
	last := map[string]int{}
	for _, b := range w.got() {
		p, i, _ := cut(b)
		n, _ := strconv.Atoi(i)
		if prev, ok := last[p]; ok && n != prev+1 {
			t.Fatalf("producer %s: %d after %d", p, n, prev)
		}
		last[p] = n
	}
}

func cut(s string) (string, string, bool) {
	for i := range s {
		if s[i] == ':' {
			return s[:i], s[i+1:], true
		}
	}
	return s, "", false
}

func TestDeleteRulesAndFreshQueueAfterDelete(t *testing.T) {
	e := newEngine(engineOptions{})
	id := dest.Identity{Group: "default", Pattern: dest.PatternQueues, Channel: "jobs"}
	if _, err := e.Publish(id, msg("1")); err != nil {
		t.Fatal(err)
	}
	if err := e.Delete(id, false); !errors.Is(err, dispatch.ErrQueueNotEmpty) {
		t.Fatalf("non-forced delete of a non-empty queue: %v", err)
	}
	old, _ := e.Lookup(id)
	if err := e.Delete(id, true); err != nil {
		t.Fatal(err)
	}
	if err := e.Delete(id, true); !errors.Is(err, dispatch.ErrNoQueue) {
		t.Fatalf("second delete: %v", err)
	}
	if _, err := e.Publish(id, msg("2")); err != nil {
		t.Fatal(err)
	}
	fresh, _ := e.Lookup(id)
	if fresh == old || fresh.Stats().Messages != 1 || fresh.Stats().Enqueued != 1 {
		t.Fatalf("publish after delete must create a fresh queue: %+v", fresh.Stats())
	}
}

func TestCreateIsIdempotentAndKeepsLimits(t *testing.T) {
	e := newEngine(engineOptions{})
	id := dest.Identity{Group: "default", Pattern: dest.PatternQueues, Channel: "orders"}
	q, created := e.Create(id, address.Settings{MaxPendingBytes: 1 << 20})
	q2, created2 := e.Create(id, address.Settings{MaxPendingBytes: 5})
	if !created || created2 || q != q2 || q.Stats().Settings.MaxPendingBytes != 1<<20 {
		t.Fatalf("created %v %v, settings %+v", created, created2, q2.Stats().Settings)
	}
}

func TestFullPolicies(t *testing.T) {
	for _, tc := range []struct {
		policy  address.FullPolicy
		dropped bool
		err     error
	}{
		{address.PolicyDrop, true, nil},
		{address.PolicyFail, false, dispatch.ErrQueueFull},
		{address.PolicyBlock, false, dispatch.ErrQueueFull}, // after the block timeout
	} {
		e := newEngine(engineOptions{Settings: func(dest.Identity) address.Settings {
			return address.Settings{Capacity: 1, FullPolicy: tc.policy, BlockTimeout: 30 * time.Millisecond}
		}})
		id := dest.Identity{Group: "default", Pattern: dest.PatternQueues, Channel: "small"}
		if _, err := e.Publish(id, msg("1")); err != nil {
			t.Fatal(err)
		}
		dropped, err := e.Publish(id, msg("2"))
		if dropped != tc.dropped || !errors.Is(err, tc.err) {
			t.Fatalf("%s: dropped %v err %v", tc.policy, dropped, err)
		}
	}
}

func TestBlockPolicyResumesWhenRoomAppears(t *testing.T) {
	// The block timeout is an hour: only the room the acknowledgement makes can release
	// the producer within the test's bound.
	e := newEngine(engineOptions{Settings: func(dest.Identity) address.Settings {
		return address.Settings{Capacity: 1, FullPolicy: address.PolicyBlock, BlockTimeout: time.Hour}
	}})
	id := dest.Identity{Group: "default", Pattern: dest.PatternQueues, Channel: "b"}
	_, _ = e.Publish(id, msg("1"))
	done := make(chan error, 1)
	go func() { _, err := e.Publish(id, msg("2")); done <- err }()
	select {
	case err := <-done:
		t.Fatalf("publish into a full queue returned at once: %v", err)
	case <-time.After(50 * time.Millisecond):
	}
	w := &recordingWriter{}
	subscribe(t, e, w, "default", dest.Destination{Pattern: dest.PatternQueues, Channel: "b"}) // auto ack drains
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("blocked producer not released when the queue made room")
	}
	testwait.Eventually(t, 5*time.Second, `len(w.got()) == 2`, func() bool { return len(w.got()) == 2 })
}

func TestBlockedProducerIsReleasedByItsConnectionOrShutdown(t *testing.T) {
	e := newEngine(engineOptions{Settings: func(dest.Identity) address.Settings {
		return address.Settings{Capacity: 1, FullPolicy: address.PolicyBlock, BlockTimeout: time.Hour}
	}})
	id := dest.Identity{Group: "default", Pattern: dest.PatternQueues, Channel: "c"}
	_, _ = e.Publish(id, msg("1"))
	gone := make(chan struct{})
	done := make(chan error, 2)
	go func() { _, err := e.PublishUntil(id, msg("2"), gone); done <- err }()
	go func() { _, err := e.PublishUntil(id, msg("3"), nil); done <- err }()
	close(gone) // the first producer's connection closed
	if err := <-done; !errors.Is(err, dispatch.ErrCanceled) {
		t.Fatalf("after connection close: %v", err)
	}
	e.Close() // shutdown releases the other (the dispatcher closes)
	if err := <-done; !errors.Is(err, dispatch.ErrCanceled) {
		t.Fatalf("after engine close: %v", err)
	}
}

func TestPauseHoldsEnqueuesUntilResume(t *testing.T) {
	e := newEngine(engineOptions{})
	id := dest.Identity{Group: "default", Pattern: dest.PatternQueues, Channel: "p"}
	e.Create(id, address.Settings{FullPolicy: address.PolicyBlock, BlockTimeout: 5 * time.Second})
	if err := e.SetPaused(id, true); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { _, err := e.Publish(id, msg("x")); done <- err }()
	select {
	case <-done:
		t.Fatal("enqueue completed while paused")
	case <-time.After(50 * time.Millisecond):
	}
	if err := e.SetPaused(id, false); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

func TestOneConsumerPerDestinationAndIdleConsumerEnds(t *testing.T) {
	e := newEngine(engineOptions{FanoutMode: true})
	w := &recordingWriter{}
	subscribe(t, e, w, "default", dest.Destination{Pattern: dest.PatternEvents, Channel: "c"})
	for i := range 100 {
		_, _ = e.Publish(events("c"), msg(strconv.Itoa(i)))
	}
	q, _ := e.Lookup(events("c"))
	eq := q.(*event.Queue)
	testwait.Eventually(t, 5*time.Second, `len(w.got()) == 100`, func() bool { return len(w.got()) == 100 })
	testwait.Eventually(t, 5*time.Second, `eq.Consumers.Load() == 0`, func() bool { return eq.Consumers.Load() == 0 }) // idle consumer ended
	_, _ = e.Publish(events("c"), msg("again"))                                                                        // and the next publish restarts it
	testwait.Eventually(t, 5*time.Second, `len(w.got()) == 101`, func() bool { return len(w.got()) == 101 })
}

func TestStalledSubscriptionResumesOnDrain(t *testing.T) {
	e := newEngine(engineOptions{})
	w := &recordingWriter{full: true}
	s := subscribe(t, e, w, "default", dest.Destination{Pattern: dest.PatternQueues, Channel: "s"})
	id := dest.Identity{Group: "default", Pattern: dest.PatternQueues, Channel: "s"}
	_, _ = e.Publish(id, msg("kept"))
	q, _ := e.Lookup(id)
	if st := q.Stats(); st.Messages != 1 || st.Delivering != 0 {
		t.Fatalf("refused write must leave the message ready: %+v", st)
	}
	w.mu.Lock()
	w.full = false
	w.mu.Unlock()
	e.Resume(s.Conn)
	testwait.Eventually(t, 5*time.Second, `len(w.got()) == 1`, func() bool { return len(w.got()) == 1 })
}

func TestDirectModeUsesAnExplicitlyCreatedEventsQueue(t *testing.T) {
	e := newEngine(engineOptions{})
	w := &recordingWriter{}
	subscribe(t, e, w, "default", dest.Destination{Pattern: dest.PatternEvents, Channel: "orders"})
	_, _ = e.Publish(events("orders"), msg("direct"))
	if len(e.Queues()) != 0 || len(w.got()) != 1 {
		t.Fatalf("direct mode created a queue or did not deliver: %d %v", len(e.Queues()), w.got())
	}
	e.Create(events("orders"), address.Settings{MaxPendingBytes: 1 << 20})
	_, _ = e.Publish(events("orders"), msg("queued"))
	testwait.Eventually(t, 5*time.Second, `len(w.got()) == 2`, func() bool { return len(w.got()) == 2 })
	q, _ := e.Lookup(events("orders"))
	if q.Stats().Enqueued != 1 || q.Stats().Dispatched != 1 {
		t.Fatalf("explicit queue not used: %+v", q.Stats())
	}
}

func TestSearchAllDiscoversDescendantQueues(t *testing.T) {
	e := newEngine(engineOptions{})
	q := func(ch string) dest.Identity {
		return dest.Identity{Group: "default", Pattern: dest.PatternQueues, Channel: ch}
	}
	for _, ch := range []string{"orders", "orders.created", "orders.cancelled", "orders.eu.created", "other"} {
		e.Create(q(ch), address.Settings{})
	}
	e.Create(dest.Identity{Group: "market", Pattern: dest.PatternQueues, Channel: "orders.created"}, address.Settings{})
	names := func(filter string) []string {
		var out []string
		for _, x := range e.SearchAll("default", uint8(dest.PatternQueues), false, filter) {
			out = append(out, x.Identity().Channel)
		}
		return out
	}
	check := func(filter string, want ...string) {
		t.Helper()
		got := names(filter)
		if len(got) != len(want) {
			t.Fatalf("SearchAll(%q) = %v, want %v", filter, got, want)
		}
		for i := range got {
			if got[i] != want[i] {
				t.Fatalf("SearchAll(%q) = %v, want %v", filter, got, want)
			}
		}
	}
	check("orders.*", "orders.cancelled", "orders.created")
	check("orders.>", "orders.cancelled", "orders.created", "orders.eu.created")
	check("orders", "orders")
	check("*.created", "orders.created")
	if err := e.Delete(q("orders.eu.created"), true); err != nil {
		t.Fatal(err)
	}
	check("orders.>", "orders.cancelled", "orders.created")
	if got := e.SearchAll("nobody", uint8(dest.PatternQueues), false, ">"); len(got) != 0 {
		t.Fatalf("unknown group: %v", got)
	}
}

func TestRPCCountersAreBounded(t *testing.T) {
	e := newEngine(engineOptions{})
	reply := dest.Identity{Group: "default", Pattern: dest.PatternQueues, Channel: "replies"}
	for i := range maxRPCChannelsTest + 50 {
		id := dest.Identity{Group: "default", Pattern: dest.PatternCommands, Channel: "c" + strconv.Itoa(i)}
		if err := e.Request(id, msg("q"), reply, "corr"+strconv.Itoa(i), time.Minute, nil); err != nil {
			t.Fatal(err)
		}
		e.CountDroppedResponse(dest.Identity{Group: "default", Pattern: dest.PatternTempQueue, Channel: "s" + strconv.Itoa(i) + ".r"}, false)
	}
	if n := len(e.RPCStats()); n > maxRPCChannelsTest+1 {
		t.Fatalf("%d counter series for %d channels", n, maxRPCChannelsTest+50)
	}
}

func TestTempQueueOfAClosedConnectionIsNotRecreated(t *testing.T) {
	e := newEngine(engineOptions{})
	owner := delivery.NewConn(&recordingWriter{}, nil)
	e.SetTempOwner("titan-a", owner)
	id := dest.Identity{Group: "default", Pattern: dest.PatternTempQueue, Channel: "titan-a.replies"}
	if _, err := e.Publish(id, msg("1")); err != nil {
		t.Fatal(err)
	}
	e.DropTempQueues("titan-a")
	if _, err := e.Publish(id, msg("late")); !errors.Is(err, dispatch.ErrNoQueue) {
		t.Fatalf("publish to a dead owner's temp-queue: %v", err)
	}
	if len(e.Queues()) != 0 {
		t.Fatalf("orphan temp-queue recreated: %d queues", len(e.Queues()))
	}
}

// The queue never shows more messages in delivery than the subscription's prefetch, even
// while an ACK is being applied and new messages arrive (the credit an ACK frees is only
// handed out once the queue has applied it).
func TestDeliveringNeverExceedsPrefetchDuringAcks(t *testing.T) {
	e := newEngine(engineOptions{})
	w := &recordingWriter{}
	c := delivery.NewConn(w, nil)
	sub := &delivery.Subscription{ID: "s", Conn: c, Group: "default", Dest: dest.Destination{Pattern: dest.PatternQueues, Channel: "p"}, Ack: delivery.AckClientIndividual, Prefetch: 1}
	if err := e.Subscribe(sub); err != nil {
		t.Fatal(err)
	}
	id := dest.Identity{Group: "default", Pattern: dest.PatternQueues, Channel: "p"}
	const n = 2000
	go func() {
		for i := range n {
			_, _ = e.Publish(id, msg(strconv.Itoa(i)))
		}
	}()
	stop := make(chan struct{})
	peak := make(chan int)
	go func() {
		m := 0
		for {
			select {
			case <-stop:
				peak <- m
				return
			default:
			}
			if q, ok := e.Lookup(id); ok {
				m = max(m, q.Stats().Delivering)
			}
		}
	}()
	for acked := 0; acked < n; {
		key, ok := sub.OldestPending()
		if !ok {
			continue
		}
		if err := e.Ack(c, key, "", false); err != nil {
			t.Fatal(err)
		}
		acked++
	}
	close(stop)
	if p := <-peak; p > 1 {
		t.Fatalf("delivering reached %d with prefetch 1", p)
	}
}

// maxRPCChannelsTest is the rpc package's bound on request channels with counters of their
// own (maxRPCChannels).
const maxRPCChannelsTest = 1000

// An events publish to a congested subscriber delivers and returns without waiting (issue
// 30: the subscriber's own buffer absorbs it; producers pause only at the broker-wide
// watermarks). Direct mode and fanout mode alike.
func TestEventsPublishNeverWaitsOnCongestedSubscriber(t *testing.T) {
	for _, fanout := range []bool{false, true} {
		e := newEngine(engineOptions{FanoutMode: fanout})
		w := &recordingWriter{full: true, congested: make(chan struct{})} // never drains
		subscribe(t, e, w, "default", dest.Destination{Pattern: dest.PatternEvents, Channel: "hot"})
		for _, b := range []string{"big", "next"} {
			if _, err := e.Publish(events("hot"), msg(b)); err != nil {
				t.Fatal(err)
			}
		}
		testwait.Eventually(t, 5*time.Second, `len(w.got()) == 2`, func() bool { return len(w.got()) == 2 })
		if got := w.got(); got[0] != "big" || got[1] != "next" {
			t.Fatalf("fanout=%v: delivered %v", fanout, got)
		}
	}
}

// countingSpawner starts goroutines and counts them, and lets a test wait for them.
type countingSpawner struct {
	started atomic.Int32
	wg      sync.WaitGroup
}

func (s *countingSpawner) Go(_ string, fn func()) bool {
	s.started.Add(1)
	s.wg.Add(1)
	go func() { defer s.wg.Done(); fn() }()
	return true
}

// TestFanoutConsumerLingersAndEnds checks the life of a fanout-mode consumer: bursts that come
// within its linger time reuse one goroutine; it ends by itself once its queue stayed empty
// for the linger time, and the next SEND starts a new one; it ends at once when the
// dispatcher closes (no goroutine outlives shutdown), and when its queue is purged.
func TestFanoutConsumerLingersAndEnds(t *testing.T) {
	run := func(linger time.Duration) (*dispatch.Dispatcher, *event.Pattern, *countingSpawner, *recordingWriter) {
		d := dispatch.New(dispatch.Options{})
		sp := &countingSpawner{}
		p := event.New(d, event.Options{FanoutMode: true, Spawner: sp, ConsumerLinger: linger})
		w := &recordingWriter{}
		sub := &delivery.Subscription{ID: "s", Conn: delivery.NewConn(w, nil), Group: "default", Dest: dest.Destination{Pattern: dest.PatternEvents, Channel: "l"}}
		if err := p.Subscribe(sub); err != nil {
			t.Fatal(err)
		}
		return d, p, sp, w
	}
	consumers := func(d *dispatch.Dispatcher) int32 {
		q, ok := d.Lookup(events("l"))
		if !ok {
			return 0
		}
		return q.(*event.Queue).Consumers.Load()
	}

	// A long linger: ten bursts, one goroutine; closing the dispatcher ends it.
	d, p, sp, w := run(time.Hour)
	for burst := range 10 {
		for i := range 5 {
			if _, err := p.Publish(events("l"), msg(strconv.Itoa(burst*5+i)), nil); err != nil {
				t.Fatal(err)
			}
		}
		testwait.Eventually(t, 5*time.Second, `len(w.got()) == (burst+1)*5`, func() bool { return len(w.got()) == (burst+1)*5 })
	}
	if n := sp.started.Load(); n != 1 {
		t.Fatalf("%d consumer goroutines for 10 bursts, want 1", n)
	}
	for i, b := range w.got() {
		if b != strconv.Itoa(i) {
			t.Fatalf("delivery %d is %q: not FIFO", i, b)
		}
	}
	d.Close()
	sp.wg.Wait() // returns: the lingering consumer saw the dispatcher close
	if consumers(d) != 0 {
		t.Fatal("a consumer is counted after close")
	}

	// A short linger: the idle consumer ends by itself; the next SEND starts another.
	d, p, sp, w = run(time.Millisecond)
	if _, err := p.Publish(events("l"), msg("a"), nil); err != nil {
		t.Fatal(err)
	}
	testwait.Eventually(t, 5*time.Second, `len(w.got()) == 1 && consumers(d) == 0`, func() bool { return len(w.got()) == 1 && consumers(d) == 0 })
	sp.wg.Wait()
	if _, err := p.Publish(events("l"), msg("b"), nil); err != nil {
		t.Fatal(err)
	}
	testwait.Eventually(t, 5*time.Second, `len(w.got()) == 2`, func() bool { return len(w.got()) == 2 })
	if n := sp.started.Load(); n != 2 {
		t.Fatalf("%d consumer goroutines, want 2 (one per burst after an idle end)", n)
	}
	sp.wg.Wait()
	d.Close()

	// Purge ends a lingering consumer at once.
	d, p, sp, w = run(time.Hour)
	if _, err := p.Publish(events("l"), msg("c"), nil); err != nil {
		t.Fatal(err)
	}
	testwait.Eventually(t, 5*time.Second, `len(w.got()) == 1`, func() bool { return len(w.got()) == 1 })
	q, _ := d.Lookup(events("l"))
	q.Purge()
	sp.wg.Wait()
	d.Close()
}
