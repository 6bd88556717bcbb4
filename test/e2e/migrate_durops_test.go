package e2e

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/go-stomp/stomp/v3"

	"github.com/titan-broker/titan/internal/admin"
)

// TestMigrateDurableOperations: the operator sees and deletes durable topic subscriptions
// of the peers' dialects next to the events-store ones — GET /titan/monitor/durable-
// subscriptions and `titan durable list` show an ActiveMQ one (client-id, name, topic,
// queue, selector, messages held) and a RabbitMQ one (named by the id alone); DELETE and
// `titan durable delete ... --client-id` remove one with its queue, refused while a
// connection consumes it.
func TestMigrateDurableOperations(t *testing.T) {
	t.Parallel()
	b := startBroker(t, yamlConfig(""))
	const topic = "/topic/mig/ops"
	c := dialActiveMQ(t, b.stompAddr, "ops-app")
	amq, err := c.Subscribe(topic, stomp.AckClientIndividual,
		stomp.SubscribeOpt.Header("activemq.subscriptionName", "ops"), stomp.SubscribeOpt.Header("selector", "n > 0"))
	requireNoError(t, err, "ActiveMQ durable SUBSCRIBE")
	rabbit, err := c.Subscribe(topic, stomp.AckAuto, stomp.SubscribeOpt.Id("rb"), stomp.SubscribeOpt.Header("durable", "true"))
	requireNoError(t, err, "RabbitMQ durable SUBSCRIBE")
	sendGoStomp(t, c, "/queue/mig-ops-barrier", "barrier") // both SUBSCRIBEs were handled
	unsubscribeGoStomp(t, amq, "detach the ActiveMQ one")
	sendGoStomp(t, c, topic, "one", stomp.SendOpt.Header("n", "1"))
	sendGoStomp(t, c, topic, "two", stomp.SendOpt.Header("n", "2"))

	var l admin.DurableSubscriptionList
	requireMonitor(t, b, http.MethodGet, admin.PathDurableSubscriptions, url.Values{"destination": {topic}}, &l)
	checkEqual(t, 2, len(l.Subscriptions), "durable subscriptions of %s: %+v", topic, l.Subscriptions)
	if len(l.Subscriptions) == 2 {
		a, r := l.Subscriptions[0], l.Subscriptions[1] // sorted: client-id "" first
		if a.ClientID == "" {
			a, r = r, a
		}
		checkEqual(t, admin.DurableSubscription{Node: a.Node, Kind: admin.KindTopic, Group: "default", Destination: topic, Name: "ops",
			ClientID: "ops-app", Queue: "/queue/$durable/ops-app/ops", Selector: "n > 0", Messages: 2, Live: 0}, a, "the ActiveMQ one")
		checkEqual(t, admin.DurableSubscription{Node: r.Node, Kind: admin.KindTopic, Group: "default", Destination: topic, Name: "rb",
			Queue: "/queue/$durable/~/rb", Live: 1}, r, "the RabbitMQ one")
	}
	lst := requireCLIOK(t, b, "durable", "list")
	for _, want := range []string{"ops-app", "/queue/$durable/ops-app/ops", "/queue/$durable/~/rb", "2 msgs", topic} {
		if !strings.Contains(lst.stdout, want) {
			t.Errorf("titan durable list lacks %q:\n%s", want, lst.stdout)
		}
	}

	// The RabbitMQ one is consumed: refused. A wrong topic or client-id: not found.
	q := url.Values{"destination": {topic}, "name": {"rb"}}
	if code, body := opCall(t, b, http.MethodDelete, admin.PathDurableSubscriptions, q, nil); code != http.StatusConflict {
		t.Errorf("DELETE a consumed durable topic subscription: HTTP %d %s, want 409", code, body)
	}
	q = url.Values{"destination": {"/topic/mig/other"}, "name": {"ops"}, "client-id": {"ops-app"}}
	if code, body := opCall(t, b, http.MethodDelete, admin.PathDurableSubscriptions, q, nil); code != http.StatusNotFound {
		t.Errorf("DELETE on another topic: HTTP %d %s, want 404", code, body)
	}
	q = url.Values{"destination": {topic}, "name": {"ops"}}
	if code, body := opCall(t, b, http.MethodDelete, admin.PathDurableSubscriptions, q, nil); code != http.StatusNotFound {
		t.Errorf("DELETE without its client-id: HTTP %d %s, want 404", code, body)
	}
	r := requireCLIOK(t, b, "durable", "delete", topic, "ops", "--client-id", "ops-app")
	checkEqual(t, "deleted durable subscription ops of /topic/mig/ops (group default)\n", r.stdout, "titan durable delete")
	requireMonitor(t, b, http.MethodGet, admin.PathDurableSubscriptions, url.Values{"destination": {topic}}, &l)
	checkEqual(t, 1, len(l.Subscriptions), "durable subscriptions left: %+v", l.Subscriptions)
	if code, body := opCall(t, b, http.MethodGet, "/titan/monitor/queues/messages", url.Values{"destination": {"/queue/$durable/ops-app/ops"}}, nil); code != http.StatusNotFound {
		t.Errorf("browse the deleted subscription's queue: HTTP %d %s, want 404", code, body)
	}
	unsubscribeGoStomp(t, rabbit, "detach the RabbitMQ one")
	requireNoError(t, c.Disconnect())
	requireCLIOK(t, b, "durable", "delete", topic, "rb")
	requireMonitor(t, b, http.MethodGet, admin.PathDurableSubscriptions, nil, &l)
	checkEqual(t, 0, len(l.Subscriptions), "durable subscriptions left: %+v", l.Subscriptions)
}
