package metrics_test

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil/promlint"
	"github.com/prometheus/common/expfmt"
	"go.uber.org/goleak"

	"github.com/titan-broker/titan/internal/address"
	"github.com/titan-broker/titan/internal/broker"
	"github.com/titan-broker/titan/internal/brokertest"
	"github.com/titan-broker/titan/internal/dest"
	"github.com/titan-broker/titan/internal/dispatch"
	"github.com/titan-broker/titan/internal/eventlog"
	"github.com/titan-broker/titan/internal/frame"
	"github.com/titan-broker/titan/internal/metrics"
	"github.com/titan-broker/titan/internal/pointqueue"
	"github.com/titan-broker/titan/internal/router"
	"github.com/titan-broker/titan/internal/rpc"
	"github.com/titan-broker/titan/internal/session"
	"github.com/titan-broker/titan/internal/store"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func scrape(t *testing.T, addr string) string {
	t.Helper()
	c := &http.Client{}
	defer c.CloseIdleConnections()
	resp, err := c.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("status %d", resp.StatusCode)
	}
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/plain") {
		t.Fatalf("content type %q", ct)
	}
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func requireLines(t *testing.T, body string, lines ...string) {
	t.Helper()
	for _, l := range lines {
		if !strings.Contains(body, "\n"+l+"\n") {
			t.Errorf("missing line %q", l)
		}
	}
	if t.Failed() {
		t.Logf("scrape:\n%s", body)
	}
}

func TestScrapeExportsQueuesConnectionsAndRoutes(t *testing.T) {
	stage := metrics.NewDestinationStage(2)
	cfg := brokertest.DefaultTestConfig()
	cfg.Servers[0].Port, cfg.Monitor.Port, cfg.Store.Type = 0, 0, "memory"
	b := brokertest.Run(t, cfg, broker.Options{SendStages: []router.Stage{stage}})

	c := brokertest.Connect(t, b.Addrs()[0])
	c.SendFrame("SEND", "hello", "destination:/queue/jobs", "receipt:1")
	c.Expect(frame.CmdReceipt)
	c.SendFrame("SEND", "hey", "destination:/queue/jobs", "group:market", "receipt:2")
	c.Expect(frame.CmdReceipt)
	c.SendFrame("SEND", "abc", "destination:/topic/prices", "receipt:3")
	c.Expect(frame.CmdReceipt)
	c.SendFrame("SEND", "z", "destination:/topic/other", "receipt:4") // over the stage's bound of 2
	c.Expect(frame.CmdReceipt)
	c.SendFrame("SUBSCRIBE", "", "destination:/queue/jobs", "id:s1", "ack:client")
	c.Expect(frame.CmdMessage, "subscription:s1")

	body := scrape(t, b.MonitorAddr())
	requireLines(t, body,
		`titan_build_info{version="0.1.0"} 1`,
		`titan_connections 1`,
		`titan_connections_accepted_total 1`,
		`titan_connections_closed_total{reason="slow_consumer"} 0`,
		`titan_router_frames_total{route="send-queue"} 2`,
		`titan_router_frames_total{route="send-events"} 2`,
		`titan_router_frames_total{route="subscribe"} 1`,
		`titan_router_errors_total{route="send-queue"} 0`,
		`titan_messages_published_total 4`,
		`titan_events_no_subscriber_total 2`,
		`titan_queues 2`,
		`titan_destinations 2`,
		`titan_store_state{state="ok"} 1`,
		`titan_store_state{state="down"} 0`,
		`titan_queue_groups 2`,
		`titan_queue_messages{destination="/queue/jobs",group="default",pattern="queues"} 1`,
		`titan_queue_delivering_messages{destination="/queue/jobs",group="default",pattern="queues"} 1`,
		`titan_queue_consumers{destination="/queue/jobs",group="default",pattern="queues"} 1`,
		`titan_queue_consumers{destination="/queue/jobs",group="market",pattern="queues"} 0`,
		`titan_queue_enqueued_total{destination="/queue/jobs",group="market",pattern="queues"} 1`,
		`titan_queue_dispatched_total{destination="/queue/jobs",group="default",pattern="queues"} 1`,
		`titan_queue_dropped_total{destination="/queue/jobs",group="default",pattern="queues"} 0`,
		`titan_queue_max_pending_bytes{destination="/queue/jobs",group="default",pattern="queues"} 6.7108864e+07`,
		`titan_queue_paused{destination="/queue/jobs",group="market",pattern="queues"} 0`,
		`titan_destination_sent_messages_total{destination="/queue/jobs",group="default",pattern="queues"} 1`,
		`titan_destination_sent_bytes_total{destination="/queue/jobs",group="default",pattern="queues"} 5`,
		`titan_destination_sent_messages_total{destination="/queue/jobs",group="market",pattern="queues"} 1`,
		`titan_destination_sent_messages_total{destination="_other",group="_other",pattern=""} 2`,
	)
	if !strings.Contains(body, "\ngo_goroutines ") || !strings.Contains(body, "\ntitan_queue_pending_bytes{") {
		t.Errorf("runtime or pending-bytes series missing")
	}
}

