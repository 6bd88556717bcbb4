package e2e

import (
	"fmt"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"testing"
	"time"
)

// Durable subscriptions are bounded (limits.max-durable-subscriptions): a SUBSCRIBE that
// would create one more is refused with an ERROR naming the limit and creates nothing;
// resuming one never is; offline ones are listed; operators delete them (API and CLI); the
// count survives a restart; messages appended while one is offline reach it when it comes
// back; and idle ones expire when durable-subscription-idle-timeout is set.

// durableSession is a python3-stomp session script against p.
func durableSession(t *testing.T, b *broker) *liveScript {
	s := startLiveScript(t, pythonClient, b, "session", nil)
	return s
}

type sessionState struct {
	ID       string    `json:"id"`
	Messages []fullMsg `json:"messages"`
	Errors   []struct {
		Headers map[string]string `json:"headers"`
		Body    string            `json:"body"`
	} `json:"errors"`
}

func durableSub(name string) map[string]any {
	return map[string]any{"durable-name": name}
}

// opDurable is one entry of GET /titan/monitor/durable-subscriptions.
type opDurable struct {
	Group, Destination, Name string
	Position                 uint64
	Live                     int
	LastActive               *time.Time
}

func durableNames(t *testing.T, b *broker) []string {
	t.Helper()
	var l struct{ Subscriptions []opDurable }
	requireMonitor(t, b, http.MethodGet, "/titan/monitor/durable-subscriptions", nil, &l)
	var out []string
	for _, d := range l.Subscriptions {
		state := "offline"
		if d.Live > 0 {
			state = "live"
		}
		out = append(out, fmt.Sprintf("%s:%s:%s", d.Destination, d.Name, state))
	}
	sort.Strings(out)
	return out
}

// offlineInLogs lists the offline durable subscriptions GET /titan/monitor/logs shows, as
// destination:name@position.
func offlineInLogs(t *testing.T, b *broker) []string {
	t.Helper()
	var l struct {
		Logs []struct {
			Destination   string
			Subscriptions []struct {
				Offline     bool
				DurableName string
				Position    uint64
			}
		}
	}
	requireMonitor(t, b, http.MethodGet, "/titan/monitor/logs", nil, &l)
	var out []string
	for _, lg := range l.Logs {
		for _, s := range lg.Subscriptions {
			if s.Offline {
				out = append(out, fmt.Sprintf("%s:%s@%d", lg.Destination, s.DurableName, s.Position))
			}
		}
	}
	sort.Strings(out)
	return out
}

