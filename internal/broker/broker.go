// Package broker wires Titan together: listeners, sessions, the router, the pattern packages
// behind its ports, the store and the admin API. It owns every goroutine (see goroutine) and the shutdown order:
// stop accepting → stop routing new frames → flush and close sessions → close the store.
package broker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/titan-broker/titan/internal/admission"
	"github.com/titan-broker/titan/internal/dedup"

	"github.com/titan-broker/titan/internal/admin"
	"github.com/titan-broker/titan/internal/clock"
	"github.com/titan-broker/titan/internal/cluster"
	"github.com/titan-broker/titan/internal/cluster/pipeline"
	"github.com/titan-broker/titan/internal/config"
	"github.com/titan-broker/titan/internal/delivery"
	"github.com/titan-broker/titan/internal/dest"
	"github.com/titan-broker/titan/internal/dispatch"
	"github.com/titan-broker/titan/internal/durable"
	"github.com/titan-broker/titan/internal/eventlog"
	"github.com/titan-broker/titan/internal/flow"
	"github.com/titan-broker/titan/internal/frame"
	"github.com/titan-broker/titan/internal/lockorder"
	"github.com/titan-broker/titan/internal/metrics"
	"github.com/titan-broker/titan/internal/router"
	"github.com/titan-broker/titan/internal/rpc"
	"github.com/titan-broker/titan/internal/session"
	"github.com/titan-broker/titan/internal/store"
	"github.com/titan-broker/titan/internal/transport"
)

// Version is the broker version reported in CONNECTED and the monitor API.
const Version = "0.1.0"

// ErrServerClosed is returned by Run and Start after Shutdown.
var ErrServerClosed = errors.New("broker: server closed")

// Options are what a Config does not hold: process-level hooks.
type Options struct {
	// Logger receives the broker's logs (default: discard).
	Logger *slog.Logger
	// Clock is the broker's time source (default time.Now; per-message timestamps — a
	// message's broker timestamp, publish-to-deliver latency — then come from a
	// millisecond clock.Coarse instead).
	Clock func() time.Time
	// Timers arms the timers the patterns own — scheduled messages, redelivery delays,
	// request timeouts — (default clock.Real; the time itself comes from Clock). Tests
	// inject one to see every timer and fire it at will.
	Timers clock.Clock
	// SendStages are custom router stages run on SEND after routing and before publication.
	SendStages []router.Stage
	// Store, when set, is used instead of opening the configured store; the broker closes it
	// at shutdown.
	Store store.Store
}

// Broker is one Titan server. Create with New, then Start (or Run). Safe for concurrent use.
type Broker struct {
	// idPrefix prefixes the message-ids of this process ("titan-<boot>"; cluster mode
	// "titan-<node>-<boot>"): set in New before any traffic, read-only after.
	idPrefix string
	// largeFrames is the read-buffer budget of large frames in progress, shared by every
	// server (limits.max-large-frame-bytes; nil: unlimited).
	largeFrames *frame.Budget
	// largeFrameReclaims counts the collections forced after large frames were released
	// (largeframes.go).
	largeFrameReclaims atomic.Uint64
	// conns bounds the connections held (limits.max-connections[-per-address]); logins
	// backs off failed logins (nil: limits.login-backoff -1). Made by Start (admission.go).
	conns  *admission.Conns
	logins *admission.LoginThrottle
	cfg    config.Config
	opts   Options
	log    *slog.Logger
	p      *patterns
	router *router.Router

	wg       sync.WaitGroup
	mu       lockorder.Mutex[lockorder.BrokerRank] // guards the fields below
	closing  bool
	started  bool
	servers  []*server
	sessions map[*session.Session]*delivery.Conn // connected sessions → their delivery side once CONNECTED (nil before; operator views)
	// userConns counts each user's admitted connections (connections quota); guarded by mu.
	userConns map[string]int
	// counted are the sessions userConns counts (released once at close); guarded by mu.
	counted map[*session.Session]string
	inst    *metrics.Instruments // latency histograms, served on /metrics
	traffic session.Traffic      // bytes read from and written to clients
	admin   *adminServer
	history *admin.History // the console's recent rates; nil without the monitor
	store   store.Store
	durable *durable.Log
	dedup   *dedup.Cache // duplicate detection (the router's duplicate stage)
	sec     *security    // users and permissions (security.go)

	startTime time.Time
	stop      chan struct{} // closed when shutdown begins
	resolver  *config.Resolver
	flow      flow.Stats    // flow-control counters (flow.go)
	heap      *flow.Heap    // heap watermarks (flow.go)
	coarse    *clock.Coarse // per-message timestamps when Options.Clock is nil; stopped at shutdown
	// Connections counts accepted connections; Closed counts closes per reason.
	Connections atomic.Uint64
	Closed      [16]atomic.Uint64
	// connQuotaRefused counts CONNECTs refused by the per-user connections quota (quota.go;
	// the authorization stage counts the other quotas' refusals).
	connQuotaRefused atomic.Uint64
}

