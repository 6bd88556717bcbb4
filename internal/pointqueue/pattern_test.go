package pointqueue

import (
	"bytes"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/titan-broker/titan/internal/address"
	"github.com/titan-broker/titan/internal/delivery"
	"github.com/titan-broker/titan/internal/delivery/deliverytest"
	"github.com/titan-broker/titan/internal/dest"
	"github.com/titan-broker/titan/internal/dispatch"
	"github.com/titan-broker/titan/internal/frame"
	"github.com/titan-broker/titan/internal/message"
)

// fakeWriter is a consumer's delivery.Writer: it records each MESSAGE's body (and whether
// it was a redelivery), or refuses while full, as a connection over its outbound limit does.
type fakeWriter struct {
	mu     sync.Mutex
	full   bool
	bodies []string
}

func (w *fakeWriter) Version() frame.Version { return frame.V12 }
func (w *fakeWriter) QueuedBytes() int64     { return 0 }
func (w *fakeWriter) WriteMessage(p *frame.Buf, shared []byte) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.full {
		return false
	}
	body := deliverytest.Body(shared)
	if bytes.Contains(p.B, []byte("\nredelivered:true")) || bytes.Contains(p.B, []byte("\ndelivery-count:")) {
		body += "*"
	}
	w.bodies = append(w.bodies, body)
	frame.PutBuf(p)
	return true
}
func (w *fakeWriter) WriteEvent(p *frame.Buf, s []byte, _ bool) (bool, <-chan struct{}) {
	return w.WriteMessage(p, s), nil
}
func (w *fakeWriter) got() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return strings.Join(w.bodies, " ")
}
func (w *fakeWriter) setFull(full bool) {
	w.mu.Lock()
	w.full = full
	w.mu.Unlock()
}

var jobs = dest.Identity{Group: "default", Pattern: dest.PatternQueues, Channel: "jobs"}

type harness struct {
	d *dispatch.Dispatcher
	p *Pattern
}

func newHarness(t *testing.T, s address.Settings) *harness {
	t.Helper()
	d := dispatch.New(dispatch.Options{})
	p := New(d, Options{})
	if _, _, err := d.Create(jobs, s); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close(); d.Close() })
	return &harness{d: d, p: p}
}

func (h *harness) consumer(t *testing.T, id string, ack delivery.AckMode, prefetch int) (*fakeWriter, *delivery.Subscription) {
	t.Helper()
	w := &fakeWriter{}
	sub := &delivery.Subscription{ID: id, Conn: delivery.NewConn(w, nil), Group: "default",
		Dest: dest.Destination{Pattern: dest.PatternQueues, Channel: "jobs"}, Ack: ack, Prefetch: prefetch}
	if err := h.p.Subscribe(sub); err != nil {
		t.Fatal(err)
	}
	return w, sub
}

func (h *harness) send(t *testing.T, bodies ...string) {
	t.Helper()
	for _, b := range bodies {
		m := &message.Message{ID: b, Group: "default", Destination: "/queue/jobs", Body: []byte(b)}
		if _, err := h.p.Publish(jobs, m, nil); err != nil {
			t.Fatal(err)
		}
	}
}

func ack(t *testing.T, sub *delivery.Subscription, nack bool) {
	t.Helper()
	key, ok := sub.OldestPending()
	if !ok {
		t.Fatal("nothing pending")
	}
	if err := sub.Conn.Ack(key, sub.ID, nack); err != nil {
		t.Fatal(err)
	}
}

// TestRoundRobinWithCredit checks dispatch: each message goes to one consumer,
// round-robin among those with credit; a client-ack consumer at its prefetch is skipped
// until it acknowledges; what nobody has credit for waits in the queue, in order.
func TestRoundRobinWithCredit(t *testing.T) {
	h := newHarness(t, address.Settings{})
	a, asub := h.consumer(t, "a", delivery.AckClientIndividual, 1)
	b, bsub := h.consumer(t, "b", delivery.AckClientIndividual, 2)
	h.send(t, "1", "2", "3", "4", "5")
	if a.got() != "1" || b.got() != "2 3" {
		t.Fatalf("a %q, b %q; want 1 and 2 3", a.got(), b.got())
	}
	ack(t, asub, false) // a takes the next waiting message
	if a.got() != "1 4" {
		t.Fatalf("a %q after its ACK, want 1 4", a.got())
	}
	ack(t, bsub, false)
	ack(t, bsub, false)
	if b.got() != "2 3 5" {
		t.Fatalf("b %q after its ACKs, want 2 3 5", b.got())
	}
}

