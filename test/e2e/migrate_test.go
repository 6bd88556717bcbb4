package e2e

import (
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/go-stomp/stomp/v3"
	"github.com/go-stomp/stomp/v3/frame"
)

// pyMigrate runs clients/pymigrate.py (python3-stomp with RabbitMQ's headers, issue 26).
var pyMigrate = stompClient{
	name:  "python3-stomp",
	short: "py",
	cmd: func(scenario, args string) (string, []string) {
		return systemPython, []string{filepath.Join("clients", "pymigrate.py"), scenario, args}
	},
	err: func() error { return pythonErr },
}

// TestMigrateRabbitMQ: an application written for RabbitMQ's STOMP plugin, unchanged, with
// stomp.py against a real titan: a durable topic subscription keeps all 100 messages
// published while it is detached, two connections with one id share it, UNSUBSCRIBE
// durable:true deletes it, and the control headers Titan cannot honour are refused by name.
func TestMigrateRabbitMQ(t *testing.T) {
	t.Parallel()
	b := startBroker(t, yamlConfig(""))
	c := pyMigrate
	t.Run("durable subscription keeps what was published while away", func(t *testing.T) {
		var out struct {
			Bodies       []string `json:"bodies"`
			Destinations []string `json:"destinations"`
			Total        int      `json:"total"`
		}
		c.run(t, b, "rabbit_durable", map[string]any{"dest": "/topic/mig.py.orders", "id": "billing", "count": 100}, &out)
		want := make([]string, 100)
		for i := range want {
			want[i] = fmt.Sprint("m", i)
		}
		checkEqual(t, true, slices.Equal(want, out.Bodies), "bodies in order: %v", out.Bodies)
		checkEqual(t, 100, out.Total, "messages received in all (none twice)")
		checkEqual(t, true, slices.Equal([]string{"/topic/mig/py/orders"}, out.Destinations), "MESSAGE destination: %v", out.Destinations)
	})
	t.Run("two connections with one id share it", func(t *testing.T) {
		var out struct{ A, B []string }
		c.run(t, b, "rabbit_shared", map[string]any{"dest": "/exchange/amq.topic/mig.py.shared", "id": "shared", "count": 100}, &out)
		all := append(slices.Clone(out.A), out.B...)
		slices.Sort(all)
		checkEqual(t, 100, len(all), "messages in all: a %d, b %d", len(out.A), len(out.B))
		checkEqual(t, len(all), len(slices.Compact(all)), "no message to both")
		checkEqual(t, true, len(out.A) > 0 && len(out.B) > 0, "both got some: a %d, b %d", len(out.A), len(out.B))
	})
	t.Run("UNSUBSCRIBE durable:true deletes it", func(t *testing.T) {
		var out struct{ Bodies []string }
		c.run(t, b, "rabbit_delete", map[string]any{"dest": "/topic/mig.py.del", "id": "gone"}, &out)
		checkEqual(t, true, slices.Equal([]string{"after"}, out.Bodies), "bodies after re-creating: %v", out.Bodies)
	})
	t.Run("refused headers are named", func(t *testing.T) {
		type tc struct {
			Command string            `json:"command"`
			Dest    string            `json:"dest"`
			Headers map[string]string `json:"headers"`
			want    string
		}
		cases := []tc{
			{"SUBSCRIBE", "/queue/mig-py", map[string]string{"x-queue-name": "q"}, "unsupported header x-queue-name"},
			{"SUBSCRIBE", "/queue/mig-py", map[string]string{"x-message-ttl": "1000"}, "unsupported header x-message-ttl"},
			{"SUBSCRIBE", "/queue/mig-py", map[string]string{"x-expires": "1000"}, "unsupported header x-expires"},
			{"SUBSCRIBE", "/queue/mig-py", map[string]string{"x-dead-letter-exchange": "dlx"}, "unsupported header x-dead-letter-exchange"},
			{"SUBSCRIBE", "/queue/mig-py", map[string]string{"auto-delete": "true"}, "unsupported header auto-delete"},
			{"SUBSCRIBE", "/queue/mig-py", map[string]string{"exclusive": "true"}, "unsupported header exclusive"},
			{"SUBSCRIBE", "/topic/mig-py", map[string]string{"durable": "true", "auto-delete": "true"}, "unsupported header auto-delete"},
			{"SEND", "/queue/mig-py", map[string]string{"x-queue-name": "q"}, "unsupported header x-queue-name"},
			{"SEND", "/exchange/amq.fanout/x", map[string]string{}, "unsupported exchange"},
			{"SUBSCRIBE", "/queue/mig-py", map[string]string{"x-max-priority": "10"}, "RECEIPT"},
			{"SEND", "/queue/mig-py", map[string]string{"persistent": "false", "x-message-ttl": "60000"}, "RECEIPT"},
			{"SEND", "/amq/queue/mig-py", map[string]string{"x-app": "kept"}, "RECEIPT"},
			{"SUBSCRIBE", "/amq/queue/mig-py", map[string]string{}, "RECEIPT"}, // it exists now
			// /amq/queue/ addresses an existing queue, as in RabbitMQ (NOT_FOUND - no queue).
			{"SEND", "/amq/queue/mig-py-none", map[string]string{}, "no queue 'mig-py-none'"},
			{"SUBSCRIBE", "/amq/queue/mig-py-none", map[string]string{}, "no queue 'mig-py-none'"},
			{"SEND", "/queue/mig-py-none", map[string]string{}, "RECEIPT"}, // /queue/ creates it
			{"SUBSCRIBE", "/amq/queue/mig-py-none", map[string]string{}, "RECEIPT"},
		}
		var out struct{ Answers []string }
		c.run(t, b, "refused", map[string]any{"cases": cases}, &out)
		for i, x := range cases {
			if i < len(out.Answers) {
				checkEqual(t, x.want, out.Answers[i], "%s %s %v", x.Command, x.Dest, x.Headers)
			}
		}
		checkEqual(t, len(cases), len(out.Answers), "answers")
	})
}

