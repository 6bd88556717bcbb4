package config

import (
	"errors"
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/titan-broker/titan/internal/address"
	"github.com/titan-broker/titan/internal/dest"
	"github.com/titan-broker/titan/internal/frame"
)

// Validate returns every problem at once (errors.Join), or nil.
func (c *Config) Validate() error {
	var errs []error
	add := func(format string, a ...any) { errs = append(errs, fmt.Errorf(format, a...)) }
	names := map[string]bool{}
	if f := c.FlowControl.Subscriber; f.MaxPendingBytes < 0 || f.ResumePendingBytes < 0 || (f.MaxPendingBytes > 0 && f.ResumePendingBytes >= f.MaxPendingBytes) {
		add("titan.flow-control.subscriber: want 0 <= resume-pending-bytes < max-pending-bytes (got %d, %d)", f.ResumePendingBytes, f.MaxPendingBytes)
	}
	if f := c.FlowControl.Subscriber; f.MaxBufferBytes != 0 && f.MaxBufferBytes < f.MaxPendingBytes {
		add("titan.flow-control.subscriber: want max-buffer-bytes >= max-pending-bytes (got %d, %d)", f.MaxBufferBytes, f.MaxPendingBytes)
	}
	if h := c.FlowControl.Heap; h.HighWatermark < 0 || h.HighWatermark > 1 || h.LowWatermark < 0 || (h.HighWatermark > 0 && h.LowWatermark >= h.HighWatermark) || h.MaxBytes < -1 {
		add("titan.flow-control.heap: want 0 <= low-watermark < high-watermark <= 1 and max-bytes >= -1 (got %g, %g, %d)", h.LowWatermark, h.HighWatermark, h.MaxBytes)
	}
	for i, s := range c.Servers {
		where := fmt.Sprintf("titan.servers[%d] (%s)", i, s.Name)
		if names[s.Name] {
			add("%s: duplicate server name", where)
		}
		names[s.Name] = true
		if s.Protocol != "stomp" {
			add("%s: protocol %q is not supported (want stomp)", where, s.Protocol)
		}
		if s.Transport != "tcp" && s.Transport != "websocket" {
			add("%s: transport %q is not supported (want tcp or websocket)", where, s.Transport)
		}
		if s.Port < 0 || s.Port > 65535 {
			add("%s: port %d out of range 0-65535", where, s.Port)
		}
		p := s.ProtocolOptions
		for _, v := range p.SupportedVersions {
			if _, ok := frame.ParseVersion(v); !ok {
				add("%s: supported-versions: unknown version %q (want 1.0, 1.1, 1.2)", where, v)
			}
		}
		if p.MaxHeaderLength < 0 || p.MaxHeaders < 0 || p.MaxBodyLength < 0 || p.MaxFrameInTransaction < 0 || p.MaxHeadersBytes < 0 {
			add("%s: limits must not be negative", where)
		}
		if (p.HeartbeatX != nil && *p.HeartbeatX < 0) || (p.HeartbeatY != nil && *p.HeartbeatY < 0) {
			add("%s: heartbeat-x and heartbeat-y must be >= 0 ms", where)
		}
		if p.ConnectionTTL < -1 || p.FrameTimeout < -1 || p.ConnectTimeout < 1 || s.TransportOptions.TCPKeepAlive < -1 {
			add("%s: connection-ttl, frame-timeout and transport-options.tcp-keepalive must be >= -1 ms, connect-timeout >= 1 ms", where)
		}
		if p.HeartbeatMin != nil && *p.HeartbeatMin < 1 {
			add("%s: heartbeat-min must be >= 1 ms", where)
		}
		if p.FanoutMode != "" && p.FanoutMode != "virtual" {
			add("%s: fanout-mode %q is not supported (want \"virtual\" or empty)", where, p.FanoutMode)
		}
		if pat, ok := dest.ParsePattern(p.DefaultPattern); !ok || !dest.ValidDefault(pat) {
			add("%s: default-pattern %q is not allowed (want events, events-store or queues; commands and queries cannot be a default)", where, p.DefaultPattern)
		}
		if err := CheckTLS(s.TLS); err != nil {
			add("%s: %v", where, err)
		}
		if s.TLS.Enabled && (s.TLS.CertFile == "" || s.TLS.KeyFile == "") {
			add("%s: tls.enabled needs cert-file and key-file", where)
		}
		switch s.TLS.ClientAuth {
		case "", "none":
		case "request", "require":
			if s.TLS.CAFile == "" {
				add("%s: tls.client-auth %s needs ca-file (the CA that signs client certificates)", where, s.TLS.ClientAuth)
			}
		default:
			add("%s: tls.client-auth %q is not one of none, request, require", where, s.TLS.ClientAuth)
		}
	}
	if err := CheckTLS(c.Monitor.TLS); err != nil {
		add("titan.monitor: %v", err)
	}
	if l := c.Limits; l.MaxConnections < -1 || l.MaxConnectionsPerAddress < -1 || l.LoginBackoff < -1 || l.LoginBackoffMax < 1 {
		add("titan.limits: max-connections, max-connections-per-address and login-backoff must be >= -1, login-backoff-max >= 1 ms")
	}
	if c.Monitor.TLS.Enabled && (c.Monitor.TLS.CertFile == "" || c.Monitor.TLS.KeyFile == "") {
		add("titan.monitor: tls.enabled needs cert-file and key-file")
	}
	if c.Monitor.Port < 0 || c.Monitor.Port > 65535 {
		add("titan.monitor: port %d out of range 0-65535", c.Monitor.Port)
	}
	if h := c.Monitor.HistoryIntervalMs; h != 0 && (h < 100 || h > 60000) {
		add("titan.monitor: history-interval-ms %d out of range 100-60000 (milliseconds between samples)", h)
	}
	for i, a := range c.AddressSettings {
		where := fmt.Sprintf("titan.address-settings[%d] (match %q)", i, a.Match)
		if err := validMatch(a.Match); err != nil {
			add("%s: %v", where, err)
		}
		if _, err := address.ParseFullPolicy(a.AddressFullPolicy); err != nil {
			add("%s: %v", where, err)
		}
		if _, ok := ParseSlowConsumerPolicy(a.SlowConsumerPolicy); !ok {
			add("%s: slow-consumer-policy %q is not supported (want CLOSE or DROP)", where, a.SlowConsumerPolicy)
		}
		if a.RetentionMaxAge != "" {
			if _, err := time.ParseDuration(a.RetentionMaxAge); err != nil {
				add("%s: retention-max-age: %v", where, err)
			}
		}
	}
	if c.Store.Type != "pebble" && c.Store.Type != "memory" {
		add("titan.store: type %q is not supported (want pebble or memory)", c.Store.Type)
	}
	if cl := c.Cluster; cl.Enabled() {
		if cl.Name != "" && cl.NatsURL != "" {
			add("titan.cluster: name (embedded NATS) and nats-url (external NATS) exclude each other")
		}
		if cl.Replicas < 1 || cl.Replicas > 5 {
			add("titan.cluster: replicas %d out of range 1-5", cl.Replicas)
		}
		if cl.Partitions < 0 || cl.Partitions > 256 {
			add("titan.cluster: partitions %d out of range 1-256 (0: the cluster's own)", cl.Partitions)
		}
		if cl.Name != "" {
			if _, _, err := net.SplitHostPort(cl.Listen); err != nil {
				add("titan.cluster: listen %q is not HOST:PORT", cl.Listen)
			}
		}
		if cl.Sync != "always" {
			if d, err := time.ParseDuration(cl.Sync); err != nil || d <= 0 {
				add("titan.cluster: sync %q is neither always nor a positive duration", cl.Sync)
			}
		}
		for _, r := range cl.Routes {
			if !strings.HasPrefix(r, "nats://") && !strings.HasPrefix(r, "nats-route://") {
				add("titan.cluster: route %q is not a nats://HOST:PORT URL", r)
			}
		}
	}
	switch strings.ToLower(c.Log.Level) {
	case "debug", "info", "warn", "error":
	default:
		add("titan.log: level %q is not one of debug, info, warn, error", c.Log.Level)
	}
	return errors.Join(errs...)
}

func validMatch(m string) error {
	if m == "" {
		return errors.New("match must not be empty (use \"#\" for every address)")
	}
	for _, w := range strings.Split(m, ".") {
		if w == "" {
			return errors.New("match has an empty word")
		}
	}
	return nil
}
