package broker

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/titan-broker/titan/internal/store"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/titan-broker/titan/internal/admin"
	"github.com/titan-broker/titan/internal/cluster/status"
	"github.com/titan-broker/titan/internal/dest"
	"github.com/titan-broker/titan/internal/dispatch"
	"github.com/titan-broker/titan/internal/eventlog"
	"github.com/titan-broker/titan/internal/flow"
	"github.com/titan-broker/titan/internal/metrics"
	"github.com/titan-broker/titan/internal/router"
	"github.com/titan-broker/titan/internal/rpc"
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
	extra := []prometheus.Collector{newAuthCollector(b, b.sec), metrics.NewLogCollector(adminSource{b}.logStats), newDurableCollector(b), newLargeFrameCollector(b), newAdmissionCollector(b)}
	extra = append(extra, b.inst.Collectors()...)
	extra = append(extra, metrics.TrafficCollectors(b.traffic.In.Load, b.traffic.Out.Load)...)
	for _, s := range b.opts.SendStages {
		if c, ok := s.(prometheus.Collector); ok {
			extra = append(extra, c)
		}
	}
	var users admin.Users
	if !b.sec.auth.Open() {
		users = adminUsers{b.sec.auth}
	}
	node := nodeName()
	var clusterSrc admin.ClusterSource
	var clusterOps admin.ClusterQueues
	if n := b.clusterNode(); n != nil { // cluster mode: nodes by their cluster names, metrics labelled
		node, clusterSrc = clusterNodeName(n, b.cfg.Cluster.NodeName, node), clusterAdmin{n}
		c := b.p.cluster
		clusterOps = clusterQueues{c.queues} // queue actions act on JetStream (cluster_ops.go)
		extra = append(extra, status.Collector(n), c.queues.Collector(), c.store.Collector(), c.requests.Collector())
	}
	return admin.New(adminSource{b}, admin.Options{
		Users:         users,
		LoginThrottle: b.adminThrottle(),
		Hosts:         monitorHosts(b.cfg.Monitor),
		Token:         b.cfg.Monitor.Token,
		MaxBodyBytes:  b.cfg.Servers[0].ProtocolOptions.MaxBodyLength,
		Collectors:    extra,
		Node:          node,
		Cluster:       clusterSrc,
		ClusterQueues: clusterOps,
		Logger:        b.log.With("component", "admin"),
		History:       b.history,
	})
}

// historyLoop samples the rates the console's charts start with (admin.History) every
// history interval until shutdown.
func (b *Broker) historyLoop() {
	h := b.history
	h.Sample(b.p.dispatcher, time.Now()) // the first rates need a previous point
	t := time.NewTicker(h.Interval())
	defer t.Stop()
	for {
		select {
		case <-b.stop:
			return
		case now := <-t.C:
			h.Sample(b.p.dispatcher, now)
		}
	}
}

func (b *Broker) adminHandler() http.Handler { return b.Admin().Handler() }

// adminSource adapts the broker to admin.Source (and so metrics.Source).
type adminSource struct{ b *Broker }

func (s adminSource) Version() string                  { return Version }
func (s adminSource) StartTime() time.Time             { return s.b.StartTime() }
func (s adminSource) Dispatcher() *dispatch.Dispatcher { return s.b.Dispatcher() }
func (s adminSource) Outbox() eventlog.Stats           { return s.b.OutboxStats() }
func (s adminSource) RPC() []rpc.Stats                 { return s.b.RPCStats() }
func (s adminSource) Router() *router.Router           { return s.b.Router() }
func (s adminSource) DefaultPattern() dest.Pattern     { return s.b.router.Options().DefaultPattern }

// Publish implements admin.Publisher: the publication runs the router's SEND route.
func (s adminSource) Publish(p admin.Publication) (*admin.Published, error) {
	res, err := s.b.router.Publish(router.Publication{
		Destination: p.Destination, Group: p.Group, Headers: p.Headers, Native: p.Native, Body: p.Body,
		Principal: p.Principal,
	})
	if err != nil {
		return nil, err
	}
	return &admin.Published{
		Identity: res.Identity, MessageID: res.Message.ID, Destination: res.Message.Destination, Dropped: res.Dropped,
	}, nil
}
func (s adminSource) Sessions() []*session.Session { return s.b.Sessions() }
func (s adminSource) ConnectionsAccepted() uint64  { return s.b.Connections.Load() }
func (s adminSource) StoreHealth() store.Health    { return s.b.StoreHealth() }