// TestMigrateTopicWildcards: RabbitMQ's topic-exchange binding keys and Artemis's address
// wildcards, as stomp.py applications spell them, against a real titan: '#' takes zero or
// more words in any position ("a.#" receives "a"), '*' exactly one, while Titan's own '>'
// keeps its meaning (one or more, last only).
func TestMigrateTopicWildcards(t *testing.T) {
	t.Parallel()
	b := startBroker(t, yamlConfig(""))
	bindings := []string{
		"/exchange/amq.topic/a.#",
		"/exchange/amq.topic/#.eu",
		"/exchange/amq.topic/a.#.c",
		"/exchange/amq.topic/#",
		"/exchange/amq.topic/*.eu",
		"/exchange/amq.topic/#.eu.#",
		"topic://a.#", // Artemis
		"/topic/a.>",  // Titan
	}
	keys := []string{"a", "a.b", "a.b.c", "eu", "x.eu", "x.y.eu.z"}
	sends := make([]string, len(keys))
	for i, k := range keys {
		sends[i] = "/exchange/amq.topic/" + k
	}
	want := [][]string{
		{"a", "a.b", "a.b.c"},
		{"eu", "x.eu"},
		{"a.b.c"},
		keys,
		{"x.eu"},
		{"eu", "x.eu", "x.y.eu.z"},
		{"a", "a.b", "a.b.c"},
		{"a.b", "a.b.c"},
	}
	var out struct{ Received [][]string }
	pyMigrate.run(t, b, "rabbit_topics", map[string]any{"bindings": bindings, "keys": sends}, &out)
	checkEqual(t, len(want), len(out.Received), "subscriptions reported")
	for i := range min(len(want), len(out.Received)) {
		checkEqual(t, true, slices.Equal(want[i], out.Received[i]), "%s received %v, want %v", bindings[i], out.Received[i], want[i])
	}
}

// dialActiveMQ connects go-stomp with a CONNECT client-id, as an ActiveMQ application does.
func dialActiveMQ(t *testing.T, addr, clientID string) *stomp.Conn {
	t.Helper()
	c, err := stomp.Dial("tcp", addr, stomp.ConnOpt.AcceptVersion(stomp.V12), stomp.ConnOpt.Host("/"),
		stomp.ConnOpt.RcvReceiptTimeout(goStompTimeout), stomp.ConnOpt.UnsubscribeReceiptTimeout(goStompTimeout),
		stomp.ConnOpt.Header("client-id", clientID))
	requireNoError(t, err, "go-stomp dial with client-id")
	return c
}

