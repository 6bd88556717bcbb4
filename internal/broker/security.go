package broker

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/titan-broker/titan/internal/auth"
	"github.com/titan-broker/titan/internal/config"
	"github.com/titan-broker/titan/internal/dest"
	"github.com/titan-broker/titan/internal/session"
)

// security is the broker's authentication and authorization (DESIGN §8).
type security struct {
	auth  *auth.Authority
	stage *auth.Stage // nil in open mode: every permission, no stage on the routes
	// exists reports whether a queue or events-store log exists (nil in open mode).
	exists func(dest.Identity) bool
}

// stageExists is s.exists, false in open mode.
func (s *security) stageExists(id dest.Identity) bool { return s.exists != nil && s.exists(id) }

func newSecurity(b *Broker) (*security, error) {
	var a *auth.Authority
	a, err := auth.New(auth.Options{Path: b.cfg.Security.UsersFile, Logger: b.log.With("component", "auth"),
		OnReload: func() { b.revoke(a) }})
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("broker: security: %w (create it with `titan user add NAME --users %s`)", err, b.cfg.Security.UsersFile)
	}
	if err != nil {
		return nil, fmt.Errorf("broker: security: %w", err)
	}
	s := &security{auth: a}
	if !a.Open() {
		s.exists = func(id dest.Identity) bool {
			if id.Pattern == dest.PatternEventsStore { // a log exists once it holds a record
				_, last, err := b.durable.Bounds(id)
				return err != nil || last > 0 // on a store error, let the SEND fail there
			}
			_, ok := b.p.dispatcher.Lookup(id)
			return ok
		}
		// Who made which durable subscription and destination, kept in the store's metadata
		// (issue #29: ownership of durable names, per-user quotas).
		owners := auth.NewOwners(func() auth.Meta {
			if b.store == nil {
				return nil
			}
			return b.store
		}, b.ownerExists)
		s.stage = auth.NewStage(a, s.exists, b.log.With("component", "auth")).WithOwners(owners)
	}
	return s, nil
}

// Auth returns the broker's users and permissions (Reload re-reads the users file).
func (b *Broker) Auth() *auth.Authority { return b.sec.auth }

// ReloadUsers re-reads the users file (SIGHUP, the monitor API): the next frames of existing
// connections are checked against the new users and permissions, and connections whose user
// was removed, or whose queue or events-store subscription lost its consume permission, get
// "ERROR message:access revoked" and are closed (see revoke).
func (b *Broker) ReloadUsers() error { return b.sec.auth.Reload() }

// sessionAuth adapts the Authority to the session's Authenticator port.
type sessionAuth struct{ a *auth.Authority }

func (s sessionAuth) Authenticate(c session.Credentials) (string, error) {
	return s.a.Authenticate(auth.Credentials{Login: c.Login, Passcode: c.Passcode, Remote: c.Remote, Certificates: c.Certificates})
}

// serverTLS builds a listener's TLS configuration (nil when TLS is off): its certificate and,
// with client-auth, the CA pool client certificates must chain to.
func serverTLS(sc config.Server) (*tls.Config, error) {
	return listenerTLS("server "+sc.Name, sc.TLS)
}

// listenerTLS builds the TLS configuration of one listener (what names it in errors).
func listenerTLS(what string, t config.TLS) (*tls.Config, error) {
	if !t.Enabled {
		return nil, nil
	}
	cert, err := tls.LoadX509KeyPair(t.CertFile, t.KeyFile)
	if err != nil {
		return nil, fmt.Errorf("broker: %s: tls: %w", what, err)
	}
	// No TLS 1.3 session tickets: STOMP connections are long-lived, so resumption saves
	// little, and the post-handshake ticket message raced in clients that read and write one
	// TLS socket from two threads (stomp.py: 4 of 240 certificate logins never got CONNECTED
	// with tickets, 0 of 270 without).
	conf := &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12, SessionTicketsDisabled: true}
	// tls.min-version and tls.cipher-suites (issue 29; checked by config.Validate).
	if conf.MinVersion, err = config.TLSVersion(t.MinVersion); err != nil {
		return nil, fmt.Errorf("broker: %s: %w", what, err)
	}
	if conf.CipherSuites, err = config.CipherSuiteIDs(t.CipherSuites); err != nil {
		return nil, fmt.Errorf("broker: %s: %w", what, err)
	}
	switch t.ClientAuth {
	case "request":
		conf.ClientAuth = tls.VerifyClientCertIfGiven
	case "require":
		conf.ClientAuth = tls.RequireAndVerifyClientCert
	default:
		return conf, nil
	}
	pem, err := os.ReadFile(t.CAFile)
	if err != nil {
		return nil, fmt.Errorf("broker: %s: tls ca-file: %w", what, err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("broker: %s: tls ca-file %s holds no PEM certificate", what, t.CAFile)
	}
	conf.ClientCAs = pool
	return conf, nil
}

// authCollector serves the authentication failure counters on /metrics.
type authCollector struct {
	b       *Broker
	quota   *prometheus.Desc
	a       *auth.Authority
	stage   *auth.Stage
	fail    *prometheus.Desc
	refused *prometheus.Desc
	reloads *prometheus.Desc
}