// TestScrapeExportsGroupCommits checks the group commit series of the Pebble store: three
// SENDs, each awaiting its RECEIPT before the next, are three appended records in one to three
// group commits, every commit an fsync; no consumer took them, so none was left unwritten.
// The memory store exports none of the series.
func TestScrapeExportsGroupCommits(t *testing.T) {
	cfg := brokertest.DefaultTestConfig()
	cfg.Servers[0].Port, cfg.Monitor.Port = 0, 0
	cfg.Store.Type, cfg.Store.DataDir = "pebble", t.TempDir()
	b := brokertest.Run(t, cfg, broker.Options{})
	c := brokertest.Connect(t, b.Addrs()[0])
	for i := range 3 {
		c.SendFrame("SEND", "hello", "destination:/queue/jobs", fmt.Sprintf("receipt:%d", i))
		c.Expect(frame.CmdReceipt)
	}
	body := scrape(t, b.MonitorAddr())
	requireLines(t, body,
		`titan_store_records_appended_total 3`,
		`titan_store_records_unwritten_total 0`,
	)
	groups := seriesValue(t, body, "titan_store_group_commits_total")
	if groups < 1 || groups > 3 {
		t.Errorf("titan_store_group_commits_total = %v, want 1 to 3", groups)
	}
	if syncs := seriesValue(t, body, "titan_store_wal_syncs_total"); syncs < groups {
		t.Errorf("titan_store_wal_syncs_total = %v, fewer than the %v group commits", syncs, groups)
	}
	if sec := seriesValue(t, body, "titan_store_group_commit_seconds_total"); sec <= 0 {
		t.Errorf("titan_store_group_commit_seconds_total = %v, want > 0", sec)
	}

	mcfg := brokertest.DefaultTestConfig()
	mcfg.Servers[0].Port, mcfg.Monitor.Port, mcfg.Store.Type = 0, 0, "memory"
	mb := brokertest.Run(t, mcfg, broker.Options{})
	if mbody := scrape(t, mb.MonitorAddr()); strings.Contains(mbody, "titan_store_wal_syncs_total") ||
		strings.Contains(mbody, "titan_store_records_appended_total") {
		t.Errorf("the memory store exports group commit series:\n%s", mbody)
	}
}

// seriesValue returns the value of the unlabelled series name in a scrape.
func seriesValue(t *testing.T, body, name string) float64 {
	t.Helper()
	for _, l := range strings.Split(body, "\n") {
		if v, ok := strings.CutPrefix(l, name+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatalf("%s: %v", l, err)
			}
			return f
		}
	}
	t.Fatalf("no series %s in the scrape", name)
	return 0
}

// fakeSource is a metrics.Source over a bare dispatcher, queues pattern and router.
type fakeSource struct {
	e *dispatch.Dispatcher
	r *router.Router
}