// unsubscribeGoStomp sends UNSUBSCRIBE through go-stomp and requires the broker's RECEIPT.
// go-stomp v3.1.3 can miss the wake-up for a RECEIPT it did handle: its closeChannel
// broadcasts the subscription's sync.Cond without holding the cond's lock, so a
// Broadcast that lands before Unsubscribe's waiter goroutine reaches Wait is lost and
// Unsubscribe sleeps out its receipt timeout on a closed subscription (CI saw this under
// load). The two cases differ in the subscription's channel: after a handled RECEIPT it
// is closed with no error message in it, after a RECEIPT that never came go-stomp puts an error
// message in it and leaves it open.
func unsubscribeGoStomp(t *testing.T, sub *stomp.Subscription, what string, opts ...func(*frame.Frame) error) {
	t.Helper()
	err := sub.Unsubscribe(opts...)
	if err == nil {
		return
	}
	if !errors.Is(err, &stomp.ErrUnsubscribeReceiptTimeout) {
		t.Fatalf("%s: UNSUBSCRIBE: %v", what, err)
	}
	for {
		select {
		case m, open := <-sub.C:
			if !open {
				return // the RECEIPT closed the subscription; only go-stomp's wake-up was lost
			}
			if m.Err != nil {
				t.Fatalf("%s: no RECEIPT for UNSUBSCRIBE: %v", what, m.Err)
			}
		case <-time.After(goStompTimeout):
			t.Fatalf("%s: no RECEIPT for UNSUBSCRIBE within %s", what, goStompTimeout)
		}
	}
}

// subscribeDurableActiveMQ subscribes with activemq.subscriptionName and proves the
// SUBSCRIBE was handled with a receipted SEND on the same connection (frames of a connection
// are handled in order; go-stomp's SUBSCRIBE does not wait for a RECEIPT).
func subscribeDurableActiveMQ(t *testing.T, c *stomp.Conn, topic, name string) *stomp.Subscription {
	t.Helper()
	sub, err := c.Subscribe(topic, stomp.AckClientIndividual,
		stomp.SubscribeOpt.Header("activemq.subscriptionName", name), stomp.SubscribeOpt.Header("activemq.prefetchSize", "10"))
	requireNoError(t, err, "durable SUBSCRIBE")
	sendGoStomp(t, c, "/queue/mig-go-barrier", "barrier")
	return sub
}

// TestMigrateActiveMQGo: a go-stomp application with ActiveMQ 5's durable subscription
// (client-id + activemq.subscriptionName, activemq.prefetchSize) keeps what is published
// while it is away, and UNSUBSCRIBE naming it deletes it.
func TestMigrateActiveMQGo(t *testing.T) {
	t.Parallel()
	b := startBroker(t, yamlConfig(""))
	const topic, name, n = "topic://mig.go.orders", "go-billing", 50
	c := dialActiveMQ(t, b.stompAddr, "go-app")
	sub := subscribeDurableActiveMQ(t, c, topic, name)
	unsubscribeGoStomp(t, sub, "detach")
	requireNoError(t, c.Disconnect())

	p, err := stomp.Dial("tcp", b.stompAddr, stomp.ConnOpt.Host("/"), stomp.ConnOpt.RcvReceiptTimeout(goStompTimeout))
	requireNoError(t, err)
	defer p.MustDisconnect()
	for i := range n {
		sendGoStomp(t, p, "/topic/mig/go/orders", fmt.Sprint("a", i))
	}
	c = dialActiveMQ(t, b.stompAddr, "go-app")
	defer c.MustDisconnect()
	sub = subscribeDurableActiveMQ(t, c, topic, name)
	var got []string
	for i := range n {
		m := recvGoStomp(t, sub, fmt.Sprintf("durable message %d", i))
		checkEqual(t, "/topic/mig/go/orders", m.Destination, "MESSAGE destination")
		got = append(got, string(m.Body))
		requireNoError(t, c.Ack(m))
	}
	want := make([]string, n)
	for i := range want {
		want[i] = fmt.Sprint("a", i)
	}
	checkEqual(t, true, slices.Equal(want, got), "bodies %v", got)
	unsubscribeGoStomp(t, sub, "UNSUBSCRIBE deleting it", stomp.SubscribeOpt.Header("activemq.subscriptionName", name))
	// Deleted: a SUBSCRIBE with the name starts a fresh, empty subscription.
	sendGoStomp(t, p, "/topic/mig/go/orders", "while-deleted")
	sub = subscribeDurableActiveMQ(t, c, topic, name)
	sendGoStomp(t, p, "/topic/mig/go/orders", "fresh")
	checkEqual(t, "fresh", string(recvGoStomp(t, sub, "first message of the fresh subscription").Body), "first body")
}

