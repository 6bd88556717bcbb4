package embed_test

import (
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/titan-broker/titan/embed"
	"github.com/titan-broker/titan/internal/brokertest"
	"github.com/titan-broker/titan/internal/frame"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func start(t *testing.T, cfg embed.Config) *embed.Broker {
	t.Helper()
	b, err := embed.Start(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := b.Shutdown(context.Background()); err != nil {
			t.Error(err)
		}
	})
	return b
}

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	c := &http.Client{}
	defer c.CloseIdleConnections()
	resp, err := c.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

func TestStartServesStompAndMonitorOnLoopback(t *testing.T) {
	b := start(t, embed.Config{})
	if !strings.HasPrefix(b.Addr(), "127.0.0.1:") || strings.HasSuffix(b.Addr(), ":0") {
		t.Fatalf("Addr %q", b.Addr())
	}
	if !strings.HasPrefix(b.MonitorURL(), "http://127.0.0.1:") {
		t.Fatalf("MonitorURL %q", b.MonitorURL())
	}
	c := brokertest.Connect(t, b.Addr())
	c.SendFrame("SUBSCRIBE", "", "destination:/queue/jobs", "id:1", "receipt:r")
	c.Expect(frame.CmdReceipt)
	c.SendFrame("SEND", "hi", "destination:/queue/jobs")
	c.Expect(frame.CmdMessage, "destination:/queue/jobs")
	status, body := get(t, b.MonitorURL()+"/titan/monitor/health")
	if status != 200 || !strings.Contains(body, `"UP"`) {
		t.Fatalf("health %d %s", status, body)
	}
}

func TestStagesRunBetweenRouteAndPublication(t *testing.T) {
	var seen atomic.Int64
	b := start(t, embed.Config{
		DestinationMetrics: true,
		MonitorToken:       "embed-test-token-0123456789",
		Stages: []embed.Stage{embed.StageFunc(func(s *embed.Send) {
			seen.Add(1)
			switch v, _ := s.Header("x-verdict"); v {
			case "reject":
				s.Reject("rejected by policy")
			case "drop":
				s.Drop()
			}
			if s.Group() == "" || s.Destination() != "/queue/jobs" || s.Pattern() != "queues" || s.MessageID() == "" {
				s.Reject("bad view")
			}
		})},
	})
	c := brokertest.Connect(t, b.Addr())
	c.SendFrame("SUBSCRIBE", "", "destination:/queue/jobs", "id:1", "receipt:r")
	c.Expect(frame.CmdReceipt)
	c.SendFrame("SEND", "dropped", "destination:/queue/jobs", "x-verdict:drop", "receipt:d")
	c.Expect(frame.CmdReceipt, "receipt-id:d") // dropped silently, receipt still sent
	c.SendFrame("SEND", "kept", "destination:/queue/jobs")
	f := c.Expect(frame.CmdMessage)
	if string(f.Body) != "kept" {
		t.Fatalf("got %q", f.Body)
	}
	c.SendFrame("SEND", "no", "destination:/queue/jobs", "x-verdict:reject", "receipt:x")
	c.Expect(frame.CmdError, "message:rejected by policy", "receipt-id:x")
	c.ExpectClosed(5 * time.Second)
	if seen.Load() != 3 {
		t.Fatalf("stage saw %d SENDs", seen.Load())
	}

	req, _ := http.NewRequest("GET", b.MonitorURL()+"/metrics", nil)
	req.Header.Set("Authorization", "Bearer embed-test-token-0123456789")
	hc := &http.Client{}
	defer hc.CloseIdleConnections()
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	// The metrics stage runs before the custom stage, so it counts all three SENDs.
	want := `titan_destination_sent_messages_total{destination="/queue/jobs",group="default",pattern="queues"} 3`
	if !strings.Contains(string(body), want) {
		t.Fatalf("metrics lack %q:\n%s", want, body)
	}
}

func TestContextEndShutsDown(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	b, err := embed.Start(ctx, embed.Config{DisableMonitor: true})
	if err != nil {
		t.Fatal(err)
	}
	if b.MonitorAddr() != "" || b.MonitorURL() != "" {
		t.Fatal("monitor should be disabled")
	}
	cancel()
	select {
	case <-b.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("not shut down after ctx ended")
	}
	if err := b.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := embed.Start(ctx, embed.Config{}); err != context.Canceled {
		t.Fatalf("Start with a done ctx: %v", err)
	}
}

func TestConfigFileAndErrors(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "titan-env.yml")
	yml := "titan:\n  servers:\n    - name: s1\n      host: 127.0.0.1\n      port: 0\n  monitor:\n    host: 127.0.0.1\n    port: 0\n  store:\n    type: memory\n"
	if err := os.WriteFile(path, []byte(yml), 0o600); err != nil {
		t.Fatal(err)
	}
	b := start(t, embed.Config{ConfigFile: path})
	if b.Addr() == "" || b.MonitorAddr() == "" {
		t.Fatal("not listening")
	}
	if err := os.WriteFile(path, []byte("titan:\n  bogus: 1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := embed.Start(context.Background(), embed.Config{ConfigFile: path}); err == nil || !strings.Contains(err.Error(), "bogus") {
		t.Fatalf("unknown key: %v", err)
	}
	if _, err := embed.Start(context.Background(), embed.Config{Transport: "carrier-pigeon"}); err == nil {
		t.Fatal("invalid transport accepted")
	}
	// A port in use is an error, and nothing is left listening.
	if _, err := embed.Start(context.Background(), embed.Config{Port: portOf(t, b.Addr())}); err == nil {
		t.Fatal("port in use accepted")
	}
}

func portOf(t *testing.T, addr string) int {
	i := strings.LastIndexByte(addr, ':')
	n := 0
	for _, c := range addr[i+1:] {
		n = n*10 + int(c-'0')
	}
	return n
}

func TestNativePublishMetadataReachesSTOMPClients(t *testing.T) {
	b, err := embed.Start(context.Background(), embed.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Shutdown(context.Background())
	c := brokertest.Connect(t, b.Addr())
	c.SendFrame("SUBSCRIBE", "", "destination:/queue/native", "id:1", "receipt:r")
	c.Expect(frame.CmdReceipt)
	p, err := b.Publish(embed.Message{
		Destination: "/queues/native", Body: []byte("a\x00b"),
		Headers:  map[string]string{"content-type": "text/plain", "x-app": "1"},
		Metadata: map[string]string{"stomp.content-type": "application/json", "tenant": "t1"},
	})
	if err != nil || p.Destination != "/queue/native" {
		t.Fatalf("publish: %+v %v", p, err)
	}
	m := c.Expect(frame.CmdMessage, "content-type:application/json", "x-app:1", "message-id:"+p.MessageID)
	if string(m.Body) != "a\x00b" || !strings.Contains(m.Value("x-titan-metadata"), `"tenant":"t1"`) {
		t.Fatalf("body %q metadata %q", m.Body, m.Value("x-titan-metadata"))
	}
	n := 0
	for _, h := range m.Headers {
		if h.Key == "content-type" {
			n++
		}
	}
	if n != 1 {
		t.Fatalf("%d content-type headers, want exactly one", n)
	}
}
