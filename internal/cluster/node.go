// Package cluster is Titan's cluster mode (issue 15): several titan nodes as one broker on
// NATS JetStream, never a consensus protocol of Titan's own. This package is the node and
// what every cluster adapter shares: a Node embeds a clustered nats-server with JetStream
// (or connects to an external NATS cluster); the subject mapping (Subject), where a
// destination is stored (Placement), stream creation (Streams) and bounded, retried
// JetStream requests. The adapters the broker wires behind the router's ports instead of
// the single-node pattern packages live one package per pattern below it, mirroring the
// single node (issue 28): events, queues, logs (events-store), requests
// (request/response and temp-queues); pull is the pull loop queues and logs share,
// pipeline the store stage's pipelined publisher and transaction committer, status the
// cluster view and its gauges.
//
// Mapping (docs/design.md "Cluster mode"): one subject namespace
// t.<group>.<kind>.<tok1>.<tok2>… that keeps group and segment boundaries (Subject); events
// are core NATS publishes (wildcard SUBSCRIBE filters pass through: Titan's `*` and `>` are
// NATS's); queues are WorkQueue streams per group (TITAN_<group>_Q, subjects t.<group>.q.>;
// with cluster.partitions N > 1, N streams TITAN_<group>_Q_P<k>, a queue in one of them:
// partition.go) with one durable, explicitly acknowledged pull consumer per (group, queue),
// which gives one ordered stream of deliveries per destination cluster-wide.
//
// # Concurrency
//
// Everything exported is safe for concurrent use.
package cluster

import (
	"context"
	"crypto/rand"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/titan-broker/titan/internal/config"
)

// The embedded server's users: appUser (no password, the global account) is every
// connection's but the system account's sysUser.
const (
	appUser = "titan"
	sysUser = "titan-system"
)

// maxStore is the embedded JetStream's file store limit: far above any disk, so the disk
// itself is the limit.
const maxStore = 1 << 50

// ReadyTimeout bounds the wait at start for JetStream to be usable (a meta leader elected,
// which needs a quorum of the configured nodes to be up).
const ReadyTimeout = 60 * time.Second

// Node is this broker's place in the cluster: the embedded nats-server (nil with an
// external NATS), the connection to it and its JetStream context.
type Node struct {
	cfg  config.Cluster
	srv  *server.Server
	nc   *nats.Conn
	js   jetstream.JetStream
	acks *Acks
	disk *diskWatch // nil with an external NATS
	log  *slog.Logger
	// partitions is the cluster's partition count, settled at Start (partition.go).
	partitions int

	sysPass string // the embedded server's system-account user's password

	life  context.Context // ends at Abort or Close: bounds in-flight JetStream work
	abort context.CancelFunc

	hookMu    sync.Mutex
	handBacks []func(context.Context) // OnStepDown's; guarded by hookMu

	slow slowHooks // OnSlowConsumer's
}

// Start embeds a clustered nats-server with JetStream (cfg.Name set) or connects to the
// external NATS at cfg.NatsURL, and returns once JetStream answers (a meta leader is
// elected), or an error after ReadyTimeout / ctx; ErrPartitionsChanged when
// cfg.Partitions differs from the count the cluster was started with (partition.go). maxPayload is the largest message body
// the broker accepts (the embedded server's max_payload follows it). cfg has defaults
// applied (config.Config.ApplyDefaults).
func Start(ctx context.Context, cfg config.Cluster, maxPayload int, log *slog.Logger) (*Node, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	n := &Node{cfg: cfg, log: log}
	n.life, n.abort = context.WithCancel(context.Background())
	var err error
	if cfg.NatsURL != "" {
		n.nc, err = nats.Connect(cfg.NatsURL, n.externalOptions()...)
		if err != nil {
			return nil, fmt.Errorf("cluster: connecting to NATS %s: %w", cfg.NatsURL, err)
		}
	} else {
		if err := n.embed(maxPayload); err != nil {
			return nil, err
		}
		n.nc, err = nats.Connect("", nats.InProcessServer(n.srv), nats.Name("titan-"+n.srv.Name()), nats.MaxReconnects(-1),
			nats.ErrorHandler(n.asyncError))
		if err != nil {
			n.srv.Shutdown()
			return nil, fmt.Errorf("cluster: in-process connection: %w", err)
		}
	}
	n.acks = newAcks(n.nc, n.life)
	n.js, err = jetstream.New(n.nc)
	if err != nil {
		n.Close()
		return nil, err
	}
	if err := n.waitReady(ctx); err != nil {
		n.Close()
		return nil, err
	}
	if err := n.settlePartitions(ctx); err != nil {
		n.Close()
		return nil, err
	}
	if n.srv != nil {
		n.startDiskWatch()
	}
	return n, nil
}