// TestStalledConsumerResumes checks the stall: a consumer whose writer refuses (over its
// outbound limit) loses nothing; the other consumer takes the messages, and the stalled
// one takes the rest once its connection drains (Resume).
func TestStalledConsumerResumes(t *testing.T) {
	h := newHarness(t, address.Settings{})
	a, asub := h.consumer(t, "a", delivery.AckAuto, 0)
	a.setFull(true)
	h.send(t, "1", "2")
	if a.got() != "" {
		t.Fatalf("a stalled got %q", a.got())
	}
	a.setFull(false)
	asub.Conn.Resume()
	if a.got() != "1 2" {
		t.Fatalf("after Resume a got %q, want 1 2 in order", a.got())
	}
	b, _ := h.consumer(t, "b", delivery.AckAuto, 0)
	a.setFull(true)
	h.send(t, "3", "4")
	if b.got() != "3 4" {
		t.Fatalf("b got %q while a was stalled, want 3 4", b.got())
	}
}

// TestNackRedeliveryDelayAndDeadLetter checks NACK under the clock port: a NACKed message
// comes back (redelivered) only after redelivery-delay, and after max-deliveries it goes to
// the dead-letter queue with headers saying why.
func TestNackRedeliveryDelayAndDeadLetter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, address.Settings{RedeliveryDelay: 5 * time.Second, MaxDeliveries: 2})
		w, sub := h.consumer(t, "a", delivery.AckClientIndividual, 10)
		dlqW := &fakeWriter{}
		dlq := &delivery.Subscription{ID: "d", Conn: delivery.NewConn(dlqW, nil), Group: "default",
			Dest: dest.Destination{Pattern: dest.PatternQueues, Channel: "DLQ.jobs"}}
		if err := h.p.Subscribe(dlq); err != nil {
			t.Fatal(err)
		}
		h.send(t, "x")
		ack(t, sub, true)
		time.Sleep(5*time.Second - time.Millisecond)
		synctest.Wait()
		if w.got() != "x" {
			t.Fatalf("before the redelivery delay: %q", w.got())
		}
		time.Sleep(time.Millisecond)
		synctest.Wait()
		if w.got() != "x x*" {
			t.Fatalf("after the redelivery delay: %q, want x x*", w.got())
		}
		ack(t, sub, true) // second delivery NACKed: max-deliveries 2 reached
		time.Sleep(5 * time.Second)
		synctest.Wait()
		if w.got() != "x x*" || dlqW.got() != "x" {
			t.Fatalf("consumer %q, dead-letter queue %q; want x x* and x", w.got(), dlqW.got())
		}
		if h.d.DeadLettered.Load() != 1 {
			t.Fatalf("dead-lettered %d", h.d.DeadLettered.Load())
		}
	})
}

// TestDetachReturnsUnackedInOrder checks reference 002's rollback order: the
// unacknowledged messages of a consumer that leaves go back to the head of the queue, so the
// next consumer gets them first, in their original order, marked redelivered.
func TestDetachReturnsUnackedInOrder(t *testing.T) {
	h := newHarness(t, address.Settings{})
	_, sub := h.consumer(t, "a", delivery.AckClient, 3)
	h.send(t, "1", "2", "3", "4")
	sub.Conn.Close()
	b, _ := h.consumer(t, "b", delivery.AckAuto, 0)
	if b.got() != "1* 2* 3* 4" {
		t.Fatalf("next consumer got %q, want 1* 2* 3* 4", b.got())
	}
}

// TestScheduledMessage checks a message with a delivery time: held until it is due (the
// queue's one timer, on the clock port), then delivered; Close stops the timer for good.
func TestScheduledMessage(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, address.Settings{})
		w, _ := h.consumer(t, "a", delivery.AckAuto, 0)
		due := time.Now().Add(time.Minute)
		m := &message.Message{ID: "later", Group: "default", Destination: "/queue/jobs", Body: []byte("later"), DeliverAtMs: due.UnixMilli()}
		if _, err := h.p.Publish(jobs, m, nil); err != nil {
			t.Fatal(err)
		}
		h.send(t, "now")
		time.Sleep(time.Until(due) - time.Millisecond)
		synctest.Wait()
		if w.got() != "now" {
			t.Fatalf("before it is due: %q", w.got())
		}
		time.Sleep(2 * time.Millisecond)
		synctest.Wait()
		if w.got() != "now later" {
			t.Fatalf("once due: %q", w.got())
		}
		h.p.Close()
		m2 := &message.Message{ID: "never", Group: "default", Destination: "/queue/jobs", Body: []byte("never"), DeliverAtMs: time.Now().Add(time.Second).UnixMilli()}
		if _, err := h.p.Publish(jobs, m2, nil); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Hour)
		synctest.Wait()
		if w.got() != "now later" {
			t.Fatalf("a timer fired after Close: %q", w.got())
		}
	})
}
