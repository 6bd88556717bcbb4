package broker_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/titan-broker/titan/internal/brokertest"
	"github.com/titan-broker/titan/internal/frame"
	"github.com/titan-broker/titan/internal/testwait"
)

// TestDurableTopicDialects: a durable topic subscription in each peer's dialect keeps what is
// published while its subscriber is away, delivers it with the topic's destination on return,
// and is deleted by that peer's UNSUBSCRIBE (issue 26).
func TestDurableTopicDialects(t *testing.T) {
	b := brokertest.Run(t, brokertest.DefaultTestConfig())
	addr := b.Addrs()[0]
	cases := []struct {
		name    string
		connect []string
		sub     []string // durable headers on SUBSCRIBE
		unsub   []string // deletion headers on UNSUBSCRIBE
	}{
		{"rabbitmq", nil, []string{"durable:true", "auto-delete:false"}, []string{"durable:true"}},
		{"rabbitmq-legacy", nil, []string{"persistent:true"}, []string{"persistent:true"}},
		{"activemq", []string{"client-id:app-a"}, []string{"activemq.subscriptionName:subA"}, []string{"activemq.subscriptionName:subA"}},
		{"artemis", []string{"client-id:app-b"}, []string{"durable-subscription-name:subB"}, []string{"durable-subscription-name:subB"}},
		{"artemis-subscriber", []string{"client-id:app-c"}, []string{"durable-subscriber-name:subC"}, []string{"durable-subscriber-name:subC"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			topic := "/topic/dt/" + tc.name
			c := brokertest.Connect(t, addr, tc.connect...)
			c.SendFrame("SUBSCRIBE", "", append([]string{"destination:" + topic, "id:" + tc.name, "ack:client-individual", "receipt:s1"}, tc.sub...)...)
			c.Expect(frame.CmdReceipt, "receipt-id:s1")
			c.SendFrame("UNSUBSCRIBE", "", "id:"+tc.name, "receipt:d1") // detach: the subscription stays
			c.Expect(frame.CmdReceipt, "receipt-id:d1")
			_ = c.Conn.Close()

			p := brokertest.Connect(t, addr)
			for i := range 3 {
				p.SendFrame("SEND", fmt.Sprint("m", i), "destination:"+topic, fmt.Sprint("receipt:p", i))
				p.Expect(frame.CmdReceipt)
			}
			c = brokertest.Connect(t, addr, tc.connect...)
			c.SendFrame("SUBSCRIBE", "", append([]string{"destination:" + topic, "id:" + tc.name, "ack:client-individual"}, tc.sub...)...)
			for i := range 3 {
				m := c.Expect(frame.CmdMessage, "destination:"+topic)
				if string(m.Body) != fmt.Sprint("m", i) {
					t.Fatalf("message %d: body %q", i, m.Body)
				}
				c.SendFrame("ACK", "", "id:"+m.Value("ack"))
			}
			c.SendFrame("UNSUBSCRIBE", "", append([]string{"id:" + tc.name, "receipt:u1"}, tc.unsub...)...)
			c.Expect(frame.CmdReceipt, "receipt-id:u1")
			// Deleted: what is published now is kept for nobody.
			p.SendFrame("SEND", "gone", "destination:"+topic, "receipt:p9")
			p.Expect(frame.CmdReceipt)
			c.SendFrame("SUBSCRIBE", "", append([]string{"destination:" + topic, "id:again", "receipt:s3"}, tc.sub...)...)
			c.Expect(frame.CmdReceipt, "receipt-id:s3")
			p.SendFrame("SEND", "fresh", "destination:"+topic, "receipt:p10")
			p.Expect(frame.CmdReceipt)
			if m := c.Expect(frame.CmdMessage); string(m.Body) != "fresh" {
				t.Fatalf("re-created subscription got %q first, want fresh", m.Body)
			}
			c.SendFrame("UNSUBSCRIBE", "", append([]string{"id:again", "receipt:u4"}, tc.unsub...)...)
			c.Expect(frame.CmdReceipt, "receipt-id:u4")
			c.SendFrame("SUBSCRIBE", "", "destination:"+topic, "id:plain", "receipt:s2")
			c.Expect(frame.CmdReceipt, "receipt-id:s2")
			c.SendFrame("UNSUBSCRIBE", "", append([]string{"id:plain", "receipt:u2"}, tc.unsub...)...)
			c.Expect(frame.CmdReceipt, "receipt-id:u2") // it ended a (non-durable) subscription
			c.SendFrame("UNSUBSCRIBE", "", append([]string{"id:none", "receipt:u3"}, tc.unsub...)...)
			c.Expect(frame.CmdError, "message:unknown durable subscription")
		})
	}
}

