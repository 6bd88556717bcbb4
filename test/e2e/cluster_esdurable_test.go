package e2e

import (
	"fmt"
	"net/http"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"
)

// Events-store durable subscriptions in cluster mode (issue 27): managed cluster-wide as on
// a single node — listed by every node, deleted from any node, bounded by
// max-durable-subscriptions and expired by durable-subscription-idle-timeout — and read by
// one live SUBSCRIBE at a time: a second one, on any node, is refused with an ERROR naming
// the durable-name.

// withLimits puts a titan.limits section into a cluster node's configuration (a prepare
// function of startCluster).
func withLimits(limits string) func(int, *clusterNode) {
	return func(_ int, n *clusterNode) {
		b, err := os.ReadFile(n.cfgPath)
		if err != nil {
			panic(err)
		}
		cfg := strings.Replace(string(b), "  log: {level: debug}\n", "  log: {level: debug}\n  limits: "+limits+"\n", 1)
		if err := os.WriteFile(n.cfgPath, []byte(cfg), 0o644); err != nil {
			panic(err)
		}
	}
}

// esDurableSub is a SUBSCRIBE of durable-name name on log, receipted "sub".
func esDurableSub(log, id, name string) string {
	return "SUBSCRIBE\ndestination:" + log + "\nid:" + id + "\ndurable-name:" + name + "\nack:client-individual\nreceipt:sub\n\n\x00"
}

// requireRefusal writes raw and requires an ERROR whose message header is message and
// whose body contains every one of want.
func requireRefusal(t *testing.T, c *rawConn, raw, message string, want ...string) {
	t.Helper()
	requireNoError(t, c.write(raw))
	f, err := c.readFrame(10 * time.Second)
	requireNoError(t, err, "waiting for the ERROR")
	got, _ := f.get("message")
	if f.command != "ERROR" || got != message {
		t.Fatalf("got %s, want ERROR message:%s", f, message)
	}
	for _, w := range want {
		if !strings.Contains(string(f.body), w) {
			t.Errorf("ERROR body %q does not contain %q", f.body, w)
		}
	}
}

// clusterDurables is GET /titan/monitor/durable-subscriptions on n as destination:name:state
// lines (state live or offline), sorted.
func clusterDurables(t *testing.T, n *clusterNode) string {
	t.Helper()
	return strings.Join(durableNames(t, n.broker()), ",")
}

