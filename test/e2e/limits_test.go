package e2e

import (
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/titan-broker/titan/internal/store/pebblestore"
)

// scrapeMetrics returns b's /metrics text.
// sendExpect sends a SEND with a receipt on c and returns the answer (RECEIPT or ERROR).
func sendExpect(t *testing.T, c *rawConn, destination, body string) *rawFrame {
	t.Helper()
	requireNoError(t, c.write(fmt.Sprintf("SEND\ndestination:%s\nreceipt:r\ncontent-length:%d\n\n%s\x00", destination, len(body), body)))
	f, err := c.readFrame(10 * time.Second)
	requireNoError(t, err, "reading the answer to SEND %s", destination)
	return f
}

func requireReceipt(t *testing.T, f *rawFrame, what string) {
	t.Helper()
	if f.command != "RECEIPT" {
		t.Fatalf("%s: got %s, want RECEIPT", what, f)
	}
}

func requireErrorMessage(t *testing.T, f *rawFrame, message, what string) {
	t.Helper()
	got, _ := f.get("message")
	if f.command != "ERROR" || got != message {
		t.Fatalf("%s: got %s, want ERROR message:%s", what, f, message)
	}
	if rid, _ := f.get("receipt-id"); rid != "r" {
		t.Errorf("%s: ERROR receipt-id %q, want r", what, rid)
	}
}

// TestDestinationLimits: every destination limit answers a SEND that would create one more
// with an ERROR naming the limit, creates nothing (no queue, no store stream), leaves
// existing destinations usable, and keeps the broker's destination count (and so its
// memory) flat however many creations are refused. Limits: 20 per connection, 5 own
// temp-queues per connection, 50 broker-wide.
func TestDestinationLimits(t *testing.T) {
	b := startBroker(t, yamlConfigWith("max-destinations-by-client: 20, max-temp-queues-by-client: 5",
		"  limits: {max-destinations: 50, destination-idle-timeout: -1}\n"))

	t.Run("per connection", func(t *testing.T) {
		c := dialRaw(t, b)
		c.connect()
		for i := range 20 {
			requireReceipt(t, sendExpect(t, c, fmt.Sprintf("/queue/pc-%d", i), "x"), "SEND within the limit")
		}
		requireErrorMessage(t, sendExpect(t, c, "/queue/pc-20", "x"), "destination limit reached", "21st new queue")
		if _, ok := monitorQueue(t, b, "/queue/pc-20", ""); ok {
			t.Fatal("the refused destination /queue/pc-20 exists")
		}
		// Another connection still reaches the existing ones (and may create its own).
		c2 := dialRaw(t, b)
		c2.connect()
		requireReceipt(t, sendExpect(t, c2, "/queue/pc-0", "y"), "SEND to an existing queue")
		requireReceipt(t, sendExpect(t, c2, "/events-store/log-1", "y"), "SEND creating a log")
	})

	t.Run("temp-queues", func(t *testing.T) {
		c := dialRaw(t, b)
		c.connect()
		for i := range 5 {
			requireReceipt(t, sendExpect(t, c, fmt.Sprintf("/temp-queue/t%d", i), "x"), "temp-queue within the limit")
		}
		requireErrorMessage(t, sendExpect(t, c, "/temp-queue/t5", "x"), "temp-queue limit reached", "6th temp-queue")
	})

	t.Run("broker-wide", func(t *testing.T) {
		// 20 queues + 1 log exist; the temp-queues went with their connection.
		made := 0
		var refused *rawFrame
		for conn := 0; refused == nil && conn < 10; conn++ {
			c := dialRaw(t, b)
			c.connect()
			for i := 0; i < 20; i++ {
				f := sendExpect(t, c, fmt.Sprintf("/queue/bw-%d-%d", conn, i), "x")
				if f.command != "RECEIPT" {
					refused = f
					break
				}
				made++
			}
		}
		if refused == nil {
			t.Fatal("no SEND was refused past max-destinations")
		}
		requireErrorMessage(t, refused, "destination limit reached", "a new destination past max-destinations")
		if !strings.Contains(string(refused.body), "max-destinations") {
			t.Errorf("ERROR body %q does not name max-destinations", refused.body)
		}
		requireEqual(t, 29, made, "destinations created before the broker-wide limit (50 - 20 queues - 1 log)")
		// An events-store log is a destination too.
		c := dialRaw(t, b)
		c.connect()
		requireErrorMessage(t, sendExpect(t, c, "/events-store/log-2", "x"), "destination limit reached", "a new log past max-destinations")
	})

	t.Run("memory stays flat", func(t *testing.T) {
		before := scrapeMetrics(t, b)
		requireEqual(t, 50.0, metricSum(before, "titan_destinations"), "titan_destinations at the limit")
		rss0 := metricSum(before, "process_resident_memory_bytes")
		const attempts = 1500
		for i := range attempts {
			c := dialRaw(t, b)
			c.connect()
			requireErrorMessage(t, sendExpect(t, c, fmt.Sprintf("/queue/flood-%d", i), "x"), "destination limit reached", "flood")
			_ = c.conn.Close()
		}
		after := scrapeMetrics(t, b)
		requireEqual(t, 50.0, metricSum(after, "titan_destinations"), "titan_destinations after the flood")
		if got := metricSum(after, "titan_destination_limit_refusals_total"); got < attempts {
			t.Errorf("titan_destination_limit_refusals_total = %v, want >= %d", got, attempts)
		}
		// Garbage may sit under the collector's floor (internal/gctune) while the flood runs;
		// what the refused creations kept shows once the broker is quiet and has collected
		// (titan serve collects on its own two quiet seconds after activity).
		var rss1 float64
		t.Cleanup(func() {
			if t.Failed() {
				t.Logf("RSS %.1f MiB before, %.1f MiB at the last poll", rss0/(1<<20), rss1/(1<<20))
			}
		})
		eventually(t, 15*time.Second, func() bool {
			rss1 = metricSum(scrapeMetrics(t, b), "process_resident_memory_bytes")
			return rss1-rss0 <= 32<<20
		}, "RSS to settle within 32 MiB of its value before the refused creations")
		t.Logf("RSS %.1f MiB -> %.1f MiB after %d refused creations, once quiet", rss0/(1<<20), rss1/(1<<20), attempts)
	})
}

