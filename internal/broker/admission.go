package broker

import (
	"errors"
	"net"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/titan-broker/titan/internal/admin"
	"github.com/titan-broker/titan/internal/admission"
	"github.com/titan-broker/titan/internal/config"
	"github.com/titan-broker/titan/internal/frame"
	"github.com/titan-broker/titan/internal/session"
)

// Limits before login (issue 29): connection limits at accept, the login back-off shared by
// every STOMP server and the monitor.

// startAdmission makes the connection limits and the login throttle from the config.
func (b *Broker) startAdmission() {
	l := b.cfg.Limits
	b.conns = admission.NewConns(l.MaxConnections, l.MaxConnectionsPerAddress)
	if l.LoginBackoff > 0 {
		b.logins = admission.NewLoginThrottle(admission.ThrottleOptions{
			Base: config.Ms(l.LoginBackoff), Max: config.Ms(l.LoginBackoffMax), Logger: b.log,
		})
	}
}

// ReasonConnectionLimit is the ERROR message header of a connection refused at accept.
const ReasonConnectionLimit = "connection limit reached"

// admit counts c against the connection limits; when over one it writes ERROR `connection
// limit reached` (bounded by a second), closes c, counts the close and returns false.
func (b *Broker) admit(c net.Conn) (release func(), ok bool) {
	release, err := b.conns.Acquire(c.RemoteAddr().String())
	if err == nil {
		return release, true
	}
	detail := "the broker holds its maximum of connections (limits.max-connections)\n"
	if errors.Is(err, admission.ErrAddressLimit) {
		detail = "this address holds its maximum of connections (limits.max-connections-per-address)\n"
	}
	// No session (and no version) yet: STOMP 1.0's form, which every client reads.
	raw, _ := frame.AppendFrame(nil, &frame.Frame{Command: frame.CmdError, Headers: []frame.Header{
		{Key: frame.HdrMessage, Value: ReasonConnectionLimit},
		{Key: frame.HdrContentType, Value: "text/plain"},
		{Key: frame.HdrContentLength, Value: strconv.Itoa(len(detail))},
	}, Body: []byte(detail)}, frame.V10)
	_ = c.SetWriteDeadline(time.Now().Add(time.Second))
	_, _ = c.Write(raw)
	_ = c.Close()
	b.log.Debug("connection refused", "remote", c.RemoteAddr().String(), "err", err)
	if r := int(session.CloseConnectionLimit); r < len(b.Closed) {
		b.Closed[r].Add(1)
	}
	return nil, false
}

// admissionCollector serves titan_connections_refused_total{limit}, titan_login_failures_total
// and titan_login_throttled_total{outcome}.
type admissionCollector struct {
	b                            *Broker
	refused, failures, throttled *prometheus.Desc
}

func newAdmissionCollector(b *Broker) *admissionCollector {
	return &admissionCollector{
		b: b,
		refused: prometheus.NewDesc("titan_connections_refused_total",
			"Connections refused at accept with ERROR connection limit reached, by limit (total, per_address).", []string{"limit"}, nil),
		failures: prometheus.NewDesc("titan_login_failures_total",
			"Failed logins counted by the login back-off (STOMP and monitor).", nil, nil),
		throttled: prometheus.NewDesc("titan_login_throttled_total",
			"Login attempts held by the back-off: delayed (waited before their check) or refused (unchecked: the wait would pass limits.login-backoff-max).", []string{"outcome"}, nil),
	}
}

// Describe implements prometheus.Collector.
func (c *admissionCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.refused
	ch <- c.failures
	ch <- c.throttled
}

// Collect implements prometheus.Collector.
func (c *admissionCollector) Collect(ch chan<- prometheus.Metric) {
	var total, perAddr, fails, delayed, refused uint64
	if cs := c.b.conns; cs != nil {
		total, perAddr = cs.RefusedTotal.Load(), cs.RefusedAddress.Load()
	}
	if lt := c.b.logins; lt != nil {
		fails, delayed, refused = lt.Failures.Load(), lt.Delayed.Load(), lt.Refused.Load()
	}
	ch <- prometheus.MustNewConstMetric(c.refused, prometheus.CounterValue, float64(total), "total")
	ch <- prometheus.MustNewConstMetric(c.refused, prometheus.CounterValue, float64(perAddr), "per_address")
	ch <- prometheus.MustNewConstMetric(c.failures, prometheus.CounterValue, float64(fails))
	ch <- prometheus.MustNewConstMetric(c.throttled, prometheus.CounterValue, float64(delayed), "delayed")
	ch <- prometheus.MustNewConstMetric(c.throttled, prometheus.CounterValue, float64(refused), "refused")
}

// adminThrottle returns the login throttle as the monitor's port (nil when off: a nil
// *LoginThrottle in the interface would not be nil).
func (b *Broker) adminThrottle() admin.LoginThrottle {
	if b.logins == nil {
		return nil
	}
	return b.logins
}
