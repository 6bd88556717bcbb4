package config

import (
	"strings"
	"testing"

	"github.com/titan-broker/titan/internal/address"
	"github.com/titan-broker/titan/internal/dest"
)

const fullYAML = `
titan:
  servers:
    - name: stomp-dispatch
      protocol: stomp
      host: 127.0.0.1
      port: 61613
      transport: tcp
      protocol-options:
        supported-versions: ["1.1", "1.2"]
        max-header-length: 2048
        max-headers: 50
        max-body-length: 1048576
        max-frame-in-transaction: 100
        heartbeat-x: 5000
        heartbeat-y: 0
        max-subscriptions-by-client: 10
        fanout-mode: "virtual"
    - name: web
      protocol: stomp
      port: 15674
      transport: websocket
      transport-options:
        path: /ws
  monitor:
    enabled: true
    port: 7777
    token: secret
  flow-control:
    queue:
      max-pending-bytes: 1048576
      resume-pending-bytes: 524288
    heap:
      high-watermark: 0.9
      low-watermark: 0.7
  address-settings:
    - match: "ring.#"
      default-ring-size: 3
    - match: "ring.prices.*"
      max-deliveries: 5
      address-full-policy: FAIL
  store:
    type: memory
`

func TestParseReadsTitanShape(t *testing.T) {
	c, err := Parse([]byte(fullYAML))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	s := c.Servers[0]
	if s.Name != "stomp-dispatch" || s.ProtocolOptions.FanoutMode != "virtual" || *s.ProtocolOptions.HeartbeatY != 0 ||
		s.ProtocolOptions.MaxHeaders != 50 || len(s.Versions()) != 2 {
		t.Fatalf("server 0: %+v", s)
	}
	if w := c.Servers[1]; w.Transport != "websocket" || w.TransportOptions.Path != "/ws" || w.ProtocolOptions.MaxHeaderLength != 10240 {
		t.Fatalf("server 1 (defaults applied): %+v", w)
	}
	if c.Monitor.Token != "secret" || c.FlowControl.Queue.MaxPendingBytes != 1<<20 || c.Store.Type != "memory" {
		t.Fatalf("monitor/flow/store: %+v %+v %+v", c.Monitor, c.FlowControl, c.Store)
	}
}

func TestUnknownKeyNamesKeyAndLine(t *testing.T) {
	_, err := Parse([]byte("titan:\n  servers:\n    - name: a\n      prot0col: stomp\n"))
	if err == nil || !strings.Contains(err.Error(), "line 4") || !strings.Contains(err.Error(), "prot0col") {
		t.Fatalf("error %v must name the key and line 4", err)
	}
}

func TestValidateReportsEveryProblem(t *testing.T) {
	c, err := Parse([]byte(`
titan:
  servers:
    - name: a
      protocol: amqp
      transport: quic
      port: 70000
      protocol-options:
        default-pattern: commands
        fanout-mode: real
  address-settings:
    - match: "a..b"
      address-full-policy: PAGE
  store:
    type: postgres
  monitor: {history-interval-ms: 50}
`))
	if err != nil {
		t.Fatal(err)
	}
	err = c.Validate()
	if err == nil {
		t.Fatal("invalid config validated")
	}
	for _, want := range []string{"protocol \"amqp\"", "transport \"quic\"", "port 70000", "default-pattern \"commands\"",
		"fanout-mode \"real\"", "empty word", "PAGE", "type \"postgres\"", "history-interval-ms 50 out of range 100-60000"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("missing %q in:\n%v", want, err)
		}
	}
}

func TestAddressMatching(t *testing.T) {
	cases := []struct {
		match, channel string
		want           bool
	}{
		{"#", "a", true}, {"#", "a.b.c", true}, {"ring.#", "ring", true}, {"ring.#", "ring.a.b", true},
		{"ring.*", "ring.a", true}, {"ring.*", "ring", false}, {"ring.*", "ring.a.b", false},
		{"a.*.c", "a.b.c", true}, {"a.#.c", "a.c", true}, {"a.#.c", "a.x.y.c", true}, {"a.b", "a.b.c", false},
	}
	for _, tc := range cases {
		if got := MatchAddress(tc.match, tc.channel); got != tc.want {
			t.Errorf("MatchAddress(%q, %q) = %v", tc.match, tc.channel, got)
		}
	}
}