type server struct {
	cfg   config.Server
	ln    net.Listener
	sopts *session.Options
}

// New builds a broker from cfg (validated here). Nothing listens until Start.
func New(cfg config.Config, opts Options) (*Broker, error) {
	cfg.ApplyDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	b := &Broker{cfg: cfg, opts: opts, log: opts.Logger, sessions: make(map[*session.Session]*delivery.Conn), stop: make(chan struct{}),
		userConns: map[string]int{}, counted: map[*session.Session]string{}}
	stamp := opts.Clock // the time of per-message timestamps
	if opts.Clock == nil {
		b.coarse = new(clock.Coarse)
		stamp = b.coarse.Now
		opts.Clock = time.Now
		b.opts.Clock = time.Now
	}
	hf := cfg.FlowControl.Heap
	b.heap = flow.NewHeap(flow.HeapLimit(hf.MaxBytes), hf.HighWatermark, hf.LowWatermark)
	st := opts.Store
	if st == nil {
		var err error
		if st, err = openStore(cfg.Store, b.log); err != nil {
			return nil, err
		}
	}
	b.store = st
	b.durable = durable.New(st, b.log.With("component", "durable"))
	b.inst = metrics.NewInstruments()
	b.durable.CommitLatency = b.inst.StoreCommit
	fanout := false
	defPattern := dest.PatternEvents
	first := cfg.Servers[0].ProtocolOptions
	for _, s := range cfg.Servers {
		if s.ProtocolOptions.FanoutMode != "" {
			fanout = true
		}
	}
	if p, ok := dest.ParsePattern(first.DefaultPattern); ok {
		defPattern = p
	}
	resolver := config.NewResolver(&cfg)
	b.resolver = resolver
	if opts.Timers == nil {
		opts.Timers = clock.Real
	}
	p, ports := b.wire(fanout, resolver, clock.WithNow(opts.Timers, opts.Clock), b.log)
	b.p = p
	p.deliveries.Latency = b.inst.Deliver
	p.deliveries.Now = stamp
	var persister router.Persister = b.durable
	var batch router.BatchPublisher
	var journal dedup.Journal = b.durable
	// A message-id names one message for as long as a client can see it, and stored messages
	// keep theirs across restarts, while the counter behind "-<n>" starts again with every
	// process: so the prefix names the process (its start time in milliseconds, base 36),
	// and a message sent after a restart never takes the id of one the restart recovered
	// (STOMP 1.0/1.1 clients acknowledge by message-id; clients deduplicate by it).
	idPrefix := "titan-" + bootID(time.Now())
	if cfg.Cluster.Enabled() {
		// Cluster mode: JetStream stores queue messages and events-store logs. The router's
		// store stage publishes them asynchronously (pipeline.Persister) and writes each
		// RECEIPT after its PubAck, in SEND order, so a connection's SENDs are pipelined.
		n, err := cluster.Start(context.Background(), cfg.Cluster, first.MaxBodyLength, b.log.With("component", "cluster"))
		if err != nil {
			_ = st.Close()
			return nil, err
		}
		if err := p.wireCluster(n, resolver, b.maxDurableSubscriptions(), b.log, &ports); err != nil {
			n.Close()
			_ = st.Close()
			return nil, err
		}
		committer := p.cluster.semantics(cfg, resolver, b.log)
		batch = committer
		cp, err := pipeline.NewPersister(n, p.cluster.queues, p.cluster.store, committer, b.log.With("component", "cluster-publish"))
		if err != nil {
			n.Close()
			_ = st.Close()
			return nil, err
		}
		// A stepping-down node asks every node to hold its publishes to the streams it
		// hands over (cluster/holds.go): this node's are cp's.
		if err := n.ServePublishHolds(cp); err != nil {
			n.Close()
			_ = st.Close()
			return nil, err
		}
		persister = cp
		journal = nil // JetStream's Nats-Msg-Id window is the durable record of duplicate ids
		idPrefix = "titan-" + n.Name() + "-" + strconv.FormatInt(time.Now().UnixNano()%1e9, 36)
	}
	b.idPrefix = idPrefix
	sec, err := newSecurity(b)
	if err != nil {
		if p.cluster != nil {
			p.cluster.node.Close()
		}
		_ = st.Close()
		return nil, err
	}
	b.sec = sec
	var authorize router.Stage
	if b.sec.stage != nil {
		authorize = b.sec.stage
	}
	if journal != nil {
		// Each stored message's duplicate id is written in the message's own store batch,
		// and the cache is rebuilt from those records at start (dedup.Cache.Load).
		b.durable.DuplicateHeader = dedup.Header
	}
	b.dedup = dedup.New(dedup.Options{
		Window:  config.Ms(cfg.DuplicateDetection.Window),
		Cap:     cfg.DuplicateDetection.CacheSize,
		Journal: journal,
	})
	b.router = router.New(ports, router.Options{
		Duplicates:                   b.dedup,
		Authorize:                    authorize,
		DefaultPattern:               defPattern,
		MaxSubscriptions:             first.MaxSubscriptionsByClient,
		MaxFramesInTransaction:       first.MaxFrameInTransaction,
		MaxDestinationsPerConnection: first.MaxDestinationsByClient,
		MaxTempQueuesPerConnection:   first.MaxTempQueuesByClient,
		DefaultPrefetch:              first.DefaultPrefetch,
		Clock:                        opts.Clock,
		Stamp:                        stamp,
		Logger:                       b.log.With("component", "router"),
		SendStages:                   opts.SendStages,
		Store:                        persister,
		Batch:                        batch,
		MessageIDPrefix:              idPrefix,
		Go:                           b.goroutine,
		ReceiptLatency:               b.inst.Receipt,
	})
	return b, nil
}