func (f fakeSource) Version() string                                { return "test" }
func (f fakeSource) StartTime() time.Time                           { return time.Unix(1700000000, 0) }
func (f fakeSource) Dispatcher() *dispatch.Dispatcher               { return f.e }
func (f fakeSource) Outbox() eventlog.Stats                         { return eventlog.Stats{} }
func (f fakeSource) RPC() []rpc.Stats                               { return nil }
func (f fakeSource) Router() *router.Router                         { return f.r }
func (f fakeSource) Sessions() []*session.Session                   { return nil }
func (f fakeSource) ConnectionsAccepted() uint64                    { return 7 }
func (f fakeSource) ConnectionsClosed(r session.CloseReason) uint64 { return uint64(r) }
func (f fakeSource) DuplicateIDs() (int, uint64)                    { return 0, 0 }
func (f fakeSource) StoreHealth() store.Health {
	return store.Health{State: store.StateDown, Changes: 3, Recoveries: 1}
}

func TestCollectorOverBareEngine(t *testing.T) {
	e := dispatch.New(dispatch.Options{})
	q := pointqueue.New(e, pointqueue.Options{})
	src := fakeSource{e: e, r: router.New(router.Ports{Queues: q}, router.Options{})}
	for _, ch := range []string{"a", "b"} {
		e.Create(dest.Identity{Group: "default", Pattern: dest.PatternQueues, Channel: ch}, address.Settings{Capacity: 3})
	}
	reg := prometheus.NewPedanticRegistry() // checks Collect against Describe
	reg.MustRegister(metrics.NewCollector(src), metrics.NewDestinationStage(0))
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	problems, err := promlint.NewWithMetricFamilies(mfs).Lint()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("lint: %s: %s", p.Metric, p.Text)
	}
	var buf bytes.Buffer
	enc := expfmt.NewEncoder(&buf, expfmt.NewFormat(expfmt.TypeTextPlain))
	for _, mf := range mfs {
		if err := enc.Encode(mf); err != nil {
			t.Fatal(err)
		}
	}
	requireLines(t, "\n"+buf.String(),
		`titan_queue_capacity_messages{destination="/queue/a",group="default",pattern="queues"} 3`,
		`titan_queue_capacity_messages{destination="/queue/b",group="default",pattern="queues"} 3`,
		`titan_connections_accepted_total 7`,
		`titan_store_state{state="down"} 1`,
		`titan_store_state{state="ok"} 0`,
		`titan_store_state_changes_total 3`,
		`titan_store_recoveries_total 1`,
		`titan_connections_closed_total{reason="shutdown"} 7`,
		`titan_start_time_seconds 1.7e+09`,
		`titan_build_info{version="test"} 1`,
		`titan_queues 2`,
		`titan_connections 0`,
	)
}

func TestScrapeExportsRequestResponse(t *testing.T) {
	cfg := brokertest.DefaultTestConfig()
	cfg.Servers[0].Port, cfg.Monitor.Port, cfg.Store.Type = 0, 0, "memory"
	b := brokertest.Run(t, cfg)
	resp := brokertest.Connect(t, b.Addrs()[0])
	resp.SendFrame("SUBSCRIBE", "", "destination:/command/orders/cancel", "id:r", "receipt:r")
	resp.Expect(frame.CmdReceipt)
	req := brokertest.Connect(t, b.Addrs()[0])
	req.SendFrame("SUBSCRIBE", "", "destination:/temp-queue/replies", "id:replies", "receipt:s")
	req.Expect(frame.CmdReceipt)
	req.SendFrame("SEND", "{}", "destination:/command/orders/cancel", "reply-to:/temp-queue/replies", "receipt:q")
	corr := req.Expect(frame.CmdReceipt).Value("correlation-id")
	m := resp.Expect(frame.CmdMessage)
	resp.SendFrame("SEND", "", "destination:"+m.Value("reply-to"), "correlation-id:"+corr, "receipt:a")
	resp.Expect(frame.CmdReceipt)
	req.Expect(frame.CmdMessage, "correlation-id:"+corr)

	body := scrape(t, b.MonitorAddr())
	l := `{destination="/command/orders/cancel",group="default",pattern="commands"}`
	requireLines(t, body,
		"titan_rpc_requests_total"+l+" 1",
		"titan_rpc_responses_total"+l+" 1",
		"titan_rpc_timeouts_total"+l+" 0",
		"titan_rpc_response_seconds_count"+l+" 1",
		`titan_rpc_dropped_responses_total{destination="/command/orders/cancel",group="default",pattern="commands",reason="late"} 0`,
		"titan_outbox_pollers 0",
	)
}
