package config

import (
	"path/filepath"

	"github.com/titan-broker/titan/internal/address"
	"github.com/titan-broker/titan/internal/frame"
)

// DefaultStompPort is the STOMP listener port used when a server entry names none (the
// IANA-registered STOMP port, as ActiveMQ, Artemis and RabbitMQ use).
const DefaultStompPort = 61613

// DefaultMonitorPort is the monitor HTTP API port used when the monitor section names none.
const DefaultMonitorPort = 7777

// UnmarshalYAML decodes one titan.servers[] entry. An absent `port:` key means
// DefaultStompPort; an explicit 0 is kept (pick a free port). It uses yaml.v3's
// function-style unmarshaler so the decoder's strict unknown-key check still applies.
func (s *Server) UnmarshalYAML(unmarshal func(any) error) error {
	type server Server // no methods: no recursion; errors name "config.server"
	v := server{Port: DefaultStompPort}
	if err := unmarshal(&v); err != nil {
		return err
	}
	*s = Server(v)
	return nil
}

// UnmarshalYAML decodes titan.monitor. An absent `port:` key means DefaultMonitorPort; an
// explicit 0 is kept (pick a free port).
func (m *Monitor) UnmarshalYAML(unmarshal func(any) error) error {
	type monitor Monitor
	v := monitor{Port: DefaultMonitorPort}
	if err := unmarshal(&v); err != nil {
		return err
	}
	*m = Monitor(v)
	return nil
}

// Default returns the configuration Titan runs with when nothing is configured.
func Default() Config {
	return Config{
		Servers:     []Server{DefaultServer()},
		Monitor:     Monitor{Host: "127.0.0.1", Port: DefaultMonitorPort},
		FlowControl: FlowControl{Queue: QueueFlow{MaxPendingBytes: address.DefaultMaxPendingBytes}},
		Store:       Store{Type: "pebble", DataDir: "./data"},
		Log:         Log{Level: "info", Format: "text"},
	}
}

// DefaultServer returns the default STOMP listener.
func DefaultServer() Server {
	s := Server{Name: "stomp", Protocol: "stomp", Host: "0.0.0.0", Port: DefaultStompPort, Transport: "tcp"}
	s.applyDefaults()
	return s
}

func ip(v int) *int { return &v }

func (s *Server) applyDefaults() {
	if s.Name == "" {
		s.Name = "stomp"
	}
	if s.Protocol == "" {
		s.Protocol = "stomp"
	}
	if s.Host == "" {
		s.Host = "0.0.0.0"
	}
	if s.Transport == "" {
		s.Transport = "tcp"
	}
	if s.TransportOptions.Path == "" {
		s.TransportOptions.Path = "/stomp"
	}
	p := &s.ProtocolOptions
	if len(p.SupportedVersions) == 0 {
		p.SupportedVersions = []string{"1.0", "1.1", "1.2"}
	}
	if p.MaxHeaderLength == 0 {
		p.MaxHeaderLength = frame.DefaultMaxHeaderLineBytes
	}
	if p.MaxHeaders == 0 {
		p.MaxHeaders = frame.DefaultMaxHeaders
	}
	if p.MaxHeadersBytes == 0 {
		p.MaxHeadersBytes = frame.DefaultMaxHeaderBytes
	}
	if p.MaxBodyLength == 0 {
		p.MaxBodyLength = frame.DefaultMaxBodyBytes
	}
	if p.MaxFrameInTransaction == 0 {
		p.MaxFrameInTransaction = 10000
	}
	if p.HeartbeatX == nil {
		p.HeartbeatX = ip(10000)
	}
	if p.HeartbeatY == nil {
		p.HeartbeatY = ip(10000)
	}
	if p.HeartbeatMin == nil {
		p.HeartbeatMin = ip(1000)
	}
	if p.HeartbeatGrace == 0 {
		p.HeartbeatGrace = 2.0
	}
	if p.ConnectTimeout == 0 {
		p.ConnectTimeout = 10000
	}
	if p.FrameTimeout == 0 {
		p.FrameTimeout = 60000
	}
	if p.MaxSubscriptionsByClient == 0 {
		p.MaxSubscriptionsByClient = 1000
	}
	if p.MaxDestinationsByClient == 0 {
		p.MaxDestinationsByClient = 1000
	}
	if p.MaxTempQueuesByClient == 0 {
		p.MaxTempQueuesByClient = 100
	}
	if p.MaxOutboundBytes == 0 {
		p.MaxOutboundBytes = DefaultSubscriberMaxPendingBytes
	}
	if p.DefaultPrefetch == 0 {
		p.DefaultPrefetch = address.DefaultPrefetch
	}
	if p.DefaultPattern == "" {
		p.DefaultPattern = "events"
	}
}

