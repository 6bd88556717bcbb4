// Package embed starts a Titan broker inside a Go program: the same broker `titan serve`
// runs, with its STOMP listeners, monitor API, metrics and console, configured in code.
//
//	b, err := embed.Start(ctx, embed.Config{}) // STOMP and monitor on 127.0.0.1, free ports
//	if err != nil { … }
//	defer b.Shutdown(context.Background())
//	conn, _ := net.Dial("tcp", b.Addr())
//
// A program can also put its own logic on the SEND path: a Stage runs for every published
// message after the route stage and before the message reaches its dispatcher queue or
// subscriptions (reference 000's custom handlers "between those stages"), and may reject or
// drop it. Config.DestinationMetrics installs the stage Titan ships, per-destination
// message and byte counters on /metrics.
//
// Everything exported is safe for concurrent use.
package embed

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/titan-broker/titan/internal/broker"
	"github.com/titan-broker/titan/internal/config"
	"github.com/titan-broker/titan/internal/metrics"
	"github.com/titan-broker/titan/internal/router"
)

// Version is the broker version (reported in CONNECTED and by the monitor API).
const Version = broker.Version

// shutdownOnCancel bounds the shutdown Start's ctx triggers when it ends.
const shutdownOnCancel = 10 * time.Second

// Config configures an embedded broker. The zero value is a broker for tests and embedding:
// one STOMP TCP listener and the monitor API, both on 127.0.0.1 with ports the OS picks, the
// memory store, logs discarded.
//
// With ConfigFile set, the file (Titan's titan-env.yml shape) is the base instead, and only
// the non-zero fields below override it.
type Config struct {
	// ConfigFile is a titan-env.yml to start from ("" for the defaults above). Unknown keys
	// and invalid values are errors from Start, naming the key and line.
	ConfigFile string

	// Host is the first STOMP server's listen host (default "127.0.0.1").
	Host string
	// Port is the first STOMP server's port (default 0: the OS picks a free port; read it
	// back with Addr).
	Port int
	// Transport is "tcp" (default) or "websocket" for the first STOMP server.
	Transport string
	// WebSocketPath is the upgrade path when Transport is "websocket" (default "/stomp").
	WebSocketPath string

	// DisableMonitor turns the monitor API, /metrics and the console off.
	DisableMonitor bool
	// MonitorHost is the monitor API's listen host (default "127.0.0.1").
	MonitorHost string
	// MonitorPort is the monitor API's port (default 0: the OS picks; see MonitorAddr).
	MonitorPort int
	// MonitorToken, when set, is required on every monitor API call as
	// "Authorization: Bearer <token>".
	MonitorToken string

	// Store is "memory" (default without ConfigFile) or "pebble" (durable, in DataDir).
	Store string
	// DataDir is the pebble store's directory (default "./data").
	DataDir string

	// FanoutMode routes events SENDs through dispatcher queues and one consumer per
	// destination (reference 000's fanout-mode "virtual") on every server.
	FanoutMode bool
	// DefaultPattern routes bare destinations: "events" (default), "events-store" or
	// "queues".
	DefaultPattern string

	// Logger receives the broker's logs (nil: discarded).
	Logger *slog.Logger
	// Stages run, in order, on every SEND between routing and publication. See Stage.
	Stages []Stage
	// DestinationMetrics installs, before Stages, a stage counting messages and body bytes
	// per (group, destination), exported on /metrics as
	// titan_destination_sent_messages_total and titan_destination_sent_bytes_total (at most
	// 10000 pairs; more are counted under "_other").
	DestinationMetrics bool
}