// StoreHealth returns the store's condition (store.Store.Health): OK, degraded or down,
// with the cause and counters. In cluster mode a node that cannot write its JetStream store
// (cluster.Node.DiskHealth: a full or read-only disk, JetStream disabled) is down with that
// cause too (issue 27). It never blocks on I/O.
func (b *Broker) StoreHealth() store.Health {
	h := b.store.Health()
	if n := b.clusterNode(); n != nil && h.State != store.StateDown {
		if d := n.DiskHealth(); !d.OK {
			h.State, h.Cause, h.Since = store.StateDown, d.Cause, d.Since
			h.Changes += d.Changes
		}
	}
	return h
}

// StoreGroupCommits returns the store's group commit counters (store.GroupCommitStats); ok
// is false when the store does not commit in groups (the memory store) and in cluster mode,
// where JetStream, not the local store, makes queue and events-store messages durable. Safe
// for concurrent use.
func (b *Broker) StoreGroupCommits() (stats store.GroupCommitStats, ok bool) {
	gc, ok := b.store.(store.GroupCommitCounter)
	if !ok || b.clusterNode() != nil {
		return store.GroupCommitStats{}, false
	}
	return gc.GroupCommitStats(), true
}

// Dispatcher returns the dispatcher: every dispatcher queue and the message counters (for
// the admin API and embedding).
func (b *Broker) Dispatcher() *dispatch.Dispatcher { return b.p.dispatcher }

// Engine returns the dispatcher (the name it had when one engine held every pattern).
func (b *Broker) Engine() *dispatch.Dispatcher { return b.p.dispatcher }

