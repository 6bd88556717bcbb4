package queue

import (
	"math"
	"testing"
	"unsafe"
)

// TestMessageFitsItsClass holds a Message, which every queued message costs, to the
// allocator's 96-byte size class (80 until Priority joined Size and DeliveryCount).
func TestMessageFitsItsClass(t *testing.T) {
	if n := unsafe.Sizeof(Message{}); n > 96 {
		t.Fatalf("queue.Message is %d bytes, want at most 96", n)
	}
}

// TestQueueFitsItsClass holds a Queue, which every queue a broker restores costs, to the
// allocator's 208-byte size class: the ready list keeps one inline deque, not one per
// priority (ten would add 360 bytes to each of 100,000 restored queues).
func TestQueueFitsItsClass(t *testing.T) {
	if n := unsafe.Sizeof(Queue{}); n > 208 {
		t.Fatalf("queue.Queue is %d bytes, want at most 208", n)
	}
}

// TestClampSize checks that sizes beyond int32 are clamped, not wrapped.
func TestClampSize(t *testing.T) {
	for _, c := range []struct {
		in   int
		want int32
	}{{0, 0}, {100, 100}, {math.MaxInt32, math.MaxInt32}, {math.MaxInt32 + 1, math.MaxInt32}, {1 << 40, math.MaxInt32}} {
		if got := ClampSize(c.in); got != c.want {
			t.Errorf("ClampSize(%d) = %d, want %d", c.in, got, c.want)
		}
	}
}

// TestDeliveryCountSaturates checks that Pop does not wrap a delivery count at its top.
func TestDeliveryCountSaturates(t *testing.T) {
	q := New(Options{})
	now := at(0)
	q.Enqueue(&Message{Seq: 1, Size: 1, DeliveryCount: math.MaxInt32 - 1}, now)
	for range 3 {
		m, _ := q.Pop(now)
		if m == nil {
			t.Fatal("no message")
		}
		if m.DeliveryCount != math.MaxInt32 {
			t.Fatalf("DeliveryCount %d, want %d", m.DeliveryCount, math.MaxInt32)
		}
		q.Nack(m.Seq, now)
	}
}

// TestUndeliveredReversesPop checks that Undelivered takes back Pop's increment, and leaves a
// saturated or zero count alone.
func TestUndeliveredReversesPop(t *testing.T) {
	q := New(Options{})
	now := at(0)
	q.Enqueue(&Message{Seq: 1, Size: 1}, now)
	m, _ := q.Pop(now)
	m.Undelivered()
	if m.DeliveryCount != 0 {
		t.Fatalf("DeliveryCount %d after Pop and Undelivered, want 0", m.DeliveryCount)
	}
	m.Undelivered()
	if m.DeliveryCount != 0 {
		t.Fatalf("DeliveryCount %d, want it to stay 0", m.DeliveryCount)
	}
	m.DeliveryCount = math.MaxInt32
	m.Undelivered()
	if m.DeliveryCount != math.MaxInt32 {
		t.Fatalf("saturated DeliveryCount became %d", m.DeliveryCount)
	}
}

// TestMaxDeliveriesBeyondTheCountStillDeadLetters checks that a max-deliveries setting above
// what a DeliveryCount can hold is taken as that top, so the message still dead-letters.
func TestMaxDeliveriesBeyondTheCountStillDeadLetters(t *testing.T) {
	q := New(Options{MaxDeliveries: math.MaxInt})
	now := at(0)
	q.Enqueue(&Message{Seq: 1, Size: 1, DeliveryCount: math.MaxInt32 - 1}, now)
	m, _ := q.Pop(now)
	rm := q.Nack(m.Seq, now)
	if len(rm) != 1 || rm[0].Reason != ReasonMaxDeliveries {
		t.Fatalf("Nack at the top count removed %+v, want the message with ReasonMaxDeliveries", rm)
	}
}