func TestDurableSubscriptionLimit(t *testing.T) {
	pythonClient.require(t)
	dir := t.TempDir()
	cfg := strings.Replace(pebbleConfig(dir, ""), "  log: {level: info}\n",
		"  log: {level: info}\n  limits: {max-durable-subscriptions: 3}\n", 1)
	node := newTitanNode(t, cfg)
	p := node.start()
	b := p.broker()
	const log = "/events-store/dl"

	s := durableSession(t, b)
	s.call(map[string]any{"op": "connect", "conn": "a"}, nil)
	ids := map[string]string{}
	for _, n := range []string{"d0", "d1", "d2"} {
		var st sessionState
		s.call(map[string]any{"op": "subscribe", "conn": "a", "dest": log, "ack": "client-individual", "headers": durableSub(n)}, &st)
		ids[n] = st.ID
	}
	m := scrapeMetrics(t, b)
	requireEqual(t, 3.0, sampleValue(m, "titan_durable_subscriptions"), "titan_durable_subscriptions at the limit")
	requireEqual(t, 3.0, sampleValue(m, "titan_durable_subscriptions_max"), "titan_durable_subscriptions_max")

	// A fourth name is refused, on its own connection, with the limit named; nothing is made.
	s.call(map[string]any{"op": "connect", "conn": "b"}, nil)
	var refused sessionState
	s.call(map[string]any{"op": "try_subscribe", "conn": "b", "dest": log, "headers": durableSub("d3")}, &refused)
	if len(refused.Errors) != 1 || refused.Errors[0].Headers["message"] != "durable subscription limit reached" {
		t.Fatalf("4th durable subscription: errors %+v, want one ERROR message:durable subscription limit reached", refused.Errors)
	}
	if !strings.Contains(refused.Errors[0].Body, "max-durable-subscriptions") {
		t.Errorf("ERROR body %q does not name max-durable-subscriptions", refused.Errors[0].Body)
	}
	m = scrapeMetrics(t, b)
	requireEqual(t, 3.0, sampleValue(m, "titan_durable_subscriptions"), "titan_durable_subscriptions after the refusal")
	requireEqual(t, 1.0, sampleValue(m, "titan_durable_subscriptions_refused_total"), "refusals")
	requireEqual(t, "/events-store/dl:d0:live,/events-store/dl:d1:live,/events-store/dl:d2:live", strings.Join(durableNames(t, b), ","), "durable subscriptions")

	// Offline: d1 and d2 unsubscribe; messages appended meanwhile reach d1 when it resumes.
	s.call(map[string]any{"op": "unsubscribe", "conn": "a", "id": ids["d1"]}, nil)
	s.call(map[string]any{"op": "unsubscribe", "conn": "a", "id": ids["d2"]}, nil)
	requireEqual(t, "/events-store/dl:d1@0,/events-store/dl:d2@0", strings.Join(offlineInLogs(t, b), ","), "offline durable subscriptions in GET /titan/monitor/logs")
	requireEqual(t, "/events-store/dl:d0:live,/events-store/dl:d1:offline,/events-store/dl:d2:offline", strings.Join(durableNames(t, b), ","), "durable subscriptions")
	s.call(map[string]any{"op": "connect", "conn": "p"}, nil)
	for i := range 2 {
		s.call(map[string]any{"op": "send", "conn": "p", "dest": log, "body": fmt.Sprintf("while-offline-%d", i)}, nil)
	}

	// Deleting: a live one is refused (409), an offline one goes, by API and by CLI.
	q := url.Values{"destination": {log}, "name": {"d0"}}
	if code, body := opCall(t, b, http.MethodDelete, "/titan/monitor/durable-subscriptions", q, nil); code != http.StatusConflict {
		t.Fatalf("DELETE a live durable subscription: HTTP %d %s, want 409", code, body)
	}
	q.Set("name", "nope")
	if code, body := opCall(t, b, http.MethodDelete, "/titan/monitor/durable-subscriptions", q, nil); code != http.StatusNotFound {
		t.Fatalf("DELETE an unknown durable subscription: HTTP %d %s, want 404", code, body)
	}
	r := requireCLIOK(t, b, "durable", "delete", log, "d2")
	requireEqual(t, "deleted durable subscription d2 of /events-store/dl (group default)\n", r.stdout, "titan durable delete")
	requireEqual(t, 2.0, sampleValue(scrapeMetrics(t, b), "titan_durable_subscriptions"), "titan_durable_subscriptions after the delete")
	lst := requireCLIOK(t, b, "durable", "list")
	if !strings.Contains(lst.stdout, "d1") || !strings.Contains(lst.stdout, "offline") || strings.Contains(lst.stdout, "d2") {
		t.Errorf("titan durable list:\n%s", lst.stdout)
	}

	// Room again: d3 is created; d1 resumes (not a creation) and gets what came meanwhile.
	s.call(map[string]any{"op": "connect", "conn": "c"}, nil)
	s.call(map[string]any{"op": "subscribe", "conn": "c", "dest": log, "headers": durableSub("d3")}, nil)
	s.call(map[string]any{"op": "connect", "conn": "r"}, nil)
	s.call(map[string]any{"op": "subscribe", "conn": "r", "dest": log, "headers": durableSub("d1")}, nil)
	var resumed sessionState
	s.call(map[string]any{"op": "wait_messages", "conn": "r", "count": 2}, &resumed)
	requireEqual(t, "while-offline-0,while-offline-1", strings.Join(msgBodies(resumed.Messages), ","), "messages appended while d1 was offline")
	s.finish(nil)

	// The count survives a restart: the limit still holds (3 = d0, d1, d3).
	node.stop()
	p = node.start()
	b = p.broker()
	requireEqual(t, 3.0, sampleValue(scrapeMetrics(t, b), "titan_durable_subscriptions"), "titan_durable_subscriptions after a restart")
	s2 := durableSession(t, b)
	s2.call(map[string]any{"op": "connect", "conn": "a"}, nil)
	s2.call(map[string]any{"op": "try_subscribe", "conn": "a", "dest": log, "headers": durableSub("d4")}, &refused)
	if len(refused.Errors) != 1 || refused.Errors[0].Headers["message"] != "durable subscription limit reached" {
		t.Fatalf("a new durable subscription after the restart: errors %+v, want the limit", refused.Errors)
	}
	s2.call(map[string]any{"op": "connect", "conn": "b"}, nil)
	s2.call(map[string]any{"op": "subscribe", "conn": "b", "dest": log, "headers": durableSub("d0")}, nil)
	s2.finish(nil)
	node.stop()
}

// TestDurableSubscriptionIdleExpiry: with durable-subscription-idle-timeout set, an offline
// durable subscription is deleted once idle that long; a live one is kept however long.
func TestDurableSubscriptionIdleExpiry(t *testing.T) {
	pythonClient.require(t)
	b := startBroker(t, yamlConfigWith("", "  limits: {durable-subscription-idle-timeout: 400}\n"))
	const log = "/events-store/idle"
	s := durableSession(t, b)
	s.call(map[string]any{"op": "connect", "conn": "a"}, nil)
	var gone, kept sessionState
	s.call(map[string]any{"op": "subscribe", "conn": "a", "dest": log, "headers": durableSub("gone")}, &gone)
	s.call(map[string]any{"op": "subscribe", "conn": "a", "dest": log, "headers": durableSub("kept")}, &kept)
	s.call(map[string]any{"op": "unsubscribe", "conn": "a", "id": gone.ID}, nil)
	eventually(t, 10*time.Second, func() bool {
		return strings.Join(durableNames(t, b), ",") == "/events-store/idle:kept:live"
	}, "the offline durable subscription expires; the live one stays")
	// Still kept well past the timeout while live.
	eventually(t, 5*time.Second, func() bool {
		return sampleValue(scrapeMetrics(t, b), "titan_durable_subscriptions") == 1
	}, "titan_durable_subscriptions = 1")
	if !strings.Contains(b.stderr.String(), "durable subscription expired") {
		t.Errorf("no log line for the expiry")
	}
	s.finish(nil)
}