// TestDurableTopicShared: two connections with the same RabbitMQ id share the subscription
// (each message to one), a wildcard filter feeds it, and durable without id is an ERROR.
func TestDurableTopicShared(t *testing.T) {
	b := brokertest.Run(t, brokertest.DefaultTestConfig())
	addr := b.Addrs()[0]
	a, c := brokertest.Connect(t, addr), brokertest.Connect(t, addr)
	for _, x := range []*brokertest.Client{a, c} {
		x.SendFrame("SUBSCRIBE", "", "destination:/exchange/amq.topic/sh.#", "id:shared", "durable:true", "receipt:s")
		x.Expect(frame.CmdReceipt)
	}
	p := brokertest.Connect(t, addr)
	for i := range 10 {
		p.SendFrame("SEND", fmt.Sprint(i), fmt.Sprint("destination:/topic/sh/", i%3), "receipt:r")
		p.Expect(frame.CmdReceipt)
	}
	got := 0
	for _, x := range []*brokertest.Client{a, c} {
		x.SendFrame("UNSUBSCRIBE", "", "id:shared", "receipt:u") // detach: not deleted
		for {
			f, err := x.Read(5 * time.Second)
			if err != nil {
				t.Fatal(err)
			}
			if f.Command == frame.CmdReceipt {
				break
			}
			got++
		}
	}
	if got != 10 {
		t.Fatalf("the two connections got %d messages, want 10 in all", got)
	}
	a.SendFrame("SUBSCRIBE", "", "destination:/topic/x", "durable:true")
	a.Expect(frame.CmdError, "message:missing id header")
	d := brokertest.Connect(t, addr)
	d.SendFrame("SUBSCRIBE", "", "destination:/topic/x", "id:1", "activemq.subscriptionName:n")
	d.Expect(frame.CmdError, "message:missing client-id")
}

