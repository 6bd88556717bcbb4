package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/titan-broker/titan/client"
)

// The operator routes beside Titan's monitor paths and their CLI commands (issue 14):
// connections (list, close), subscriptions, events-store logs with position and lag, and
// purge, browse and re-drive of queues, against a real titan driven by the Go client over TCP.

// opCall sends method path?query to b's monitor API and decodes the JSON answer into out
// (when not nil); it returns the status and the raw body.
func opCall(t *testing.T, b *broker, method, path string, query url.Values, out any) (int, []byte) {
	t.Helper()
	u := monitorURL(b) + path
	if len(query) > 0 {
		u += "?" + query.Encode()
	}
	req, err := http.NewRequest(method, u, nil)
	requireNoError(t, err)
	resp, err := httpClient.Do(req)
	requireNoError(t, err, "%s %s", method, u)
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	if out != nil && resp.StatusCode < 300 {
		requireNoError(t, json.Unmarshal(data, out), "decoding %s", data)
	}
	return resp.StatusCode, data
}

func requireMonitor(t *testing.T, b *broker, method, path string, query url.Values, out any) {
	t.Helper()
	if code, data := opCall(t, b, method, path, query, out); code != http.StatusOK {
		t.Fatalf("%s %s?%s: HTTP %d: %s", method, path, query.Encode(), code, data)
	}
}

func cliJSON(t *testing.T, b *broker, out any, args ...string) {
	t.Helper()
	r := requireCLIOK(t, b, append([]string{"-o", "json"}, args...)...)
	requireNoError(t, json.Unmarshal([]byte(r.stdout), out), "titan %v printed %q", args, r.stdout)
}

type opSubscription struct {
	Node, Connection, ID, Group, Destination, Pattern, Ack, DurableName string
	Pending                                                             int
	Delivered                                                           uint64
}

type opConnection struct {
	Node, ID, RemoteAddr, User, Version string
	HeartBeatSendMs                     int64
	Subscriptions                       []opSubscription
}

type opBrowse struct {
	Node, Group, Destination string
	Messages                 []struct {
		MessageID     string            `json:"messageId"`
		Headers       map[string]string `json:"headers"`
		Body          *string           `json:"body"`
		DeliveryCount int               `json:"deliveryCount"`
	}
}

func (r opBrowse) bodies() []string {
	out := make([]string, len(r.Messages))
	for i, m := range r.Messages {
		if m.Body != nil {
			out[i] = *m.Body
		}
	}
	return out
}