// DuplicateIDs implements metrics.Source.
func (s adminSource) DuplicateIDs() (int, uint64) { return s.b.dedup.Len(), s.b.dedup.DuplicatesSeen() }

// StoreGroupCommits implements metrics.CommitSource.
func (s adminSource) StoreGroupCommits() (store.GroupCommitStats, bool) {
	return s.b.StoreGroupCommits()
}

// FlowStats implements metrics.FlowSource.
func (s adminSource) FlowStats() *flow.Stats { return s.b.FlowStats() }

// HeapCongested implements metrics.FlowSource.
func (s adminSource) HeapCongested() bool { return s.b.HeapCongested() }
func (s adminSource) ConnectionsClosed(r session.CloseReason) uint64 {
	if int(r) < len(s.b.Closed) {
		return s.b.Closed[r].Load()
	}
	return 0
}

var _ admin.Source = adminSource{}

// restorePaused pauses again, after recovery and before any listener, every queue an
// operator left paused (durable.Log.SaveQueuePaused): a queue that traffic had created comes
// back with the settings traffic would give it, and paused.
func (b *Broker) restorePaused() {
	ids, err := b.durable.PausedQueues()
	if err != nil {
		b.log.Error("paused queues unreadable; they restart running", "err", err)
	}
	for _, id := range ids {
		q, _, err := b.p.dispatcher.GetOrPut(id, b.p.dispatcher.Settings(id))
		if err != nil {
			continue
		}
		q.SetPaused(true)
	}
}

// nodeName names this broker in the operator routes' answers: the host name (until the
// cluster issue gives nodes names of their own).
func nodeName() string {
	h, err := os.Hostname()
	if err != nil || h == "" {
		return "titan"
	}
	return h
}

// largeFrameCollector serves titan_large_frame_bytes (read buffers of large frames in
// progress), titan_large_frame_bytes_max (limits.max-large-frame-bytes; 0: unlimited) and
// titan_large_frame_refusals_total, and titan_large_frame_reclaims_total (collections
// forced to return the memory of released large frames, largeframes.go).
type largeFrameCollector struct {
	b                              *Broker
	used, limit, refused, reclaims *prometheus.Desc
}

func newLargeFrameCollector(b *Broker) *largeFrameCollector {
	return &largeFrameCollector{
		b:       b,
		used:    prometheus.NewDesc("titan_large_frame_bytes", "Bytes of read buffers held by frames over 64 KiB still being received.", nil, nil),
		limit:   prometheus.NewDesc("titan_large_frame_bytes_max", "The bound of titan_large_frame_bytes (max-large-frame-bytes; 0: unlimited).", nil, nil),
		refused: prometheus.NewDesc("titan_large_frame_refusals_total", "Frames refused with ERROR large frame memory limit reached.", nil, nil),
		reclaims: prometheus.NewDesc("titan_large_frame_reclaims_total",
			"Collections forced to return the memory of released large-frame buffers to the OS.", nil, nil),
	}
}

// Describe implements prometheus.Collector.
func (c *largeFrameCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.used
	ch <- c.limit
	ch <- c.refused
	ch <- c.reclaims
}

// Collect implements prometheus.Collector.
func (c *largeFrameCollector) Collect(ch chan<- prometheus.Metric) {
	var used, limit int64
	var refused uint64
	if lf := c.b.largeFrames; lf != nil {
		used, limit, refused = lf.Used(), lf.Max(), lf.Refused()
	}
	ch <- prometheus.MustNewConstMetric(c.used, prometheus.GaugeValue, float64(used))
	ch <- prometheus.MustNewConstMetric(c.limit, prometheus.GaugeValue, float64(limit))
	ch <- prometheus.MustNewConstMetric(c.refused, prometheus.CounterValue, float64(refused))
	ch <- prometheus.MustNewConstMetric(c.reclaims, prometheus.CounterValue, float64(c.b.largeFrameReclaims.Load()))
}
