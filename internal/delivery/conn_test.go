package delivery

import (
	"bytes"
	"testing"

	"github.com/titan-broker/titan/internal/delivery/deliverytest"
	"github.com/titan-broker/titan/internal/dest"
	"github.com/titan-broker/titan/internal/frame"
	"github.com/titan-broker/titan/internal/message"
)

// recWriter is a Writer that records each MESSAGE's head (copied) and Buf, and recycles the
// Buf at once as a connection's writer does once the bytes are on the socket.
type recWriter struct {
	v      frame.Version
	refuse bool
	heads  [][]byte
	bufs   []*frame.Buf
	frames [][]byte
}

func (w *recWriter) Version() frame.Version { return w.v }
func (w *recWriter) QueuedBytes() int64     { return 0 }
func (w *recWriter) WriteMessage(p *frame.Buf, shared []byte) bool {
	if w.refuse {
		return false
	}
	w.heads = append(w.heads, bytes.Clone(p.B))
	w.frames = append(w.frames, append(bytes.Clone(p.B), shared...))
	w.bufs = append(w.bufs, p)
	frame.PutBuf(p)
	return true
}
func (w *recWriter) WriteEvent(p *frame.Buf, shared []byte, _ bool) (bool, <-chan struct{}) {
	return w.WriteMessage(p, shared), nil
}

func testMessage() *message.Message {
	return message.Pack(&message.Parts{IDPrefix: "t", Group: "default", Destination: []byte("/topic/a"), Body: []byte("hi")})
}

// TestAutoAckHeadShared checks the rule that an auto-ack first delivery carries only the
// subscription header in its head: the head is the one AppendPrefix encodes, at every
// version (escaping included), it is the same Buf for every such delivery, and a writer's
// PutBuf leaves it intact. A redelivery, a sequenced delivery and a client-ack delivery get
// their own pooled head with their headers.
func TestAutoAckHeadShared(t *testing.T) {
	m := testMessage()
	for _, v := range []frame.Version{frame.V10, frame.V11, frame.V12} {
		w := &recWriter{v: v}
		c := NewConn(w, nil)
		sub := &Subscription{ID: "s:1\\x", Conn: c, Ack: AckAuto}
		if err := c.Add(sub); err != nil {
			t.Fatal(err)
		}
		want := message.AppendPrefix(nil, &message.Delivery{Subscription: sub.ID}, v)
		for range 3 {
			if !c.Deliver(sub, m, nil, 1, 1) {
				t.Fatalf("%v: Deliver refused", v)
			}
			if res := c.DeliverEvent(sub, m, EventPolicy{}); res != EventWritten {
				t.Fatalf("%v: DeliverEvent = %v", v, res)
			}
		}
		for i, h := range w.heads {
			if !bytes.Equal(h, want) {
				t.Fatalf("%v: head %d = %q, want %q", v, i, h, want)
			}
			if w.bufs[i] != w.bufs[0] {
				t.Fatalf("%v: head %d is another Buf: the constant head is not shared", v, i)
			}
			if !bytes.Equal(w.bufs[i].B, want) {
				t.Fatalf("%v: the shared head reads %q after PutBuf, want %q", v, w.bufs[i].B, want)
			}
		}
		// Deliveries with per-delivery headers do not use it.
		n := len(w.heads)
		c.Deliver(sub, m, nil, 1, 2)       // redelivery
		c.DeliverSequenced(sub, m, nil, 7) // events-store
		for i, h := range w.heads[n:] {
			if w.bufs[n+i] == w.bufs[0] || bytes.Equal(h, want) {
				t.Fatalf("%v: delivery %d with its own headers got the shared head %q", v, i, h)
			}
		}
		if v != frame.V12 {
			continue
		}
		f, err := frame.NewParser(bytes.NewReader(w.frames[0]), frame.Limits{}).ReadFrame()
		if err != nil || f.Command != frame.CmdMessage || f.Value(frame.HdrSubscription) != sub.ID || string(f.Body) != "hi" {
			t.Fatalf("%v: the MESSAGE does not parse back: %v %v", v, f, err)
		}
	}
}

// BenchmarkDeliverEvent measures one events delivery to an auto-ack and a client-ack
// subscription (lock, head, write hand-off; the writer only recycles the head).
func BenchmarkDeliverEvent(b *testing.B) {
	m := testMessage()
	for _, ack := range []AckMode{AckAuto, AckClientIndividual} {
		b.Run(ack.String(), func(b *testing.B) {
			c := NewConn(deliverytest.Null{}, nil)
			sub := &Subscription{ID: "sub-1", Conn: c, Ack: ack, Prefetch: 1 << 30}
			if err := c.Add(sub); err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			for b.Loop() {
				if res := c.DeliverEvent(sub, m, EventPolicy{}); res != EventWritten {
					b.Fatal(res)
				}
				if ack != AckAuto {
					key, _ := sub.OldestPending()
					if err := c.Ack(key, "", false); err != nil {
						b.Fatal(err)
					}
				}
			}
		})
	}
}

// TestSubscribed: Subscribed matches a subscription on exactly the identity (group, pattern,
// channel), not another group's, another channel's, and not once it is unsubscribed.
func TestSubscribed(t *testing.T) {
	c := NewConn(&recWriter{v: frame.V12}, nil)
	id := dest.Identity{Group: dest.DefaultGroup, Pattern: dest.PatternTempQueue, Channel: "s1.answers"}
	if c.Subscribed(id) {
		t.Fatal("subscribed with no subscription")
	}
	sub := &Subscription{ID: "a", Conn: c, Group: id.Group, Dest: dest.Destination{Pattern: id.Pattern, Channel: id.Channel}}
	if err := c.Add(sub); err != nil {
		t.Fatal(err)
	}
	if !c.Subscribed(id) {
		t.Fatal("not subscribed to its subscription's identity")
	}
	for _, other := range []dest.Identity{
		{Group: "g2", Pattern: id.Pattern, Channel: id.Channel},
		{Group: id.Group, Pattern: dest.PatternQueues, Channel: id.Channel},
		{Group: id.Group, Pattern: id.Pattern, Channel: "s1.other"},
	} {
		if c.Subscribed(other) {
			t.Fatalf("subscribed to %v", other)
		}
	}
	if err := c.Unsubscribe("a"); err != nil {
		t.Fatal(err)
	}
	if c.Subscribed(id) {
		t.Fatal("still subscribed after UNSUBSCRIBE")
	}
}