func dial(t *testing.T, b *broker, opts ...client.Option) *client.Client {
	t.Helper()
	c, err := client.Dial(context.Background(), b.stompAddr, opts...)
	requireNoError(t, err, "dialing titan")
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func sendN(t *testing.T, c *client.Client, destination string, bodies ...string) {
	t.Helper()
	for _, body := range bodies {
		_, err := c.Send(context.Background(), "", destination, []byte(body), client.WithHeader("k", "v-"+body))
		requireNoError(t, err, "SEND %s %s", destination, body)
	}
}

func TestMonitorQueueBrowsePurgeRedrive(t *testing.T) {
	t.Parallel()
	b := startBroker(t, yamlConfigWith("", `  address-settings:
    - {match: "jobs", max-deliveries: 1}
`))
	c := dial(t, b)
	sendN(t, c, "/queue/jobs", "m1", "m2", "m3")

	// Browse, over HTTP and the CLI, consumes nothing.
	var br opBrowse
	requireMonitor(t, b, http.MethodGet, "/titan/monitor/queues/messages", url.Values{"destination": {"/queue/jobs"}}, &br)
	checkEqual(t, "m1,m2,m3", strings.Join(br.bodies(), ","), "browsed bodies")
	checkEqual(t, "v-m1", br.Messages[0].Headers["k"], "browsed header")
	if br.Node == "" {
		t.Fatalf("browse answer has no node: %+v", br)
	}
	var brCLI opBrowse
	cliJSON(t, b, &brCLI, "queue", "browse", "/queue/jobs", "--limit", "2")
	checkEqual(t, "m1,m2", strings.Join(brCLI.bodies(), ","), "CLI browse --limit 2")
	r := requireCLIOK(t, b, "queue", "browse", "/queue/jobs")
	if !strings.Contains(r.stdout, `"m3"`) || !strings.Contains(r.stdout, "3 messages shown from queue /queue/jobs (group default)") {
		t.Fatalf("queue browse table: %q", r.stdout)
	}
	checkEqual(t, 3, requireQueue(t, b, "/queue/jobs", "").Size, "queue size after browsing")

	// A consumer that NACKs everything dead-letters it (max-deliveries 1) to /queue/DLQ.jobs.
	nacker := dial(t, b)
	sub, err := nacker.Subscribe("", "/queue/jobs", func(m *client.Message) { _ = m.Nack() }, client.WithAck(client.AckClientIndividual))
	requireNoError(t, err)
	eventuallyQueue(t, b, "/queue/DLQ.jobs", "3 dead letters", func(q queueStat) bool { return q.Size == 3 })
	requireNoError(t, sub.Unsubscribe())
	var dl opBrowse
	requireMonitor(t, b, http.MethodGet, "/titan/monitor/queues/messages", url.Values{"destination": {"/queue/DLQ.jobs"}}, &dl)
	checkEqual(t, "/queue/jobs", dl.Messages[0].Headers["dlq-original-destination"], "dead letter header")

	// Re-drive moves them back, with the dead-letter headers left behind.
	var rd struct {
		Moved int
		From  string
		To    map[string]int
	}
	cliJSON(t, b, &rd, "queue", "redrive", "/queue/DLQ.jobs")
	checkEqual(t, 3, rd.Moved, "redrive moved")
	checkEqual(t, 3, rd.To["/queue/jobs"], "redrive to /queue/jobs")
	checkEqual(t, 0, requireQueue(t, b, "/queue/DLQ.jobs", "").Size, "DLQ size after redrive")
	requireMonitor(t, b, http.MethodGet, "/titan/monitor/queues/messages", url.Values{"destination": {"/queue/jobs"}}, &br)
	checkEqual(t, "m1,m2,m3", strings.Join(br.bodies(), ","), "bodies back on /queue/jobs")
	if _, ok := br.Messages[0].Headers["dlq-original-destination"]; ok || br.Messages[0].Headers["k"] != "v-m1" {
		t.Fatalf("re-driven message headers: %v", br.Messages[0].Headers)
	}
	// Redrive named by the original queue, over HTTP: nothing left to move.
	requireMonitor(t, b, http.MethodPost, "/titan/monitor/queues/redrive", url.Values{"destination": {"/queue/jobs"}}, &rd)
	checkEqual(t, 0, rd.Moved, "second redrive")
	checkEqual(t, "/queue/DLQ/jobs", rd.From, "redrive named by the original queue drains its DLQ (canonical form)")

	// Purge over HTTP, then over the CLI; the queue stays.
	var pr struct {
		Node   string
		Purged int
	}
	requireMonitor(t, b, http.MethodPost, "/titan/monitor/queues/purge", url.Values{"destination": {"/queue/jobs"}}, &pr)
	checkEqual(t, 3, pr.Purged, "purged")
	checkEqual(t, 0, requireQueue(t, b, "/queue/jobs", "").Size, "size after purge")
	sendN(t, c, "/queue/jobs", "m4")
	r = requireCLIOK(t, b, "queue", "purge", "/queue/jobs")
	checkEqual(t, "purged 1 message from queue /queue/jobs (group default)\n", r.stdout, "queue purge output")
	cliJSON(t, b, &pr, "queue", "purge", "/queue/jobs")
	checkEqual(t, 0, pr.Purged, "purging an empty queue")

	// Errors: clear codes, and the CLI says what happened.
	code, data := opCall(t, b, http.MethodPost, "/titan/monitor/queues/purge", url.Values{"destination": {"/topic/prices"}}, nil)
	if code != http.StatusBadRequest || !strings.Contains(string(data), "unsupported_pattern") {
		t.Fatalf("purge of an events destination: HTTP %d %s", code, data)
	}
	code, data = opCall(t, b, http.MethodGet, "/titan/monitor/queues/messages", url.Values{"destination": {"/queue/none"}}, nil)
	if code != http.StatusNotFound || !strings.Contains(string(data), "queue_not_found") {
		t.Fatalf("browse of a missing queue: HTTP %d %s", code, data)
	}
	requireCLIFail(t, b, "titan: no queue /queue/none (see `titan queue list`)\n", "queue", "purge", "/queue/none")
}

func TestMonitorConnectionsSubscriptionsAndLogs(t *testing.T) {
	t.Parallel()
	b := startBroker(t, yamlConfig(""))
	c := dial(t, b, client.WithHeartBeat(0, 2*time.Second))
	sendN(t, c, "/events-store/audit", "e1", "e2", "e3", "e4", "e5")

	var mu sync.Mutex
	var got []string
	reader := dial(t, b)
	_, err := reader.Subscribe("", "/events-store/audit", func(m *client.Message) {
		mu.Lock()
		got = append(got, string(m.Body))
		mu.Unlock()
	}, client.WithAck(client.AckClientIndividual), client.WithStartPosition("first"), client.WithDurableName("d1"), client.WithPrefetch(10))
	requireNoError(t, err)
	_, err = reader.Subscribe("", "/queue/work", func(*client.Message) {}, client.WithAck(client.AckClient))
	requireNoError(t, err)
	eventually(t, 10*time.Second, func() bool { mu.Lock(); defer mu.Unlock(); return len(got) == 5 }, "5 events-store messages delivered")

	// Connections: both clients, with subscriptions and pending counts.
	var cl struct {
		Node        string
		Connections []opConnection
	}
	cliJSON(t, b, &cl, "connection", "list")
	if len(cl.Connections) != 2 || cl.Node == "" {
		t.Fatalf("connection list: %+v", cl)
	}
	var rc opConnection
	for _, cn := range cl.Connections {
		if len(cn.Subscriptions) == 2 {
			rc = cn
		}
	}
	if rc.ID == "" || rc.Version != "1.2" || rc.Node != cl.Node {
		t.Fatalf("no connection with 2 subscriptions: %+v", cl)
	}
	log := rc.Subscriptions[0]
	if log.Destination != "/events-store/audit" || log.Pending != 5 || log.DurableName != "d1" || log.Connection != rc.ID {
		t.Fatalf("events-store subscription: %+v", log)
	}
	var hb opConnection
	for _, cn := range cl.Connections {
		if cn.ID != rc.ID {
			hb = cn
		}
	}
	checkEqual(t, int64(2000), hb.HeartBeatSendMs, "Titan's heart-beat interval to a client asking for 2 s")
	r := requireCLIOK(t, b, "connection", "list")
	if !strings.Contains(r.stdout, rc.ID) || !strings.Contains(r.stdout, "/events-store/audit (5 pending)") {
		t.Fatalf("connection list table: %q", r.stdout)
	}

	// Subscriptions, filtered by destination.
	var sl struct{ Subscriptions []opSubscription }
	requireMonitor(t, b, http.MethodGet, "/titan/monitor/subscriptions", url.Values{"destination": {"/queue/work"}}, &sl)
	if len(sl.Subscriptions) != 1 || sl.Subscriptions[0].Ack != "client" || sl.Subscriptions[0].Pattern != "queues" {
		t.Fatalf("subscriptions of /queue/work: %+v", sl)
	}

	// Logs: size, sequences, and the durable subscription's position and lag (nothing acked).
	var ll struct {
		Logs []struct {
			Node, Destination           string
			Messages                    int64
			FirstSequence, LastSequence uint64
			Subscriptions               []struct {
				DurableName         string
				Delivered, Position uint64
				Lag                 uint64
			}
		}
	}
	requireMonitor(t, b, http.MethodGet, "/titan/monitor/logs", nil, &ll)
	if len(ll.Logs) != 1 || ll.Logs[0].Destination != "/events-store/audit" || ll.Logs[0].Messages != 5 || ll.Logs[0].LastSequence != 5 {
		t.Fatalf("logs: %+v", ll)
	}
	s := ll.Logs[0].Subscriptions
	if len(s) != 1 || s[0].DurableName != "d1" || s[0].Delivered != 5 || s[0].Position != 0 || s[0].Lag != 5 {
		t.Fatalf("log subscription: %+v", s)
	}

	// Close the reader's connection from the CLI: it is gone and the client sees it.
	r = requireCLIOK(t, b, "connection", "close", rc.ID)
	checkEqual(t, fmt.Sprintf("closed connection %s\n", rc.ID), r.stdout, "connection close output")
	eventually(t, 10*time.Second, func() bool {
		select {
		case <-reader.Done():
			return true
		default:
			return false
		}
	}, "the closed client notices")
	eventually(t, 10*time.Second, func() bool {
		var now struct{ Connections []opConnection }
		requireMonitor(t, b, http.MethodGet, "/titan/monitor/connections", nil, &now)
		return len(now.Connections) == 1
	}, "one connection left")
	code, data := opCall(t, b, http.MethodDelete, "/titan/monitor/connections", url.Values{"id": {rc.ID}}, nil)
	if code != http.StatusNotFound || !strings.Contains(string(data), "connection_not_found") {
		t.Fatalf("closing a closed connection: HTTP %d %s", code, data)
	}
	requireCLIFail(t, b, "titan: no connection nope (see `titan connection list`)\n", "connection", "close", "nope")
}

// TestConnectionCloseSendsError: `titan connection close` tells the client why before the
// socket closes: an ERROR frame whose message header is "connection closed by an operator"
// (STOMP 1.2: the server sends ERROR, then closes), then EOF.
func TestConnectionCloseSendsError(t *testing.T) {
	t.Parallel()
	b := startBroker(t, yamlConfig(""))
	c := dialRaw(t, b)
	connected := c.connect()
	id, ok := connected.get("session")
	if !ok || id == "" {
		t.Fatalf("CONNECTED without a session header: %s", connected)
	}
	r := requireCLIOK(t, b, "connection", "close", id)
	checkEqual(t, fmt.Sprintf("closed connection %s\n", id), r.stdout, "connection close output")
	f, err := c.readFrame(10 * time.Second)
	requireNoError(t, err, "reading the frame before the close")
	if msg, _ := f.get("message"); f.command != "ERROR" || msg != "connection closed by an operator" {
		t.Fatalf("got %s, want ERROR message:connection closed by an operator", f)
	}
	if !strings.Contains(string(f.body), "titan connection close") {
		t.Errorf("ERROR body %q does not say how the connection was closed", f.body)
	}
	if _, err := c.expectClosed(10 * time.Second); err != nil {
		t.Fatalf("after the ERROR: %v", err)
	}
}

// TestQueueListSettingsInForce: the queue list shows the settings in force, not the unset
// zero values: a queues-pattern queue with no address setting dead-letters after 10
// deliveries and stalls a BLOCKed producer for 30000 ms (README "Address settings").
func TestQueueListSettingsInForce(t *testing.T) {
	t.Parallel()
	b := startBroker(t, yamlConfig(""))
	c := dialRaw(t, b)
	c.connect()
	requireReceipt(t, sendExpect(t, c, "/queue/in-force", "x"), "SEND")
	var ql struct {
		Queues []struct {
			Destination string
			Settings    struct {
				MaxDeliveries     int    `json:"maxDeliveries"`
				BlockTimeoutMs    int64  `json:"blockTimeoutMs"`
				AddressFullPolicy string `json:"addressFullPolicy"`
			}
		}
	}
	requireMonitor(t, b, http.MethodGet, "/titan/monitor/queues", nil, &ql)
	if len(ql.Queues) != 1 {
		t.Fatalf("queues: %+v", ql)
	}
	if s := ql.Queues[0].Settings; s.MaxDeliveries != 10 || s.BlockTimeoutMs != 30000 || s.AddressFullPolicy != "BLOCK" {
		t.Fatalf("settings of %s: %+v; want maxDeliveries 10, blockTimeoutMs 30000, BLOCK", ql.Queues[0].Destination, s)
	}
	r := requireCLIOK(t, b, "queue", "list", "-o", "json")
	if !strings.Contains(r.stdout, `"blockTimeoutMs": 30000`) || !strings.Contains(r.stdout, `"maxDeliveries": 10`) {
		t.Errorf("titan queue list -o json does not show the settings in force:\n%s", r.stdout)
	}
}