// TestDurableTopicKill9: a durable topic subscription and every message a topic SEND's
// RECEIPT confirmed for it survive SIGKILL; after the restart the subscription exists and
// keeps what is published before anyone attaches. 0 receipted messages lost.
func TestDurableTopicKill9(t *testing.T) {
	t.Parallel()
	node := newTitanNode(t, pebbleConfig(filepath.Join(t.TempDir(), "data"), ""))
	p := node.start()
	const topic, name = "/topic/mig/crash", "crash-sub"
	c := dialActiveMQ(t, p.stompAddrs[0], "crash-app")
	sub := subscribeDurableActiveMQ(t, c, topic, name)
	unsubscribeGoStomp(t, sub, "detach")
	requireNoError(t, c.Disconnect())

	prod, err := stomp.Dial("tcp", p.stompAddrs[0], stomp.ConnOpt.Host("/"), stomp.ConnOpt.RcvReceiptTimeout(goStompTimeout))
	requireNoError(t, err)
	receipted := map[string]bool{}
	done := make(chan struct{})
	var mu sync.Mutex
	go func() {
		defer close(done)
		for i := 0; ; i++ {
			body := fmt.Sprint("k", i)
			if prod.Send(topic, "text/plain", []byte(body), stomp.SendOpt.Receipt) != nil {
				return
			}
			mu.Lock()
			receipted[body] = true
			mu.Unlock()
		}
	}()
	eventually(t, 30*time.Second, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(receipted) >= 300
	}, "300 receipted topic SENDs before the kill")
	node.kill()
	<-done
	mu.Lock()
	before := len(receipted)
	mu.Unlock()

	p = node.start()
	prod, err = stomp.Dial("tcp", p.stompAddrs[0], stomp.ConnOpt.Host("/"), stomp.ConnOpt.RcvReceiptTimeout(goStompTimeout))
	requireNoError(t, err)
	defer prod.MustDisconnect()
	for i := range 10 { // published after the restart, before anyone attaches
		sendGoStomp(t, prod, topic, fmt.Sprint("after", i))
		receipted[fmt.Sprint("after", i)] = true
	}
	c = dialActiveMQ(t, p.stompAddrs[0], "crash-app")
	defer c.MustDisconnect()
	sub = subscribeDurableActiveMQ(t, c, topic, name)
	got := map[string]bool{}
	lost := func() int {
		n := 0
		for b := range receipted {
			if !got[b] {
				n++
			}
		}
		return n
	}
	for lost() > 0 {
		m := recvGoStomp(t, sub, fmt.Sprintf("durable message (%d receipted of %d still missing)", lost(), len(receipted)))
		got[string(m.Body)] = true
		requireNoError(t, c.Ack(m))
	}
	t.Logf("%d receipted before SIGKILL, 10 after the restart: 0 lost (%d delivered)", before, len(got))
}

// jsMigrate runs clients/jsmigrate.mjs (stompjs with ActiveMQ's headers, issue 26).
var jsMigrate = stompClient{
	name:  "stompjs",
	short: "js",
	cmd: func(scenario, args string) (string, []string) {
		return "node", []string{filepath.Join("clients", "jsmigrate.mjs"), scenario, args}
	},
	err: func() error { return nodeErr },
}