// RPCStats returns the request/response counters per channel, sorted.
func (b *Broker) RPCStats() []rpc.Stats { return b.p.requests.Stats() }

// OutboxStats summarises the events-store pollers.
func (b *Broker) OutboxStats() eventlog.Stats { return b.p.log.Stats() }

// Router returns the inbound router.
func (b *Broker) Router() *router.Router { return b.router }

// Config returns the effective configuration.
func (b *Broker) Config() config.Config { return b.cfg }

// goroutine starts fn as a tracked goroutine with the pprof label titan=name. It refuses
// (returns false) once shutdown has begun.
func (b *Broker) goroutine(name string, fn func()) bool {
	b.mu.Lock()
	if b.closing {
		b.mu.Unlock()
		return false
	}
	b.wg.Add(1)
	b.mu.Unlock()
	go func() {
		defer b.wg.Done()
		pprof.SetGoroutineLabels(goroutineLabels(name))
		fn()
	}()
	return true
}

// labelContexts maps a goroutine name to its context carrying the label titan=name, made
// once per name (the names are a fixed set): pprof.Do would build a label set and a context
// for every goroutine, held for its life (every connection's).
var labelContexts sync.Map

func goroutineLabels(name string) context.Context {
	if v, ok := labelContexts.Load(name); ok {
		return v.(context.Context)
	}
	v, _ := labelContexts.LoadOrStore(name, pprof.WithLabels(context.Background(), pprof.Labels("titan", name)))
	return v.(context.Context)
}

func sessionOptions(s config.Server, log *slog.Logger) *session.Options {
	p := s.ProtocolOptions
	o := session.DefaultOptions()
	o.Limits = frame.Limits{MaxHeaderLineBytes: p.MaxHeaderLength, MaxHeaders: p.MaxHeaders, MaxHeaderBytes: p.MaxHeadersBytes, MaxBodyBytes: p.MaxBodyLength}
	o.Versions = s.Versions()
	o.ServerName = "Titan/" + Version
	o.HeartBeatSend = config.Ms(*p.HeartbeatX)
	o.HeartBeatRecv = config.Ms(*p.HeartbeatY)
	o.HeartBeatMin = config.Ms(*p.HeartbeatMin)
	o.HeartBeatGrace = p.HeartbeatGrace
	o.ConnectionTTL = config.Ms(p.ConnectionTTL)
	o.ConnectTimeout = config.Ms(p.ConnectTimeout)
	o.FrameTimeout = config.Ms(p.FrameTimeout)
	o.MaxOutboundBytes = p.MaxOutboundBytes
	o.Logger = log
	return &o
}