// TestIdleDestinationsReclaimed: a traffic-created queue that stays empty and unused for
// destination-idle-timeout is removed (and no longer counts toward the limits); one with
// a message or a consumer stays.
func TestIdleDestinationsReclaimed(t *testing.T) {
	b := startBroker(t, yamlConfigWith("", "  limits: {destination-idle-timeout: 300}\n"))
	c := dialRaw(t, b)
	c.connect()
	requireReceipt(t, sendExpect(t, c, "/queue/kept", "x"), "SEND")
	requireReceipt(t, sendExpect(t, c, "/queue/gone", "x"), "SEND")
	requireNoError(t, c.write("SUBSCRIBE\ndestination:/queue/gone\nid:s\nack:auto\n\n\x00"))
	f, err := c.readFrame(10 * time.Second)
	requireNoError(t, err)
	requireEqual(t, "MESSAGE", f.command)
	requireNoError(t, c.write("UNSUBSCRIBE\nid:s\nreceipt:u\n\n\x00"))
	f, err = c.readFrame(10 * time.Second)
	requireNoError(t, err)
	requireEqual(t, "RECEIPT", f.command)
	eventually(t, 15*time.Second, func() bool {
		_, ok := monitorQueue(t, b, "/queue/gone", "")
		return !ok
	}, "the idle, empty queue /queue/gone is reclaimed")
	requireQueue(t, b, "/queue/kept", "") // holds a message
	if got := metricSum(scrapeMetrics(t, b), "titan_destinations_reclaimed_total"); got < 1 {
		t.Errorf("titan_destinations_reclaimed_total = %v, want >= 1", got)
	}
}

// limitsPebbleConfig is a Pebble-backed titan-env.yml without destination limits, so one
// connection can use many names.
func limitsPebbleConfig(dataDir string) string {
	return fmt.Sprintf(`titan:
  servers:
    - {name: stomp, host: 127.0.0.1, port: 0, protocol-options: {max-destinations-by-client: -1, max-subscriptions-by-client: 100000}}
  monitor: {host: 127.0.0.1, port: 0}
  store: {type: pebble, data-dir: %q}
  limits: {max-destinations: -1, destination-idle-timeout: -1}
  log: {level: info}
`, dataDir)
}

// useNames sends one persistent message to each of n queues on p, consumes them all
// (ack:auto) and waits until no queue holds a message: n names used, nothing stored.
func useNames(t *testing.T, p *titanProc, n int) {
	t.Helper()
	b := p.broker()
	c := dialRaw(t, b)
	c.connect()
	var sb strings.Builder
	for i := range n {
		fmt.Fprintf(&sb, "SEND\ndestination:/queue/name-%d\npersistent:true\n\nx\x00", i)
		if sb.Len() > 1<<16 {
			requireNoError(t, c.write(sb.String()))
			sb.Reset()
		}
	}
	sb.WriteString("SEND\ndestination:/queue/name-0\npersistent:true\nreceipt:sent\n\nx\x00")
	requireNoError(t, c.write(sb.String()))
	f, err := c.readFrame(60 * time.Second)
	requireNoError(t, err)
	requireEqual(t, "RECEIPT", f.command, "the last SEND's answer")
	sb.Reset()
	for i := range n {
		fmt.Fprintf(&sb, "SUBSCRIBE\ndestination:/queue/name-%d\nid:%d\nack:auto\n\n\x00", i, i)
	}
	requireNoError(t, c.write(sb.String()))
	for got := 0; got < n+1; got++ {
		f, err := c.readFrame(60 * time.Second)
		requireNoError(t, err, "after %d MESSAGEs", got)
		requireEqual(t, "MESSAGE", f.command)
	}
	// A scrape walks every queue: with 20,000 of them, a race-built broker on a loaded
	// machine can take longer than httpClient's 10 s, so this wait uses a patient client.
	patient := &http.Client{Timeout: 60 * time.Second}
	eventually(t, 90*time.Second, func() bool {
		resp, err := patient.Get(monitorURL(b) + "/metrics")
		requireNoError(t, err, "GET /metrics")
		defer resp.Body.Close()
		data, err := io.ReadAll(resp.Body)
		requireNoError(t, err, "reading /metrics")
		return metricSum(string(data), "titan_queue_messages") == 0
	}, "every message consumed")
	_ = c.conn.Close()
}