// TestControlHeaders: each peer control header is honoured or refused by name (issue 26).
func TestControlHeaders(t *testing.T) {
	b := brokertest.Run(t, brokertest.DefaultTestConfig())
	addr := b.Addrs()[0]
	refused := []struct{ cmd, dest, hdr, msg string }{
		{"SUBSCRIBE", "/topic/a", "activemq.exclusive:true", "unsupported header activemq.exclusive"},
		{"SUBSCRIBE", "/queue/a", "exclusive:true", "unsupported header exclusive"},
		{"SUBSCRIBE", "/topic/a", "activemq.retroactive:true", "unsupported header activemq.retroactive"},
		{"SUBSCRIBE", "/topic/a", "activemq.noLocal:true", "unsupported header activemq.noLocal"},
		{"SUBSCRIBE", "/topic/a", "no-local:true", "unsupported header no-local"},
		{"SUBSCRIBE", "/topic/a", "activemq.priority:5", "unsupported header activemq.priority"},
		{"SUBSCRIBE", "/queue/a", "x-queue-name:q", "unsupported header x-queue-name"},
		{"SUBSCRIBE", "/queue/a", "x-message-ttl:100", "unsupported header x-message-ttl"},
		{"SUBSCRIBE", "/queue/a", "x-expires:100", "unsupported header x-expires"},
		{"SUBSCRIBE", "/queue/a", "x-dead-letter-exchange:dlx", "unsupported header x-dead-letter-exchange"},
		{"SUBSCRIBE", "/queue/a", "auto-delete:true", "unsupported header auto-delete"},
		{"SUBSCRIBE", "/topic/a", "auto-delete:false", "unsupported header auto-delete"},
		{"SUBSCRIBE", "/queue/a", "activemq.subscriptionName:x", "unsupported header activemq.subscriptionName"},
		{"SUBSCRIBE", "/queue/a", "activemq.prefetchSize:0", "invalid activemq.prefetchSize"},
		{"SUBSCRIBE", "/exchange/amq.fanout/a", "x:y", "unsupported exchange"},
		{"SEND", "/queue/a", "x-queue-name:q", "unsupported header x-queue-name"},
		{"SEND", "/queue/a", "x-expires:1", "unsupported header x-expires"},
		{"SEND", "/queue/a", "durable:false", "unsupported header durable"},
		{"SEND", "/queue/a", "x-message-ttl:abc", "invalid x-message-ttl"},
	}
	for _, r := range refused {
		c := brokertest.Connect(t, addr)
		c.SendFrame(r.cmd, "", "destination:"+r.dest, "id:1", r.hdr, "receipt:r")
		c.Expect(frame.CmdError, "message:"+r.msg)
	}
	// Honoured: the defaults, prefetchSize, x-max-priority, an application header.
	c := brokertest.Connect(t, addr)
	c.SendFrame("SUBSCRIBE", "", "destination:/queue/ok", "id:1", "ack:client", "activemq.prefetchSize:2", "activemq.exclusive:false",
		"activemq.dispatchAsync:true", "x-max-priority:10", "exclusive:false", "durable:true", "receipt:r")
	c.Expect(frame.CmdReceipt)
	p := brokertest.Connect(t, addr)
	for i := range 3 {
		p.SendFrame("SEND", fmt.Sprint(i), "destination:/queue/ok", "x-trace:abc", "persistent:true", "receipt:r")
		p.Expect(frame.CmdReceipt)
	}
	c.Expect(frame.CmdMessage, "x-trace:abc")
	c.Expect(frame.CmdMessage)
	c.SendFrame("DISCONNECT", "", "receipt:d") // prefetch 2: the third waits for an ACK
	c.Expect(frame.CmdReceipt, "receipt-id:d")
	// x-message-ttl on SEND is the message's expiry.
	p.SendFrame("SEND", "ttl", "destination:/queue/ttl", "x-message-ttl:1", "receipt:t")
	p.Expect(frame.CmdReceipt)
	p.SendFrame("SEND", "live", "destination:/queue/ttl", "receipt:t2")
	p.Expect(frame.CmdReceipt)
	sent := time.Now()
	testwait.Eventually(t, 5*time.Second, "the 1 ms TTL to pass", func() bool { return time.Since(sent) > 5*time.Millisecond })
	s := brokertest.Connect(t, addr)
	s.SendFrame("SUBSCRIBE", "", "destination:/queue/ttl", "id:1")
	if m := s.Expect(frame.CmdMessage); string(m.Body) != "live" {
		t.Fatalf("first message %q, want the one without a TTL", m.Body)
	}
	// The queue counts a removal once it has released its lock (Queue.finish), which may be
	// just after the MESSAGE went out.
	testwait.Eventually(t, 5*time.Second, "the x-message-ttl message counted as expired", func() bool { return b.Dispatcher().Expired.Load() > 0 })
}

// TestDeadLetterName: a dead letter of /queue/dlq.a/b is on /queue/DLQ/dlq/a/b — the name
// the README gives, the destination its MESSAGEs carry — and subscribing with the dotted
// spelling /queue/DLQ.dlq.a.b reaches the same queue (issue 26: names as the client used
// them, README and broker agree).
func TestDeadLetterName(t *testing.T) {
	b := brokertest.Run(t, brokertest.DefaultTestConfig())
	addr := b.Addrs()[0]
	d := brokertest.Connect(t, addr)
	d.SendFrame("SUBSCRIBE", "", "destination:/queue/DLQ.dlq.a.b", "id:d", "receipt:s")
	d.Expect(frame.CmdReceipt)
	c := brokertest.Connect(t, addr)
	c.SendFrame("SUBSCRIBE", "", "destination:/queue/dlq.a/b", "id:c", "ack:client-individual", "receipt:s")
	c.Expect(frame.CmdReceipt)
	p := brokertest.Connect(t, addr)
	p.SendFrame("SEND", "poison", "destination:/queue/dlq.a/b", "receipt:p")
	p.Expect(frame.CmdReceipt)
	for range 10 { // max-deliveries: 10 by default
		m := c.Expect(frame.CmdMessage, "destination:/queue/dlq/a/b")
		c.SendFrame("NACK", "", "id:"+m.Value("ack"))
	}
	d.Expect(frame.CmdMessage, "destination:/queue/DLQ/dlq/a/b", "dlq-original-destination:/queue/dlq/a/b")
}
