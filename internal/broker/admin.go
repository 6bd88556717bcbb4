package broker

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/titan-broker/titan/internal/admin"
	"github.com/titan-broker/titan/internal/dispatch"
	"github.com/titan-broker/titan/internal/router"
	"github.com/titan-broker/titan/internal/session"
)

// adminServer is the monitor HTTP server (DESIGN §7): the admin API, /metrics and the web
// console, served by internal/admin on titan.monitor's address.
type adminServer struct {
	b   *Broker
	ln  net.Listener
	srv *http.Server
}

func newAdminServer(b *Broker) (*adminServer, error) {
	conf, err := listenerTLS("monitor", b.cfg.Monitor.TLS)
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", b.cfg.Monitor.Addr())
	if err != nil {
		return nil, err
	}
	if conf != nil {
		ln = tls.NewListener(ln, conf) // HTTPS with the listeners' TLS settings
	}
	a := &adminServer{b: b, ln: ln}
	a.srv = &http.Server{
		Handler:           b.adminHandler(),
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       time.Minute, // a trickled request body cannot hold a handler forever
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    64 << 10,
	}
	return a, nil
}

func (a *adminServer) start() {
	a.b.goroutine("admin-http", func() {
		if err := a.srv.Serve(a.ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			a.b.log.Error("admin server stopped", "err", err)
		}
	})
}

func (a *adminServer) shutdown(ctx context.Context) { _ = a.srv.Shutdown(ctx) }

// Admin returns the admin API over b: the pure methods (Snapshot, Queues, CreateQueue, …)
// and, through its Handler, the HTTP API, whether or not the monitor listener is enabled.
// Each call returns a new, independent value; it is cheap. Stages in Options.SendStages that
// are also prometheus.Collectors (such as metrics.DestinationStage) are served on /metrics.
func (b *Broker) Admin() *admin.Admin {
	extra := []prometheus.Collector{newAuthCollector(b.sec)}
	for _, s := range b.opts.SendStages {
		if c, ok := s.(prometheus.Collector); ok {
			extra = append(extra, c)
		}
	}
	var users admin.Users
	if !b.sec.auth.Open() {
		users = adminUsers{b.sec.auth}
	}
	return admin.New(adminSource{b}, admin.Options{
		Users:        users,
		Hosts:        monitorHosts(b.cfg.Monitor),
		Token:        b.cfg.Monitor.Token,
		MaxBodyBytes: b.cfg.Servers[0].ProtocolOptions.MaxBodyLength,
		Collectors:   extra,
		Logger:       b.log.With("component", "admin"),
	})
}

func (b *Broker) adminHandler() http.Handler { return b.Admin().Handler() }

// adminSource adapts the broker to admin.Source (and so metrics.Source).
type adminSource struct{ b *Broker }

func (s adminSource) Version() string              { return Version }
func (s adminSource) StartTime() time.Time         { return s.b.StartTime() }
func (s adminSource) Engine() *dispatch.Engine     { return s.b.Engine() }
func (s adminSource) Router() *router.Router       { return s.b.Router() }
func (s adminSource) Sessions() []*session.Session { return s.b.Sessions() }
func (s adminSource) ConnectionsAccepted() uint64  { return s.b.Connections.Load() }
func (s adminSource) ConnectionsClosed(r session.CloseReason) uint64 {
	if int(r) < len(s.b.Closed) {
		return s.b.Closed[r].Load()
	}
	return 0
}

var _ admin.Source = adminSource{}
