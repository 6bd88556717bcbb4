package client

import (
	"github.com/titan-broker/titan/internal/frame"
)

// Header is one STOMP header entry, unescaped.
type Header struct {
	Name, Value string
}

// Message is one MESSAGE the broker delivered to a subscription. The handler it is passed
// to owns it; Body and Headers are not shared with anything else.
type Message struct {
	// Destination is the MESSAGE's destination header (the canonical form).
	Destination string
	// Group is the group of the message ("default" when the MESSAGE carried none).
	Group string
	// Body is the message body, byte-exact.
	Body []byte
	// Headers are every header of the MESSAGE in wire order, duplicates kept.
	Headers []Header

	sub *Subscription
	cn  *conn
	ack string // the ack header: the id ACK and NACK name
}

// Header returns the first header named name, or "" (STOMP 1.2, "Repeated Header Entries").
func (m *Message) Header(name string) string {
	v, _ := m.Lookup(name)
	return v
}

// Lookup returns the first header named name and whether it was present.
func (m *Message) Lookup(name string) (string, bool) {
	for _, h := range m.Headers {
		if h.Name == name {
			return h.Value, true
		}
	}
	return "", false
}

// Subscription returns the subscription that received the message (nil for a message not
// delivered to one).
func (m *Message) Subscription() *Subscription { return m.sub }

// Ack acknowledges the message (for AckClient also every earlier message of its
// subscription). It writes the ACK frame and returns; under AckAuto it does nothing.
// Errors: ErrStaleMessage when the delivering connection has gone (the broker redelivers the
// message), a write error otherwise. Safe for concurrent use.
func (m *Message) Ack() error { return m.answer(frame.CmdAck) }

// Nack tells the broker the message was not consumed, so it redelivers it (queues) or
// dead-letters it after max-deliveries. Under AckAuto it does nothing. Errors as Ack.
func (m *Message) Nack() error { return m.answer(frame.CmdNack) }

func (m *Message) answer(cmd frame.Command) error {
	if m.sub == nil || m.sub.opts.ack == AckAuto || m.ack == "" {
		return nil
	}
	if m.cn.isDone() {
		return ErrStaleMessage
	}
	f := &frame.Frame{Command: cmd, Headers: []frame.Header{{Key: frame.HdrID, Value: m.ack}}}
	if err := m.cn.write(f); err != nil {
		if m.cn.isDone() {
			return ErrStaleMessage
		}
		return err
	}
	return nil
}

func newMessage(f *frame.Frame, sub *Subscription, cn *conn) *Message {
	m := &Message{Body: f.Body, Headers: make([]Header, len(f.Headers)), sub: sub, cn: cn, Group: "default"}
	for i, h := range f.Headers {
		m.Headers[i] = Header{Name: h.Key, Value: h.Value}
	}
	m.Destination = f.Value(frame.HdrDestination)
	if g := f.Value(frame.HdrGroup); g != "" {
		m.Group = g
	}
	m.ack = f.Value(frame.HdrAck)
	return m
}
