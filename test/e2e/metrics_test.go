package e2e

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/titan-broker/titan/client"
)

// scrapeMetrics returns b's /metrics text.
func scrapeMetrics(t *testing.T, b *broker) string {
	t.Helper()
	resp, err := httpClient.Get(monitorURL(b) + "/metrics")
	requireNoError(t, err, "GET /metrics")
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	requireNoError(t, err)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /metrics: HTTP %d: %s", resp.StatusCode, data)
	}
	return string(data)
}

// sampleValue returns the value of the unlabelled sample name in a scrape (-1 when absent).
func sampleValue(scrape, name string) float64 {
	m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(name) + ` (\S+)$`).FindStringSubmatch(scrape)
	if m == nil {
		return -1
	}
	v, _ := strconv.ParseFloat(m[1], 64)
	return v
}

// Under traffic of every kind the metrics the Grafana dashboard needs exist and move:
// `promtool check metrics` (Debian's prometheus package) accepts /metrics, and every metric
// docs/grafana/titan.json queries is in the scrape (issue 14).
func TestMetricsPromtoolAndGrafanaDashboard(t *testing.T) {
	t.Parallel()
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		t.Fatal("promtool is not installed (Debian package prometheus; scripts/test installs it)")
	}
	n := newTitanNode(t, pebbleConfig(t.TempDir()+"/data", ""))
	b := n.start().broker()
	c := dial(t, b)
	got := make(chan struct{}, 100)
	_, err = c.Subscribe("", "/queue/metrics", func(m *client.Message) { _ = m.Ack(); got <- struct{}{} }, client.WithAck(client.AckClientIndividual))
	requireNoError(t, err)
	_, err = c.Subscribe("", "/events-store/metrics", func(m *client.Message) {}, client.WithAck(client.AckClientIndividual), client.WithDurableName("dash"), client.WithStartPosition("first"))
	requireNoError(t, err)
	for i := 0; i < 10; i++ {
		_, err := c.Send(context.Background(), "", "/queue/metrics", []byte("q"+strconv.Itoa(i)), client.WithPersistent(true))
		requireNoError(t, err)
		_, err = c.Send(context.Background(), "", "/events-store/metrics", []byte("e"+strconv.Itoa(i)))
		requireNoError(t, err)
	}
	for i := 0; i < 10; i++ {
		select {
		case <-got:
		case <-time.After(10 * time.Second):
			t.Fatalf("only %d of 10 queue messages delivered", i)
		}
	}
	// A refused login counts as an authentication failure.
	_, _ = client.Dial(context.Background(), b.stompAddr, client.WithLogin("nobody", "wrong"))

	var scrape string
	eventually(t, 10*time.Second, func() bool {
		scrape = scrapeMetrics(t, b)
		return sampleValue(scrape, "titan_store_commit_seconds_count") >= 20 &&
			sampleValue(scrape, "titan_publish_to_deliver_seconds_count") >= 10 &&
			sampleValue(scrape, "titan_receipt_seconds_count") >= 20 &&
			sampleValue(scrape, "titan_bytes_received_total") > 0 && sampleValue(scrape, "titan_bytes_sent_total") > 0 &&
			strings.Contains(scrape, `titan_events_store_consumer_lag_max_messages{destination="/events-store/metrics",group="default"}`)
	}, "histograms, traffic and events-store lag exported")

	cmd := exec.Command(promtool, "check", "metrics")
	cmd.Stdin = strings.NewReader(scrape)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		t.Fatalf("promtool check metrics: %v\n%s", err, out.String())
	}

	dash, err := os.ReadFile("../../docs/grafana/titan.json")
	requireNoError(t, err)
	names := map[string]bool{}
	for _, m := range regexp.MustCompile(`titan_[a-z_]+`).FindAllString(string(dash), -1) {
		for _, suffix := range []string{"_bucket", "_sum", "_count"} {
			if base, ok := strings.CutSuffix(m, suffix); ok && strings.Contains(scrape, "# TYPE "+base+" histogram") {
				m = base
			}
		}
		names[m] = true
	}
	if len(names) < 15 {
		t.Fatalf("the dashboard queries only %d metrics: %v", len(names), names)
	}
	for name := range names {
		if !strings.Contains(scrape, "# TYPE "+name+" ") {
			t.Errorf("docs/grafana/titan.json queries %s, which /metrics does not export", name)
		}
	}
	n.stop()
}