func (cfg *Config) build() (config.Config, error) {
	var c config.Config
	if cfg.ConfigFile != "" {
		var err error
		if c, err = config.Load(cfg.ConfigFile); err != nil {
			return c, err
		}
	} else {
		c = config.Default()
		c.Servers[0].Host, c.Servers[0].Port = "127.0.0.1", 0
		c.Monitor.Host, c.Monitor.Port = "127.0.0.1", 0
		c.Store.Type = "memory"
	}
	s0 := &c.Servers[0]
	setStr := func(dst *string, v string) {
		if v != "" {
			*dst = v
		}
	}
	setStr(&s0.Host, cfg.Host)
	if cfg.Port != 0 {
		s0.Port = cfg.Port
	}
	setStr(&s0.Transport, cfg.Transport)
	setStr(&s0.TransportOptions.Path, cfg.WebSocketPath)
	if cfg.DisableMonitor {
		off := false
		c.Monitor.Enabled = &off
	}
	setStr(&c.Monitor.Host, cfg.MonitorHost)
	if cfg.MonitorPort != 0 {
		c.Monitor.Port = cfg.MonitorPort
	}
	setStr(&c.Monitor.Token, cfg.MonitorToken)
	setStr(&c.Store.Type, cfg.Store)
	setStr(&c.Store.DataDir, cfg.DataDir)
	for i := range c.Servers {
		if cfg.FanoutMode {
			c.Servers[i].ProtocolOptions.FanoutMode = "virtual"
		}
		setStr(&c.Servers[i].ProtocolOptions.DefaultPattern, cfg.DefaultPattern)
	}
	c.ApplyDefaults()
	return c, nil
}

// Broker is a running embedded broker. Safe for concurrent use.
type Broker struct {
	b    *broker.Broker
	stop chan struct{} // closed by Shutdown: ends the ctx watcher
	done chan struct{} // closed when shutdown completed

	once sync.Once
	err  error // Shutdown's result; written once, read after done is closed
}

// Start builds a broker from cfg, binds its listeners and starts serving. When Start returns
// without error every listener is bound (Addr and MonitorAddr are final). The broker lives
// until Shutdown is called or ctx ends, whichever is first; when ctx ends it shuts down
// within 10 seconds, and Done is closed once it has.
//
// Errors: ctx.Err() when ctx is already done; an invalid
// configuration (every problem, joined); a listener that cannot bind (nothing is left
// listening).
func Start(ctx context.Context, cfg Config) (*Broker, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	c, err := cfg.build()
	if err != nil {
		return nil, err
	}
	var stages []router.Stage
	if cfg.DestinationMetrics {
		stages = append(stages, metrics.NewDestinationStage(0))
	}
	for _, s := range cfg.Stages {
		if s != nil {
			stages = append(stages, adaptStage(s))
		}
	}
	b, err := broker.New(c, broker.Options{Logger: cfg.Logger, SendStages: stages})
	if err != nil {
		return nil, err
	}
	if err := b.Start(); err != nil {
		return nil, err
	}
	h := &Broker{b: b, stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		select {
		case <-ctx.Done():
			sctx, cancel := context.WithTimeout(context.Background(), shutdownOnCancel)
			defer cancel()
			_ = h.Shutdown(sctx)
		case <-h.stop:
		}
	}()
	return h, nil
}

// Addr returns the first STOMP server's bound address (host:port), e.g. "127.0.0.1:53211".
func (h *Broker) Addr() string {
	if a := h.b.Addrs(); len(a) > 0 {
		return a[0]
	}
	return ""
}

// Addrs returns every STOMP server's bound address, in configuration order.
func (h *Broker) Addrs() []string { return h.b.Addrs() }

// MonitorAddr returns the monitor API's bound address (host:port), "" when disabled.
func (h *Broker) MonitorAddr() string { return h.b.MonitorAddr() }

// MonitorURL returns "http://" + MonitorAddr(), the value for `titan --addr`; "" when the
// monitor is disabled.
func (h *Broker) MonitorURL() string {
	if a := h.MonitorAddr(); a != "" {
		return "http://" + a
	}
	return ""
}

// Shutdown stops accepting, closes every connection (after a final flush bounded by ctx),
// stops the monitor API and waits for the broker's goroutines. It returns ctx.Err() when
// ctx ends first. Calling it again returns the first call's result once that call finished.
func (h *Broker) Shutdown(ctx context.Context) error {
	h.once.Do(func() {
		close(h.stop)
		h.err = h.b.Shutdown(ctx)
		close(h.done)
	})
	<-h.done
	return h.err
}

// Done is closed when the broker has shut down (by Shutdown or the end of Start's ctx).
func (h *Broker) Done() <-chan struct{} { return h.done }