// TestClusterEventsStoreDurables: a durable subscription made on node 0 is listed by node 1
// (live, then offline once its connection left, with its position), a second SUBSCRIBE
// with its durable-name on node 1 or on node 0 is refused naming it, deleting it while
// live is refused (409), and deleting it from node 2 (CLI) removes it from every node's
// list; a SUBSCRIBE with its name then starts afresh. The limit (3) counts cluster-wide.
func TestClusterEventsStoreDurables(t *testing.T) {
	t.Parallel()
	nodes := startCluster(t, "", withLimits("{max-durable-subscriptions: 3}"))
	const log = "/events-store/cl/esd"

	a := dialRaw(t, nodeBroker(nodes[0]))
	a.connect()
	rawExchange(t, a, esDurableSub(log, "1", "billing"), "sub", 0)
	p := dialRaw(t, nodeBroker(nodes[1]))
	p.connect()
	got := rawExchange(t, p, "SEND\ndestination:"+log+"\nreceipt:s1\n\nm1\x00SEND\ndestination:"+log+"\nreceipt:s2\n\nm2\x00", "s2", 0)
	checkEqual(t, 0, len(got), "messages on the producer's connection")
	var msgs []*rawFrame
	for len(msgs) < 2 {
		f, err := a.readFrame(10 * time.Second)
		requireNoError(t, err, "the durable subscription's messages")
		checkEqual(t, "MESSAGE", f.command, "frame %s", f)
		msgs = append(msgs, f)
	}
	rawAckAll(t, a, msgs)

	// Every node lists it, live.
	for _, n := range nodes {
		checkEqual(t, log+":billing:live", clusterDurables(t, n), "durable subscriptions listed by %s", n.name)
	}

	// The same durable-name on another node, or on another connection of the same node, is
	// refused with the name and where it is read.
	b1 := dialRaw(t, nodeBroker(nodes[1]))
	b1.connect()
	requireRefusal(t, b1, esDurableSub(log, "1", "billing"), "durable subscription in use", "billing", "n0")
	a2 := dialRaw(t, nodeBroker(nodes[0]))
	a2.connect()
	requireRefusal(t, a2, esDurableSub(log, "1", "billing"), "durable subscription in use", "billing")

	// Deleting it while it is read is refused.
	q := url.Values{"destination": {log}, "name": {"billing"}}
	if code, body := opCall(t, nodes[2].broker(), http.MethodDelete, "/titan/monitor/durable-subscriptions", q, nil); code != http.StatusConflict {
		t.Fatalf("DELETE a live durable subscription: HTTP %d %s, want 409", code, body)
	}

	// Offline: listed by every node with its position (the last acknowledged record).
	rawExchange(t, a, "DISCONNECT\nreceipt:bye\n\n\x00", "bye", 0)
	var l struct{ Subscriptions []opDurable }
	eventually(t, 10*time.Second, func() bool {
		return clusterDurables(t, nodes[1]) == log+":billing:offline"
	}, "node 1 lists billing offline")
	requireMonitor(t, nodes[1].broker(), http.MethodGet, "/titan/monitor/durable-subscriptions", nil, &l)
	if len(l.Subscriptions) != 1 || l.Subscriptions[0].Position == 0 || l.Subscriptions[0].LastActive == nil {
		t.Fatalf("durable subscriptions on node 1: %+v, want billing with its position and last activity", l.Subscriptions)
	}
	pos := l.Subscriptions[0].Position
	checkEqual(t, fmt.Sprintf("%s:billing@%d", log, pos), strings.Join(offlineInLogs(t, nodes[2].broker()), ","), "offline durable subscriptions in node 2's GET /titan/monitor/logs")
	lst := requireCLIOK(t, nodes[2].broker(), "durable", "list")
	if !strings.Contains(lst.stdout, "billing") || !strings.Contains(lst.stdout, "offline") {
		t.Errorf("titan durable list on node 2:\n%s", lst.stdout)
	}

	// Deleted from node 2 (CLI): gone on every node; deleting again is 404.
	r := requireCLIOK(t, nodes[2].broker(), "durable", "delete", log, "billing")
	checkEqual(t, "deleted durable subscription billing of "+log+" (group default)\n", r.stdout, "titan durable delete")
	for _, n := range nodes {
		checkEqual(t, "", clusterDurables(t, n), "durable subscriptions listed by %s after the delete", n.name)
	}
	if code, body := opCall(t, nodes[0].broker(), http.MethodDelete, "/titan/monitor/durable-subscriptions", q, nil); code != http.StatusNotFound {
		t.Fatalf("DELETE a deleted durable subscription: HTTP %d %s, want 404", code, body)
	}

	// Made again, it starts afresh (start-position first: both records again, the
	// deleted position is not resumed).
	a3 := dialRaw(t, nodeBroker(nodes[1]))
	a3.connect()
	again := rawExchange(t, a3, "SUBSCRIBE\ndestination:"+log+"\nid:1\ndurable-name:billing\nstart-position:first\nack:client-individual\nreceipt:sub\n\n\x00", "sub", 2)
	checkEqual(t, "m1,m2", strings.Join(rawBodies(again), ","), "records of billing made again with start-position first")
	rawAckAll(t, a3, again)

	// The limit counts cluster-wide: billing (node 1) and two more on nodes 0 and 2; a
	// fourth name is refused on any node, naming the limit.
	for i, n := range []*clusterNode{nodes[0], nodes[2]} {
		c := dialRaw(t, nodeBroker(n))
		c.connect()
		rawExchange(t, c, esDurableSub(log, "1", fmt.Sprint("d", i)), "sub", 0)
		rawExchange(t, c, "DISCONNECT\nreceipt:bye\n\n\x00", "bye", 0)
	}
	eventually(t, 10*time.Second, func() bool {
		return metricValue(scrapeMetrics(t, nodes[0].broker()), `titan_durable_subscriptions{node="n0"}`) == 3
	}, "titan_durable_subscriptions = 3 on node 0")
	c := dialRaw(t, nodeBroker(nodes[1]))
	c.connect()
	requireRefusal(t, c, esDurableSub(log, "1", "d3"), "durable subscription limit reached", "max-durable-subscriptions")
	want := log + ":billing:live," + log + ":d0:offline," + log + ":d1:offline"
	eventually(t, 10*time.Second, func() bool { return clusterDurables(t, nodes[2]) == want }, "durable subscriptions after the refusal: %s", want)
}

// TestClusterEventsStoreDurableIdleExpiry: with durable-subscription-idle-timeout 1 s, an
// offline durable subscription is deleted cluster-wide once idle that long, and a live one
// is kept however long.
func TestClusterEventsStoreDurableIdleExpiry(t *testing.T) {
	t.Parallel()
	nodes := startCluster(t, "", withLimits("{durable-subscription-idle-timeout: 1000}"))
	const log = "/events-store/cl/idle"
	g := dialRaw(t, nodeBroker(nodes[0]))
	g.connect()
	rawExchange(t, g, esDurableSub(log, "1", "gone"), "sub", 0)
	k := dialRaw(t, nodeBroker(nodes[1]))
	k.connect()
	rawExchange(t, k, esDurableSub(log, "1", "kept"), "sub", 0)
	rawExchange(t, g, "DISCONNECT\nreceipt:bye\n\n\x00", "bye", 0)
	eventually(t, 20*time.Second, func() bool {
		return clusterDurables(t, nodes[2]) == log+":kept:live"
	}, "the offline durable subscription expires; the live one stays")
	// The live one is still there after several more idle timeouts: a message sent now
	// reaches it (its consumer was not deleted under it).
	time.Sleep(3 * time.Second)
	p := dialRaw(t, nodeBroker(nodes[2]))
	p.connect()
	rawExchange(t, p, "SEND\ndestination:"+log+"\nreceipt:s\n\nafter\x00", "s", 0)
	f, err := k.readFrame(10 * time.Second)
	requireNoError(t, err, "the live durable subscription's message")
	checkEqual(t, "MESSAGE after", f.command+" "+string(f.body), "the live durable subscription's frame")
	checkEqual(t, log+":kept:live", clusterDurables(t, nodes[0]), "durable subscriptions on node 0")
	expired := false
	for _, n := range nodes {
		expired = expired || strings.Contains(n.stderr.String(), "durable subscription expired")
	}
	checkEqual(t, true, expired, "a node logged the expiry")
}