func TestResolverMostSpecificWinsAndMerges(t *testing.T) {
	c, err := Parse([]byte(fullYAML))
	if err != nil {
		t.Fatal(err)
	}
	r := NewResolver(&c)
	q := r.Settings(dest.Identity{Group: "default", Pattern: dest.PatternQueues, Channel: "ring.prices.eu"})
	if q.RingSize != 3 || q.MaxDeliveries != 5 || q.FullPolicy != address.PolicyFail || q.Match != "ring.prices.*" || q.MaxPendingBytes != 1<<20 {
		t.Fatalf("merged settings %+v", q)
	}
	other := r.Settings(dest.Identity{Group: "default", Pattern: dest.PatternQueues, Channel: "orders"})
	if other.RingSize != 0 || other.Match != "" || other.FullPolicy != address.PolicyBlock {
		t.Fatalf("unmatched settings %+v", other)
	}
	ev := r.Settings(dest.Identity{Group: "default", Pattern: dest.PatternEvents, Channel: "ring.x"})
	if ev.RingSize != 0 || ev.Capacity != address.DefaultEventsCapacity {
		t.Fatalf("events take no ring size: %+v", ev)
	}
}

// TestPortDefaults pins the titan-env.yml port rule: a server entry or monitor section
// without `port:` listens on the default port (Titan's own example file omits it); an
// explicit `port: 0` still picks a free port.
func TestPortDefaults(t *testing.T) {
	cases := []struct {
		name               string
		yaml               string
		wantStomp, wantMon []int
	}{
		{"no port keys", "titan:\n  servers:\n    - name: a\n      host: 127.0.0.1\n  monitor:\n    host: 127.0.0.1\n", []int{61613}, []int{7777}},
		{"no monitor section", "titan:\n  servers:\n    - name: a\n", []int{61613}, []int{7777}},
		{"explicit zero", "titan:\n  servers:\n    - name: a\n      port: 0\n  monitor:\n    port: 0\n", []int{0}, []int{0}},
		{"explicit ports", "titan:\n  servers:\n    - name: a\n      port: 1234\n    - name: b\n      transport: websocket\n  monitor:\n    port: 8080\n", []int{1234, 61613}, []int{8080}},
		{"empty document", "", []int{61613}, []int{7777}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Parse([]byte(tc.yaml))
			if err != nil {
				t.Fatal(err)
			}
			if len(c.Servers) != len(tc.wantStomp) {
				t.Fatalf("servers = %d, want %d", len(c.Servers), len(tc.wantStomp))
			}
			for i, want := range tc.wantStomp {
				if c.Servers[i].Port != want {
					t.Errorf("servers[%d].port = %d, want %d", i, c.Servers[i].Port, want)
				}
			}
			if c.Monitor.Port != tc.wantMon[0] {
				t.Errorf("monitor.port = %d, want %d", c.Monitor.Port, tc.wantMon[0])
			}
		})
	}
	// The strict unknown-key check still applies inside a server entry and the monitor.
	for _, bad := range []string{"titan:\n  servers:\n    - name: a\n      prot: 1\n", "titan:\n  monitor:\n    prt: 1\n"} {
		if _, err := Parse([]byte(bad)); err == nil || !strings.Contains(err.Error(), "not found") {
			t.Errorf("Parse(%q) = %v, want an unknown-field error", bad, err)
		}
	}
}

// titan.cluster parses, defaults (replicas 3, listen 0.0.0.0:6222, store dir under the
// data dir, sync always) and validates.
func TestClusterConfig(t *testing.T) {
	c, err := Parse([]byte(`titan:
  store: {data-dir: /var/lib/titan}
  cluster:
    name: prod
    node-name: a
    routes: [nats://a:6222, nats://b:6222, nats://c:6222]
`))
	if err != nil {
		t.Fatal(err)
	}
	c.ApplyDefaults()
	cl := c.Cluster
	if !cl.Enabled() || cl.Replicas != 3 || cl.Listen != "0.0.0.0:6222" || cl.StoreDir != "/var/lib/titan/jetstream" || cl.Sync != "always" {
		t.Fatalf("defaults: %+v", cl)
	}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	if Default().Cluster.Enabled() {
		t.Fatal("cluster mode must be off by default")
	}
	bad := c
	bad.Cluster.Routes = []string{"a:6222"}
	bad.Cluster.Sync = "sometimes"
	bad.Cluster.Replicas = 7
	bad.Cluster.NatsURL = "nats://x:4222"
	err = bad.Validate()
	for _, want := range []string{"route \"a:6222\"", "sync \"sometimes\"", "replicas 7", "exclude each other"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Validate() = %v, want it to mention %s", err, want)
		}
	}
}