// Start binds every listener (and the monitor API) and begins accepting. Addresses are
// available from Addr once Start returns. Errors: a bind failure (everything already bound is
// closed again), ErrServerClosed after Shutdown.
func (b *Broker) Start() error {
	b.mu.Lock()
	if b.closing {
		b.mu.Unlock()
		return ErrServerClosed
	}
	if b.started {
		b.mu.Unlock()
		return errors.New("broker: already started")
	}
	b.started = true
	b.startTime = time.Now()
	b.mu.Unlock()
	// Recovery comes before any listener: every committed, unacknowledged queue message is
	// back on its queue before a client can connect.
	saved, err := b.durable.QueueSettings()
	if err != nil {
		b.log.Error("operator queue settings unreadable; queues recover with address-setting defaults", "err", err)
	}
	for id, s := range saved {
		_, _, _ = b.p.dispatcher.GetOrPut(id, s) // not Create: re-saving what was just read is pointless
	}
	if b.p.topics != nil {
		// Durable topic subscriptions, and their queues, exist before their stored messages
		// are recovered and before a client can publish to their topics.
		if err := b.p.topics.Load(); err != nil {
			return fmt.Errorf("broker: recovery: durable topic subscriptions: %w", err)
		}
	}
	if err := b.dedup.Load(); err != nil {
		return fmt.Errorf("broker: recovery: duplicate ids: %w", err)
	}
	n, err := b.durable.RecoverQueues(b.p.queues.Restore)
	if err != nil {
		return fmt.Errorf("broker: recovery: %w", err)
	}
	logs, err := b.durable.Logs()
	if err != nil {
		return fmt.Errorf("broker: recovery: %w", err)
	}
	for _, id := range logs {
		b.p.dispatcher.KnownLog(id)
	}
	if n > 0 || b.durable.Corrupt.Load() > 0 {
		b.log.Info("recovered stored messages", "messages", n, "unreadable_skipped", b.durable.Corrupt.Load())
	}
	b.restorePaused()
	var servers []*server
	fail := func(err error) error {
		for _, s := range servers {
			_ = s.ln.Close()
		}
		return err
	}
	largeFrames := frame.NewBudget(b.cfg.Limits.MaxLargeFrameBytes) // one for every server
	b.startAdmission()
	b.largeFrames = largeFrames
	for _, sc := range b.cfg.Servers {
		tlsConf, err := serverTLS(sc)
		if err != nil {
			return fail(err)
		}
		var ln net.Listener
		log := b.log.With("server", sc.Name)
		if sc.Transport == "websocket" {
			ln, err = transport.ListenWebSocket(sc.Addr(), transport.WSOptions{Path: sc.TransportOptions.Path,
				AllowedOrigins: sc.TransportOptions.AllowedOrigins, AllowedHosts: wsHosts(sc), TLS: tlsConf,
				KeepAlive: config.Ms(sc.TransportOptions.TCPKeepAlive), HandshakeTimeout: config.Ms(sc.ProtocolOptions.ConnectTimeout), Logger: log})
		} else {
			ln, err = transport.ListenTCP(sc.Addr(), tlsConf, config.Ms(sc.TransportOptions.TCPKeepAlive))
		}
		if err != nil {
			return fail(fmt.Errorf("broker: server %s: listen %s: %w", sc.Name, sc.Addr(), err))
		}
		sopts := sessionOptions(sc, log)
		sopts.Limits.LargeFrames = largeFrames
		b.applyFlow(sopts, sc)
		sopts.Authenticator = sessionAuth{b.sec.auth}
		if b.logins != nil {
			sopts.LoginThrottle = b.logins
		}
		sopts.Traffic = &b.traffic
		servers = append(servers, &server{cfg: sc, ln: ln, sopts: sopts})
	}
	if err := checkMonitorToken(b.cfg.Monitor); err != nil {
		return fail(err)
	}
	if err := checkMonitorExposure(b.cfg, b.sec.auth.Open()); err != nil {
		return fail(err)
	}
	if b.cfg.Monitor.IsEnabled() {
		b.history = admin.NewHistory(admin.HistoryOptions{Interval: config.Ms(b.cfg.Monitor.HistoryIntervalMs)})
		a, err := newAdminServer(b)
		if err != nil {
			return fail(err)
		}
		b.admin = a
	}
	b.mu.Lock()
	b.servers = servers
	b.mu.Unlock()
	b.startHeapWatch() // after the last way Start can fail: nothing stops it on that path
	if largeFrames != nil {
		b.goroutine("large-frame-reclaim", func() { b.reclaimLargeFrames(largeFrames) })
	}
	for _, s := range servers {
		s := s
		b.log.Info("listening", "server", s.cfg.Name, "transport", s.cfg.Transport, "addr", s.ln.Addr().String())
		b.goroutine("accept", func() {
			if err := transport.Serve(s.ln, b.goroutine, func(c net.Conn) { b.serveConn(s, c) }, b.log); err != nil {
				b.log.Error("accept loop stopped", "server", s.cfg.Name, "err", err)
			}
		})
	}
	if b.admin != nil {
		b.admin.start()
		b.goroutine("history", b.historyLoop)
	}
	b.goroutine("retention", b.retentionLoop)
	b.goroutine("store-watch", func() { b.durable.WatchStore(b.stop) })
	if idle := b.cfg.Limits.DestinationIdleTimeout; idle > 0 {
		b.goroutine("reclaim", func() { b.reclaimLoop(config.Ms(idle)) })
	}
	b.startDurableExpiry()
	return nil
}