func (n *Node) externalOptions() []nats.Option {
	c := n.cfg
	// RetryOnFailedConnect: a node started before NATS waits for it (bounded by ReadyTimeout).
	opts := []nats.Option{nats.Name("titan"), nats.MaxReconnects(-1), nats.ReconnectWait(250 * time.Millisecond), nats.RetryOnFailedConnect(true),
		nats.ErrorHandler(n.asyncError)}
	if c.Credentials != "" {
		opts = append(opts, nats.UserCredentials(c.Credentials))
	}
	if c.User != "" {
		opts = append(opts, nats.UserInfo(c.User, c.Password))
	}
	if c.CAFile != "" {
		opts = append(opts, nats.RootCAs(c.CAFile))
	}
	if c.CertFile != "" {
		opts = append(opts, nats.ClientCert(c.CertFile, c.KeyFile))
	}
	return opts
}

// embed starts the clustered nats-server. The client listener is bound on loopback even
// though the broker connects in-process: without it routing never starts (DontListen
// pitfall, jetstream-mapping note §4).
func (n *Node) embed(maxPayload int) error {
	c := n.cfg
	host, portStr, err := net.SplitHostPort(c.Listen)
	if err != nil {
		return fmt.Errorf("cluster: listen %q: %w", c.Listen, err)
	}
	port, _ := strconv.Atoi(portStr)
	name := c.NodeName
	if name == "" {
		h, _ := os.Hostname()
		name = h + "-" + portStr
	}
	clientPort := c.ClientPort
	if clientPort == 0 {
		clientPort = -1
	}
	o := &server.Options{
		ServerName:         name,
		Host:               "127.0.0.1",
		Port:               clientPort,
		JetStream:          true,
		StoreDir:           c.StoreDir,
		MaxPayload:         int32(min(max(maxPayload+64<<10, 1<<20), 64<<20)),
		NoSigs:             true,
		Cluster:            server.ClusterOpts{Name: c.Name, Host: host, Port: port},
		JetStreamMaxMemory: 256 << 20,
		// The file system, not a limit derived from its free space at start, bounds the
		// store: a full disk then fails a write, JetStream disables itself and DiskHealth
		// reports it (issue 27), instead of publishes refused as "insufficient resources"
		// on a node that looks healthy.
		JetStreamMaxStore: maxStore,
	}
	// The system account, for the JetStream API requests only it may make (peer removal):
	// one user with a password made now; every other connection (the broker's in-process
	// one, NATS tools on the client port) is the no-auth user of the global account, as
	// before.
	sys := server.NewAccount(server.DEFAULT_SYSTEM_ACCOUNT)
	n.sysPass = rand.Text()
	o.Accounts = []*server.Account{sys}
	o.SystemAccount = server.DEFAULT_SYSTEM_ACCOUNT
	o.Users = []*server.User{{Username: sysUser, Password: n.sysPass, Account: sys}, {Username: appUser}}
	o.NoAuthUser = appUser
	if c.Sync == "always" {
		o.SyncAlways = true
	} else if d, err := time.ParseDuration(c.Sync); err == nil {
		o.SyncInterval = d
	}
	if len(c.Routes) > 0 {
		o.Routes = server.RoutesFromStr(strings.Join(c.Routes, ","))
	}
	if err := os.MkdirAll(c.StoreDir, 0o755); err != nil {
		return fmt.Errorf("cluster: store dir: %w", err)
	}
	// nats-server only logs a port it cannot bind and then never becomes ready: a node
	// whose route or client port is taken would wait 30 s and not say why.
	if err := canListen("route listen", c.Listen); err != nil {
		return err
	}
	if clientPort > 0 {
		if err := canListen("client port", net.JoinHostPort("127.0.0.1", strconv.Itoa(clientPort))); err != nil {
			return err
		}
	}
	s, err := server.NewServer(o)
	if err != nil {
		return fmt.Errorf("cluster: nats-server: %w", err)
	}
	s.SetLoggerV2(natsLogger{n.log.With("component", "nats")}, false, false, false)
	go s.Start()
	if !s.ReadyForConnections(30 * time.Second) {
		s.Shutdown()
		return fmt.Errorf("cluster: nats-server %s not ready for connections within 30s (route listen %s)", name, c.Listen)
	}
	n.srv = s
	n.log.Info("cluster node started", "node", name, "cluster", c.Name, "routes_listen", c.Listen, "routes", c.Routes, "sync", c.Sync)
	return nil
}