// TestRestartDropsUsedNames: a broker that used 2,000 queue names and stores nothing drops
// their empty streams at its next start, in one write, so that the starts after it do not
// load them (start-up stays proportional to what is stored, not to every name ever used).
// The store is read after each run with the broker stopped; the cost of Open per stream is
// a benchmark (BenchmarkOpenUsedNames in internal/store/pebblestore), not a timed test.
func TestRestartDropsUsedNames(t *testing.T) {
	dataDir := filepath.Join(t.TempDir(), "data")
	n := newTitanNode(t, limitsPebbleConfig(dataDir))
	const used = 2000
	p := n.start()
	useNames(t, p, used)
	// One queue still holds a message: its stream is kept.
	c := dialRaw(t, p.broker())
	c.connect()
	requireNoError(t, c.write("SEND\ndestination:/queue/kept\npersistent:true\nreceipt:kept\n\nk\x00"))
	f, err := c.readFrame(30 * time.Second)
	requireNoError(t, err)
	requireReceipt(t, f, "SEND to /queue/kept")
	_ = c.conn.Close()
	n.stop()
	names := func() (empty, holding int) {
		st, err := pebblestore.Open(dataDir, pebblestore.Options{})
		requireNoError(t, err, "opening the stopped broker's store")
		defer func() { requireNoError(t, st.Close(), "closing the store") }()
		sts, err := st.Streams()
		requireNoError(t, err, "listing streams")
		for _, s := range sts {
			if !strings.HasPrefix(s.Name, "queue/") {
				continue
			}
			if s.Count == 0 {
				empty++
			} else {
				holding++
			}
		}
		return empty, holding
	}
	if empty, holding := names(); empty < used || holding != 1 {
		t.Fatalf("after using %d names: %d empty queue streams and %d holding messages; want at least %d and 1", used, empty, holding, used)
	}
	n.start()
	n.stop()
	if empty, holding := names(); empty != 0 || holding != 1 {
		t.Fatalf("after a restart: %d empty queue streams and %d holding messages; want 0 and 1", empty, holding)
	}
	p = n.start()
	c = dialRaw(t, p.broker())
	c.connect()
	requireNoError(t, c.write("SUBSCRIBE\nid:k\ndestination:/queue/kept\nack:auto\n\n\x00"))
	f, err = c.readFrame(30 * time.Second)
	requireNoError(t, err)
	requireEqual(t, "k", string(f.body), "the kept message after two restarts")
	_ = c.conn.Close()
	n.stop()
}

// TestGroupLimit: a SEND that would create the first destination of one group more than
// max-groups gets ERROR group limit reached and creates nothing; existing groups keep
// working, and the group count stays flat under a flood of new groups.
func TestGroupLimit(t *testing.T) {
	b := startBroker(t, yamlConfigWith("", "  limits: {max-groups: 3, destination-idle-timeout: -1}\n"))
	send := func(group, destination string) *rawFrame {
		c := dialRaw(t, b)
		c.connect()
		requireNoError(t, c.write(fmt.Sprintf("SEND\ndestination:%s\ngroup:%s\nreceipt:r\n\nx\x00", destination, group)))
		f, err := c.readFrame(10 * time.Second)
		requireNoError(t, err)
		_ = c.conn.Close()
		return f
	}
	for _, g := range []string{"default", "g1", "g2"} {
		requireReceipt(t, send(g, "/queue/a"), "SEND in group "+g)
	}
	requireErrorMessage(t, send("g3", "/queue/a"), "group limit reached", "a 4th group")
	requireReceipt(t, send("g1", "/queue/b"), "a new destination in an existing group")
	for i := range 300 {
		requireErrorMessage(t, send(fmt.Sprintf("flood-%d", i), "/queue/a"), "group limit reached", "flood")
	}
	m := scrapeMetrics(t, b)
	requireEqual(t, 3.0, metricSum(m, "titan_groups"), "titan_groups")
	if got := metricSum(m, "titan_group_limit_refusals_total"); got < 301 {
		t.Errorf("titan_group_limit_refusals_total = %v, want >= 301", got)
	}
	if _, ok := monitorQueue(t, b, "/queue/a", "g3"); ok {
		t.Error("the refused group's queue exists")
	}
}