// RetentionInterval is how often events-store retention is enforced.
const RetentionInterval = 5 * time.Second

func (b *Broker) retentionLoop() {
	t := time.NewTicker(RetentionInterval)
	defer t.Stop()
	for {
		select {
		case <-b.stop:
			return
		case <-t.C:
			if n, err := b.durable.EnforceRetention(b.resolver.Settings, b.opts.Clock()); err != nil {
				b.log.Warn("retention", "err", err)
			} else if n > 0 {
				b.log.Debug("retention trimmed events-store records", "records", n)
			}
		}
	}
}

func (b *Broker) serveConn(s *server, c net.Conn) {
	b.Connections.Add(1)
	release, ok := b.admit(c)
	if !ok {
		return
	}
	defer release()
	sess := session.New(c, handler{b}, s.sopts)
	b.mu.Lock()
	if b.closing {
		b.mu.Unlock()
		_ = c.Close()
		return
	}
	b.sessions[sess] = nil
	b.mu.Unlock()
	sess.Serve()
	b.mu.Lock()
	delete(b.sessions, sess)
	b.releaseUserLocked(sess)
	b.mu.Unlock()
	if r := int(sess.Reason()); r < len(b.Closed) {
		b.Closed[r].Add(1)
	}
}

// handler adapts the router to the session's Handler port.
type handler struct{ b *Broker }

func (h handler) Connect(s *session.Session, f *frame.Frame) (session.Link, *frame.ProtocolError) {
	if pe := h.b.admitUser(s); pe != nil {
		return nil, pe
	}
	rc := h.b.router.Open(s)
	rc.ClientID = strings.Clone(f.Value("client-id")) // ActiveMQ's and Artemis's durable subscriptions
	s.OnDrain(rc.Delivery.Resume)
	h.b.mu.Lock()
	if _, ok := h.b.sessions[s]; ok {
		h.b.sessions[s] = rc.Delivery
	}
	h.b.mu.Unlock()
	return link{r: h.b.router, c: rc}, nil
}

type link struct {
	r *router.Router
	c *router.Conn
}

func (l link) Handle(f *frame.Frame)             { l.r.Handle(l.c, f) }
func (l link) Closed(reason session.CloseReason) { l.r.Close(l.c) }

// Addr returns the bound address of the named server ("" when unknown or not started).
func (b *Broker) Addr(name string) string {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, s := range b.servers {
		if s.cfg.Name == name {
			return s.ln.Addr().String()
		}
	}
	return ""
}

// Addrs returns the bound address of every server, in configuration order.
func (b *Broker) Addrs() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := make([]string, 0, len(b.servers))
	for _, s := range b.servers {
		out = append(out, s.ln.Addr().String())
	}
	return out
}

// MonitorAddr returns the admin API's bound address ("" when disabled).
func (b *Broker) MonitorAddr() string {
	if b.admin == nil {
		return ""
	}
	return b.admin.ln.Addr().String()
}

// Run starts the broker and serves until ctx is done, then shuts down within 10 s.
func (b *Broker) Run(ctx context.Context) error {
	if err := b.Start(); err != nil {
		return err
	}
	<-ctx.Done()
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return b.Shutdown(sctx)
}

// shutdownGrace bounds the wait for the broker's goroutines after Shutdown's ctx ended and
// every connection was closed by force.
const shutdownGrace = 5 * time.Second