func newAuthCollector(b *Broker, s *security) *authCollector {
	return &authCollector{
		b: b, a: s.auth, stage: s.stage,
		quota:   prometheus.NewDesc("titan_quota_refused_total", "Frames refused by a per-user quota of the users file, by quota.", []string{"quota"}, nil),
		fail:    prometheus.NewDesc("titan_auth_failures_total", "Refused CONNECT authentications, by reason.", []string{"reason"}, nil),
		refused: prometheus.NewDesc("titan_auth_refused_frames_total", "SEND and SUBSCRIBE frames refused by authorization.", nil, nil),
		reloads: prometheus.NewDesc("titan_auth_reloads_total", "Successful reloads of the users file.", nil, nil),
	}
}

// Describe implements prometheus.Collector.
func (c *authCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.fail
	ch <- c.refused
	ch <- c.reloads
	ch <- c.quota
}

// Collect implements prometheus.Collector.
func (c *authCollector) Collect(ch chan<- prometheus.Metric) {
	for r := range c.a.Failures {
		ch <- prometheus.MustNewConstMetric(c.fail, prometheus.CounterValue, float64(c.a.Failures[r].Load()), auth.Reason(r).String())
	}
	var refused uint64
	if c.stage != nil {
		refused = c.stage.Refused.Load()
	}
	ch <- prometheus.MustNewConstMetric(c.refused, prometheus.CounterValue, float64(refused))
	ch <- prometheus.MustNewConstMetric(c.reloads, prometheus.CounterValue, float64(c.a.Reloads.Load()))
	for q := range numQuotas {
		ch <- prometheus.MustNewConstMetric(c.quota, prometheus.CounterValue, float64(c.b.quotaRefused(q)), quotaNames[q])
	}
}

// adminUsers adapts the Authority to the monitor API's Users port.
type adminUsers struct{ a *auth.Authority }

func (u adminUsers) Login(user, password, remote string) error {
	if user == "" {
		return auth.ErrAccessRefused // the anonymous user never logs in to the monitor API
	}
	_, err := u.a.Authenticate(auth.Credentials{Login: user, Passcode: password, Remote: stringAddr(remote)})
	return err
}

// monitorPermission is the permission a monitor request needs: manage for one that changes
// something, browse for one that reads.
func monitorPermission(manage bool) auth.Permission {
	if manage {
		return auth.Manage
	}
	return auth.Browse
}

func (u adminUsers) May(user string, manage bool) bool {
	return u.a.Has(user, monitorPermission(manage))
}

func (u adminUsers) MayOn(user string, manage bool, id dest.Identity) bool {
	return u.a.Allowed(user, id.Group, id.Pattern, id.Channel)&monitorPermission(manage) != 0
}

func (u adminUsers) Operator(user string, manage bool) bool {
	return u.a.Operator(user)&monitorPermission(manage) != 0
}

func (u adminUsers) Reload() (int, error) {
	if err := u.a.Reload(); err != nil {
		return 0, err
	}
	return u.a.Users(), nil
}

// stringAddr is a remote address known only as text (an HTTP request's RemoteAddr).
type stringAddr string

func (a stringAddr) Network() string { return "tcp" }
func (a stringAddr) String() string  { return string(a) }

// monitorHosts are the Host names the monitor API answers to besides IP literals and
// loopback names: its listen host (unless a wildcard address) and allowed-hosts.
func monitorHosts(m config.Monitor) []string {
	hosts := append([]string(nil), m.AllowedHosts...)
	if m.Host != "" && m.Host != "0.0.0.0" && m.Host != "::" {
		hosts = append(hosts, m.Host)
	}
	return hosts
}

// MinMonitorTokenBytes is the shortest monitor bearer token the broker accepts (issue #29:
// the token is the whole credential and the API answers as fast as it can, so it must not be
// guessable; 16 bytes of a random token are 96 to 128 bits).
const MinMonitorTokenBytes = 16

// checkMonitorToken refuses a configured monitor token shorter than MinMonitorTokenBytes.
func checkMonitorToken(m config.Monitor) error {
	if m.Token != "" && len(m.Token) < MinMonitorTokenBytes {
		return fmt.Errorf("broker: titan.monitor.token is %d bytes; it must be at least %d (make one with `openssl rand -base64 24`)", len(m.Token), MinMonitorTokenBytes)
	}
	return nil
}

// checkMonitorExposure refuses to start a monitor API that would listen beyond loopback
// without any authentication: anyone on the network could publish and delete queues.
func checkMonitorExposure(cfg config.Config, open bool) error {
	m := cfg.Monitor
	if !m.IsEnabled() || auth.IsLoopbackHost(m.Host) || m.Token != "" || !open {
		return nil
	}
	return fmt.Errorf("broker: the monitor API would listen on %s without authentication; "+
		"configure users (titan serve --users FILE, titan.security.users-file; create them with `titan user add`), "+
		"or a token (--monitor-token, titan.monitor.token), or bind it to loopback (--monitor-host 127.0.0.1)", m.Addr())
}

// wsHosts are the Host names a WebSocket server answers browsers on besides IP literals and
// loopback names: its listen host (unless a wildcard address) and allowed-hosts.
func wsHosts(sc config.Server) []string {
	hosts := append([]string(nil), sc.TransportOptions.AllowedHosts...)
	if sc.Host != "" && sc.Host != "0.0.0.0" && sc.Host != "::" {
		hosts = append(hosts, sc.Host)
	}
	return hosts
}