// canListen returns an error naming what (a setting) and addr when addr cannot be bound
// now (in use, not a local address, no permission); the listener is closed at once.
func canListen(what, addr string) error {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("cluster: %s %s: %w", what, addr, err)
	}
	return l.Close()
}

// waitReady polls JetStream until its account info answers, which in a cluster needs an
// elected meta leader.
func (n *Node) waitReady(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, ReadyTimeout)
	defer cancel()
	start := time.Now()
	var last error
	for {
		actx, acancel := context.WithTimeout(ctx, 2*time.Second)
		_, err := n.js.AccountInfo(actx)
		acancel()
		if err == nil {
			n.log.Info("cluster JetStream ready", "after", time.Since(start).Round(time.Millisecond))
			return nil
		}
		last = err
		select {
		case <-ctx.Done():
			return fmt.Errorf("cluster: JetStream not ready within %v (is a quorum of the %d-replica cluster up?): %w", ReadyTimeout, n.cfg.Replicas, last)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// Conn returns the NATS connection.
func (n *Node) Conn() *nats.Conn { return n.nc }

// JetStream returns the JetStream context.
func (n *Node) JetStream() jetstream.JetStream { return n.js }

// Server is the embedded nats-server, nil with an external NATS.
func (n *Node) Server() *server.Server { return n.srv }

// Config is the node's cluster configuration (defaults applied).
func (n *Node) Config() config.Cluster { return n.cfg }

// Embedded reports whether this node embeds its nats-server (false: an external NATS).
func (n *Node) Embedded() bool { return n.srv != nil }

// Replicas is the replica count of the streams this node creates.
func (n *Node) Replicas() int { return n.cfg.Replicas }

// Name is this node's name (the embedded server's, or the connection's server with an
// external NATS).
func (n *Node) Name() string {
	if n.srv != nil {
		return n.srv.Name()
	}
	return n.nc.ConnectedServerName()
}

// Context ends when the node gives up its in-flight JetStream work (Abort, Close). Every
// publish, ack confirmation and retry loop of the cluster adapters derives its deadline
// from it, so a node that cannot reach a quorum still shuts down within its grace period
// (issue 27) instead of retrying each publish for PublishTimeout.
func (n *Node) Context() context.Context { return n.life }

// Abort ends Context: in-flight publishes and their retries fail now (their SENDs get an
// ERROR, never a RECEIPT). The broker calls it when its shutdown grace period ends.
// Idempotent, safe for concurrent use.
func (n *Node) Abort() { n.abort() }

// Close drains the NATS connection (pending acks and publishes go out) and shuts the
// embedded server down. Idempotent.
func (n *Node) Close() {
	defer n.abort()
	if n.disk != nil {
		n.disk.close()
	}
	if n.nc != nil && !n.nc.IsClosed() {
		done := make(chan struct{})
		n.nc.SetClosedHandler(func(*nats.Conn) { close(done) })
		if err := n.nc.Drain(); err != nil {
			n.nc.Close()
		} else {
			select {
			case <-done:
			case <-time.After(5 * time.Second):
				n.nc.Close()
			}
		}
	}
	if n.srv != nil {
		n.srv.Shutdown()
		n.srv.WaitForShutdown()
	}
}

// natsLogger adapts nats-server's logger to slog.
type natsLogger struct{ l *slog.Logger }

func (l natsLogger) Noticef(format string, v ...any) { l.l.Debug(fmt.Sprintf(format, v...)) }
func (l natsLogger) Warnf(format string, v ...any)   { l.l.Warn(fmt.Sprintf(format, v...)) }
func (l natsLogger) Fatalf(format string, v ...any)  { l.l.Error(fmt.Sprintf(format, v...)) }
func (l natsLogger) Errorf(format string, v ...any)  { l.l.Error(fmt.Sprintf(format, v...)) }
func (l natsLogger) Debugf(format string, v ...any)  { l.l.Debug(fmt.Sprintf(format, v...)) }
func (l natsLogger) Tracef(format string, v ...any)  {}