// Shutdown stops accepting, closes every session (a final flush bounded by ctx), stops the
// admin API, stops what the patterns started (request timeouts, queue timers, events-store
// pollers) and waits for every broker goroutine, then closes the store. It returns ctx.Err()
// when ctx ends first: connections are then closed by force and the store is still closed
// only once nothing that writes to it runs (waiting at most shutdownGrace more; past that
// the store is left open, closed by the last goroutine to end, and the error says so).
func (b *Broker) Shutdown(ctx context.Context) error {
	b.mu.Lock()
	if b.closing {
		b.mu.Unlock()
		return nil
	}
	b.closing = true
	close(b.stop)
	if b.coarse != nil {
		defer b.coarse.Stop() // its ticker, if running; later reads use the system clock
	}
	b.p.dispatcher.Close() // producers blocked on full queues give up now
	servers := b.servers
	sessions := make([]*session.Session, 0, len(b.sessions))
	for s := range b.sessions {
		sessions = append(sessions, s)
	}
	b.mu.Unlock()
	for _, s := range servers {
		_ = s.ln.Close()
	}
	if b.admin != nil {
		b.admin.shutdown(ctx)
	}
	b.stepDown(ctx)
	for _, s := range sessions {
		s.Shutdown() // ERROR "server shutting down", closed as a shutdown (not a protocol error)
	}
	done := make(chan struct{})
	go func() { b.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
		if n := b.clusterNode(); n != nil {
			n.Abort() // publishes still retrying (no quorum) fail now instead of after 30 s
		}
		for _, s := range sessions {
			s.Close(session.CloseShutdown)
		}
		b.p.close()
		t := time.NewTimer(shutdownGrace)
		defer t.Stop()
		select {
		case <-done:
		case <-t.C:
			b.log.Error("broker goroutines still running after shutdown; the store closes when they end")
			go func() { <-done; b.closeStore() }()
			return fmt.Errorf("broker: shutdown: %w (store left open for running goroutines)", ctx.Err())
		}
		b.closeStore()
		return ctx.Err()
	}
	b.p.close()
	b.closeStore()
	b.log.Info("stopped")
	return nil
}

// stepDown moves the JetStream leaderships this cluster node holds to other nodes before
// its clients are drained (a rolling restart, issue 27), within cluster.StepDownTimeout of
// the shutdown's ctx. Single-node mode: nothing.
func (b *Broker) stepDown(ctx context.Context) {
	n := b.clusterNode()
	if n == nil {
		return
	}
	sctx, cancel := context.WithTimeout(ctx, cluster.StepDownTimeout)
	defer cancel()
	start := time.Now()
	rep, err := n.StepDown(sctx)
	log := b.log.With("streams", rep.Streams, "consumers", len(rep.Consumers), "meta", rep.Meta, "took", time.Since(start).Round(time.Millisecond))
	if err != nil {
		log.Warn("cluster: stepping down before shutdown", "err", err)
		return
	}
	log.Info("cluster: stepped down from the leaderships this node held")
}

// closeStore closes the store; only once nothing that writes to it runs.
func (b *Broker) closeStore() {
	b.durable.FlushDeferred() // ACKs taken while the store was down, if it is back: Close syncs them
	if err := b.store.Close(); err != nil {
		b.log.Error("closing store", "err", err)
	}
}

// Durable returns the durable message log.
func (b *Broker) Durable() *durable.Log { return b.durable }

// deliveryConn returns the delivery side of a CONNECTED session (nil before CONNECT or after
// it closed).
func (b *Broker) deliveryConn(s *session.Session) *delivery.Conn {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.sessions[s]
}

// Sessions returns a snapshot of the connected sessions.
func (b *Broker) Sessions() []*session.Session {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := make([]*session.Session, 0, len(b.sessions))
	for s := range b.sessions {
		out = append(out, s)
	}
	return out
}

// StartTime returns when Start ran.
func (b *Broker) StartTime() time.Time { return b.startTime }

// reclaimLoop removes idle, empty, traffic-created destinations (dispatch.Dispatcher.Reclaim)
// every idle/4 (at most every 10 ms) until shutdown.
func (b *Broker) reclaimLoop(idle time.Duration) {
	every := max(idle/4, 10*time.Millisecond)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-b.stop:
			return
		case <-t.C:
			if n := b.p.dispatcher.Reclaim(idle); n > 0 {
				b.log.Debug("reclaimed idle destinations", "destinations", n)
			}
		}
	}
}

// bootID names one broker process in its message-ids: its start time in milliseconds since
// the Unix epoch, in base 36 (8 characters until the year 2059). A restart on the same data
// directory takes far more than a millisecond, so two processes never share it unless the
// clock was set back across the restart.
func bootID(start time.Time) string {
	return strconv.FormatInt(start.UnixMilli(), 36)
}
