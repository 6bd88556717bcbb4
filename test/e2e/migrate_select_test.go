package e2e

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/go-stomp/stomp/v3"
)

// TestMigrateDurableSelector: a durable topic subscription's selector filters what enters
// its queue (Artemis semantics, ActiveMQ's dialect through go-stomp): while the subscriber
// is away, only the messages its selector selects are stored for it — the queue, browsed by
// the operator, holds exactly those — and on return it receives those and nothing else.
func TestMigrateDurableSelector(t *testing.T) {
	t.Parallel()
	b := startBroker(t, yamlConfig(""))
	const topic, name, queue = "/topic/mig/sel/orders", "reds", "/queue/$durable/go-sel/reds"
	subscribe := func(c *stomp.Conn) *stomp.Subscription {
		t.Helper()
		sub, err := c.Subscribe(topic, stomp.AckClientIndividual,
			stomp.SubscribeOpt.Header("activemq.subscriptionName", name), stomp.SubscribeOpt.Header("selector", "color = 'red'"))
		requireNoError(t, err, "durable SUBSCRIBE with a selector")
		sendGoStomp(t, c, "/queue/mig-sel-barrier", "barrier") // the SUBSCRIBE was handled
		return sub
	}
	c := dialActiveMQ(t, b.stompAddr, "go-sel")
	sub := subscribe(c)
	unsubscribeGoStomp(t, sub, "detach")
	requireNoError(t, c.Disconnect())

	p, err := stomp.Dial("tcp", b.stompAddr, stomp.ConnOpt.Host("/"), stomp.ConnOpt.RcvReceiptTimeout(goStompTimeout))
	requireNoError(t, err)
	defer p.MustDisconnect()
	var reds []string
	for i := range 10 {
		color := "blue"
		if i%2 == 0 {
			color = "red"
			reds = append(reds, fmt.Sprint("m", i))
		}
		sendGoStomp(t, p, topic, fmt.Sprint("m", i), stomp.SendOpt.Header("color", color))
	}
	// Every SEND was receipted: what the subscription's queue holds is final.
	var br opBrowse
	requireMonitor(t, b, http.MethodGet, "/titan/monitor/queues/messages", url.Values{"destination": {queue}}, &br)
	checkEqual(t, strings.Join(reds, ","), strings.Join(br.bodies(), ","), "bodies stored in the subscription's queue")

	c = dialActiveMQ(t, b.stompAddr, "go-sel")
	defer c.MustDisconnect()
	sub = subscribe(c)
	var got []string
	for range reds {
		m := recvGoStomp(t, sub, "a selected message")
		got = append(got, string(m.Body))
		requireNoError(t, c.Ack(m))
	}
	checkEqual(t, strings.Join(reds, ","), strings.Join(got, ","), "bodies received on return")
	sendGoStomp(t, p, topic, "late-blue", stomp.SendOpt.Header("color", "blue"))
	sendGoStomp(t, p, topic, "late-red", stomp.SendOpt.Header("color", "red"))
	m := recvGoStomp(t, sub, "the next selected message")
	checkEqual(t, "late-red", string(m.Body), "next body")
	requireNoError(t, c.Ack(m))
	sendGoStomp(t, c, "/queue/mig-sel-barrier", "barrier") // the ACK was handled
	var after opBrowse
	requireMonitor(t, b, http.MethodGet, "/titan/monitor/queues/messages", url.Values{"destination": {queue}}, &after)
	checkEqual(t, 0, len(after.Messages), "messages left in the queue (late-blue never entered): %v", after.bodies())
}

// TestMigrateRabbitRPC: a RabbitMQ application's RPC over a queue with
// reply-to:/temp-queue/<name> (stomp.py): the responder, on another connection, receives a
// reply-to that reaches the requester (the owner-qualified /temp-queue/<session>/<name>,
// as RabbitMQ hands out a /reply-queue/), and its answer arrives on the requester's
// /temp-queue/<name>, the name the requester used.
func TestMigrateRabbitRPC(t *testing.T) {
	t.Parallel()
	b := startBroker(t, yamlConfig(""))
	var out struct {
		SeenReplyTo      string `json:"seen_reply_to"`
		ReplyDestination string `json:"reply_destination"`
		ReplyBody        string `json:"reply_body"`
	}
	pyMigrate.run(t, b, "rabbit_rpc", map[string]any{"dest": "/queue/mig-rpc", "name": "answers"}, &out)
	if !strings.HasPrefix(out.SeenReplyTo, "/temp-queue/") || !strings.HasSuffix(out.SeenReplyTo, "/answers") || out.SeenReplyTo == "/temp-queue/answers" {
		t.Errorf("reply-to the responder saw = %q, want /temp-queue/<session>/answers", out.SeenReplyTo)
	}
	checkEqual(t, "/temp-queue/answers", out.ReplyDestination, "reply destination")
	checkEqual(t, "re:ping", out.ReplyBody, "reply body")
}