// ApplyDefaults fills every zero field with its default. Load calls it.
func (c *Config) ApplyDefaults() {
	if len(c.Servers) == 0 {
		c.Servers = []Server{DefaultServer()}
	}
	f := &c.FlowControl
	if f.Subscriber.MaxPendingBytes == 0 {
		f.Subscriber.MaxPendingBytes = DefaultSubscriberMaxPendingBytes
	}
	if f.Subscriber.ResumePendingBytes == 0 {
		f.Subscriber.ResumePendingBytes = f.Subscriber.MaxPendingBytes / 2
	}
	if f.Subscriber.SlowConsumerTimeout == 0 {
		f.Subscriber.SlowConsumerTimeout = 30000
	}
	if f.Subscriber.MaxBufferBytes == 0 {
		f.Subscriber.MaxBufferBytes = 4 * f.Subscriber.MaxPendingBytes
	}
	if f.Heap.HighWatermark == 0 {
		f.Heap.HighWatermark = 0.9
	}
	if f.Heap.LowWatermark == 0 {
		f.Heap.LowWatermark = min(0.7, f.Heap.HighWatermark*0.8) // stays below a lowered high mark
	}
	for i := range c.Servers {
		if c.Servers[i].ProtocolOptions.MaxOutboundBytes == 0 {
			c.Servers[i].ProtocolOptions.MaxOutboundBytes = f.Subscriber.MaxPendingBytes
		}
		c.Servers[i].applyDefaults()
	}
	if c.Monitor.Host == "" {
		c.Monitor.Host = "127.0.0.1"
	}
	if c.Monitor.HistoryIntervalMs == 0 {
		c.Monitor.HistoryIntervalMs = 5000
	}
	if c.FlowControl.Queue.MaxPendingBytes == 0 {
		c.FlowControl.Queue.MaxPendingBytes = address.DefaultMaxPendingBytes
	}
	if c.DuplicateDetection.Window == 0 {
		c.DuplicateDetection.Window = 600000
	}
	if c.DuplicateDetection.CacheSize == 0 {
		c.DuplicateDetection.CacheSize = 100000
	}
	if c.Limits.MaxDestinations == 0 {
		c.Limits.MaxDestinations = 100000
	}
	if c.Limits.MaxGroups == 0 {
		c.Limits.MaxGroups = 10000
	}
	if c.Limits.DestinationIdleTimeout == 0 {
		c.Limits.DestinationIdleTimeout = 300000
	}
	if c.Limits.MaxDurableSubscriptions == 0 {
		c.Limits.MaxDurableSubscriptions = 10000
	}
	if c.Limits.DurableSubscriptionIdleTimeout == 0 {
		c.Limits.DurableSubscriptionIdleTimeout = -1
	}
	if c.Limits.MaxConnections == 0 {
		c.Limits.MaxConnections = 100000
	}
	if c.Limits.MaxConnectionsPerAddress == 0 {
		c.Limits.MaxConnectionsPerAddress = 1000
	}
	if c.Limits.LoginBackoff == 0 {
		c.Limits.LoginBackoff = 100
	}
	if c.Limits.LoginBackoffMax == 0 {
		c.Limits.LoginBackoffMax = 10000
	}
	if c.Limits.MaxLargeFrameBytes == 0 {
		c.Limits.MaxLargeFrameBytes = 512 << 20
	}
	if c.Limits.MaxPendingRequests == 0 {
		c.Limits.MaxPendingRequests = 100000
	}
	if c.Limits.MaxPendingRequestsByClient == 0 {
		c.Limits.MaxPendingRequestsByClient = 1000
	}
	if c.Store.Type == "" {
		c.Store.Type = "pebble"
	}
	if c.Store.DataDir == "" {
		c.Store.DataDir = "./data"
	}
	if c.Log.Level == "" {
		c.Log.Level = "info"
	}
	if c.Cluster.Enabled() {
		if c.Cluster.Replicas == 0 {
			c.Cluster.Replicas = 3
		}
		if c.Cluster.Listen == "" && c.Cluster.NatsURL == "" {
			c.Cluster.Listen = "0.0.0.0:6222"
		}
		if c.Cluster.StoreDir == "" {
			c.Cluster.StoreDir = filepath.Join(c.Store.DataDir, "jetstream")
		}
		if c.Cluster.Sync == "" {
			c.Cluster.Sync = "always"
		}
	}
	if c.Log.Format == "" {
		c.Log.Format = "text"
	}
}