// TestMigrateActiveMQStompJS: a stompjs application with ActiveMQ 5's durable subscription
// (CONNECT client-id, activemq.subscriptionName, activemq.prefetchSize) over topic://.
func TestMigrateActiveMQStompJS(t *testing.T) {
	t.Parallel()
	b := startBroker(t, yamlConfig(""))
	var out struct {
		Bodies            []string `json:"bodies"`
		Destinations      []string `json:"destinations"`
		UnsubscribeErrors []string `json:"unsubscribe_errors"`
		AfterDelete       []string `json:"after_delete"`
	}
	jsMigrate.run(t, b, "activemq_durable", map[string]any{"topic": "topic://mig.js.orders", "publish_to": "/topic/mig/js/orders",
		"client_id": "js-app", "name": "js-billing", "count": 40}, &out)
	want := make([]string, 40)
	for i := range want {
		want[i] = fmt.Sprint("j", i)
	}
	checkEqual(t, true, slices.Equal(want, out.Bodies), "bodies kept while away: %v", out.Bodies)
	checkEqual(t, true, slices.Equal([]string{"/topic/mig/js/orders"}, out.Destinations), "destinations %v", out.Destinations)
	checkEqual(t, 0, len(out.UnsubscribeErrors), "UNSUBSCRIBE errors %v", out.UnsubscribeErrors)
	checkEqual(t, true, slices.Equal([]string{"fresh"}, out.AfterDelete), "after the delete: %v", out.AfterDelete)
	var miss struct{ Errors []string }
	jsMigrate.run(t, b, "missing_client_id", map[string]any{"topic": "/topic/mig/js/x"}, &miss)
	checkEqual(t, true, slices.Equal([]string{"missing client-id"}, miss.Errors), "without client-id: %v", miss.Errors)
}

// phpMigrate runs clients/phpmigrate.php (PECL stomp with Artemis's headers, issue 26).
var phpMigrate = stompClient{
	name:  "pecl-stomp",
	short: "php",
	cmd: func(scenario, args string) (string, []string) {
		return "php", []string{filepath.Join("clients", "phpmigrate.php"), scenario, args}
	},
	err: func() error { return phpErr },
}

// TestMigrateArtemisPHP: a PHP (PECL stomp) application with Artemis's durable subscription
// (CONNECT client-id, durable-subscription-name or durable-subscriber-name), and Artemis's
// consumer headers Titan refuses by name.
func TestMigrateArtemisPHP(t *testing.T) {
	t.Parallel()
	b := startBroker(t, yamlConfig(""))
	for i, hdr := range []string{"durable-subscription-name", "durable-subscriber-name"} {
		t.Run(hdr, func(t *testing.T) {
			topic := fmt.Sprintf("/topic/mig/php/%d", i)
			var out struct {
				Subscribed, Detached, Deleted bool
				Bodies, Destinations          []string
				AfterDelete                   []string `json:"after_delete"`
			}
			phpMigrate.run(t, b, "artemis_durable", map[string]any{"topic": topic, "client_id": "php-app", "name": "php-sub",
				"header": hdr, "count": 30}, &out)
			checkEqual(t, true, out.Subscribed && out.Detached && out.Deleted, "receipts: %+v", out)
			want := make([]string, 30)
			for i := range want {
				want[i] = fmt.Sprint("p", i)
			}
			checkEqual(t, true, slices.Equal(want, out.Bodies), "kept while away: %v", out.Bodies)
			checkEqual(t, true, slices.Equal([]string{topic}, out.Destinations), "destinations %v", out.Destinations)
			checkEqual(t, true, slices.Equal([]string{"fresh"}, out.AfterDelete), "after the delete: %v", out.AfterDelete)
		})
	}
	var out struct{ Errors []string }
	phpMigrate.run(t, b, "refused", map[string]any{"topic": "/topic/mig/php/x", "headers": map[string]string{"exclusive": "true", "no-local": "true"}}, &out)
	slices.Sort(out.Errors)
	checkEqual(t, true, slices.Equal([]string{"unsupported header exclusive", "unsupported header no-local"}, out.Errors), "errors %v", out.Errors)
}
