package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/titan-broker/titan/internal/broker"
	"github.com/titan-broker/titan/internal/config"
	"github.com/titan-broker/titan/internal/gctune"
	"github.com/titan-broker/titan/internal/metrics"
)

type serveFlags struct {
	configPath      string
	host            string
	port            int
	monitorHost     string
	monitorPort     int
	monitorToken    string
	dataDir         string
	store           string
	logLevel        string
	logFormat       string
	fanoutMode      string
	defaultPattern  string
	destMetrics     bool
	acceptDataLoss  bool
	usersFile       string
	initUsers       bool
	clusterName     string
	clusterListen   string
	clusterRoutes   string
	clusterNode     string
	clusterReplicas int
	clusterParts    int
	clientPort      int
}

func newServeCmd() *cobra.Command {
	var f serveFlags
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run the broker",
		Long: `Run the Titan broker: STOMP on :61613, the monitor API, metrics and console on :7777,
data in ./data. Settings come from, in increasing precedence: built-in defaults, the YAML
file given by --config (Titan's titan-env.yml shape), TITAN_* environment variables, flags.

Environment: TITAN_CONFIG, TITAN_HOST, TITAN_PORT, TITAN_MONITOR_HOST, TITAN_MONITOR_PORT,
TITAN_MONITOR_TOKEN, TITAN_DATA_DIR, TITAN_STORE, TITAN_LOG_LEVEL, TITAN_LOG_FORMAT,
TITAN_FANOUT_MODE, TITAN_DEFAULT_PATTERN, TITAN_DESTINATION_METRICS (true), TITAN_USERS_FILE,
TITAN_INIT_USERS (true), TITAN_INIT_USER, TITAN_INIT_PASSWORD,
TITAN_CLUSTER_NAME, TITAN_CLUSTER_NODE, TITAN_CLUSTER_LISTEN, TITAN_CLUSTER_ROUTES,
TITAN_CLUSTER_REPLICAS, TITAN_CLUSTER_CLIENT_PORT.

Cluster mode: --cluster-name with --cluster-node, --cluster-listen and --cluster-routes (the
same route list on every node) runs this broker as one node of a cluster on NATS JetStream;
the ready line follows once a quorum of nodes is up (README "Running a cluster").

Security: without --users, clients on loopback connect anonymously with every permission
and every other peer is refused ("access refused"). With --users FILE (edit it with
'titan user add'), CONNECT needs a login and passcode (or a client certificate); SIGHUP
re-reads the file without dropping connections.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) (err error) {
			cfg, err := loadServeConfig(cmd, &f)
			banner := newBanner(cmd, serveWantsJSON(cmd, &f) || (err == nil && cfg.Log.Format == "json"))
			defer func() { err = banner.fail(err) }()
			if err != nil {
				return err
			}
			if f.initUsers || os.Getenv(initUsersEnv) == "true" {
				if err := initUsers(cfg.Security.UsersFile, cmd.ErrOrStderr()); err != nil {
					return err
				}
			}
			log := newLogger(cfg.Log)
			opts := broker.Options{Logger: log}
			if f.destMetrics || os.Getenv("TITAN_DESTINATION_METRICS") == "true" {
				// The shipped custom stage: per-(group, destination) SEND counters on /metrics.
				opts.SendStages = append(opts.SendStages, metrics.NewDestinationStage(10000))
			}
			b, err := broker.New(cfg, opts)
			if err != nil {
				return err
			}
			ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			if err := b.Start(); err != nil {
				return err
			}
			defer reloadOnSIGHUP(b, log)()
			// Few collections while the live heap is small (a broker at full speed allocates
			// about a kilobyte per message around a live heap of a few MiB); GOGC overrides.
			// Not in a race-detector build (tests): its shadow memory grows with the heap and
			// is never given back, so the floor would read as lasting RSS growth to the
			// memory checks the tests make.
			if tu := startGCFloor(b.GCFloor()); tu != nil {
				log.Debug("gc floor", "bytes", b.GCFloor())
				defer tu.Stop()
			}
			if b.Auth().Open() {
				log.Warn("no users file: clients on loopback connect anonymously with every permission, all others are refused; create users with `titan user add NAME --users FILE` and start with --users FILE")
			} else {
				log.Info("authentication on", "users_file", b.Auth().Path(), "users", b.Auth().Users())
			}
			banner.ready(b.Addrs(), b.MonitorAddr(), storeDesc(cfg))
			<-ctx.Done()
			banner.stopping()
			sctx, cancel := context.WithTimeout(context.Background(), 10e9)
			defer cancel()
			return b.Shutdown(sctx)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.configPath, "config", "", "YAML config file (titan-env.yml shape)")
	fl.StringVar(&f.host, "host", "0.0.0.0", "STOMP listen host of the first server")
	fl.IntVar(&f.port, "port", 61613, "STOMP listen port of the first server (0 picks a free port)")
	fl.StringVar(&f.monitorHost, "monitor-host", "127.0.0.1", "monitor API listen host (another needs --users or --monitor-token)")
	fl.IntVar(&f.monitorPort, "monitor-port", 7777, "monitor API port (0 picks a free port)")
	secretFlags(fl, &f.monitorToken, "monitor-token", "TITAN_MONITOR_TOKEN", "bearer token required by the monitor API (at least 16 bytes),")
	fl.StringVar(&f.dataDir, "data-dir", "./data", "store directory")
	fl.StringVar(&f.store, "store", "pebble", "store type: pebble (durable) or memory")
	fl.StringVar(&f.logLevel, "log-level", "info", "log level: debug, info, warn, error")
	fl.StringVar(&f.logFormat, "log-format", "text", "log format: text or json")
	fl.StringVar(&f.fanoutMode, "fanout-mode", "", `"virtual" routes events through dispatcher queues`)
	fl.StringVar(&f.defaultPattern, "default-pattern", "", "pattern for bare destinations: events, events-store or queues")
	fl.StringVar(&f.usersFile, "users", "", "users file: users, password hashes, roles, permissions (titan.security.users-file); none: anonymous from loopback only")
	fl.BoolVar(&f.initUsers, "init-users", false, "when the users file (--users) does not exist, create it with one user (TITAN_INIT_USER, default admin) with every permission and the password TITAN_INIT_PASSWORD, or a generated one printed once (env TITAN_INIT_USERS=true; the container image's default)")
	fl.StringVar(&f.clusterName, "cluster-name", "", "cluster mode: the NATS cluster name, the same on every node (titan.cluster.name)")
	fl.StringVar(&f.clusterListen, "cluster-listen", "", "cluster mode: route listen HOST:PORT (default 0.0.0.0:6222)")
	fl.StringVar(&f.clusterRoutes, "cluster-routes", "", "cluster mode: seed routes nats://HOST:PORT,... (the same list on every node)")
	fl.IntVar(&f.clusterReplicas, "cluster-replicas", 0, "cluster mode: JetStream replicas per stream (default 3)")
	fl.IntVar(&f.clusterParts, "cluster-partitions", 0, "cluster mode: streams per group and class that queues and logs are spread over (titan.cluster.partitions; default: the cluster's, 12 for a new one; fixed at its first start)")
	fl.StringVar(&f.clusterNode, "cluster-node", "", "cluster mode: this node's unique, stable name")
	fl.IntVar(&f.clientPort, "cluster-client-port", 0, "cluster mode: the embedded NATS server's client port on 127.0.0.1, for nats CLI and benchmarks (titan.cluster.client-port; default a free port)")
	fl.BoolVar(&f.acceptDataLoss, "accept-data-loss", false, "start even though recovery found committed records missing (see 'titan store check'); the loss is logged")
	fl.BoolVar(&f.destMetrics, "destination-metrics", false, "count SENDs and bytes per (group, destination) on /metrics (a custom router stage)")
	return cmd
}

func storeDesc(c config.Config) string {
	if cl := c.Cluster; cl.NatsURL != "" {
		return "jetstream " + cl.NatsURL
	} else if cl.Name != "" {
		return "jetstream cluster " + cl.Name + " " + cl.StoreDir
	}
	if c.Store.Type == "memory" {
		return "memory"
	}
	return c.Store.Type + " " + c.Store.DataDir
}

// loadServeConfig layers defaults, the YAML file, TITAN_* variables and flags.
func loadServeConfig(cmd *cobra.Command, f *serveFlags) (config.Config, error) {
	cfg := config.Default()
	path := f.configPath
	if path == "" {
		path = os.Getenv("TITAN_CONFIG")
	}
	if path != "" {
		data, err := os.ReadFile(path)
		if err != nil {
			return cfg, fmt.Errorf("reading config: %w (check the --config path)", err)
		}
		if cfg, err = config.Parse(data); err != nil {
			return cfg, fmt.Errorf("%s: %w", path, err)
		}
	}
	str := func(flag, env string, dst *string) {
		if v := os.Getenv(env); v != "" {
			*dst = v
		}
		if v, _ := cmd.Flags().GetString(flag); cmd.Flags().Changed(flag) {
			*dst = v
		}
	}
	num := func(flag, env string, dst *int) error {
		if v := os.Getenv(env); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil {
				return fmt.Errorf("%s=%q is not a number", env, v)
			}
			*dst = n
		}
		if cmd.Flags().Changed(flag) {
			*dst, _ = cmd.Flags().GetInt(flag)
		}
		return nil
	}
	s0 := &cfg.Servers[0]
	str("host", "TITAN_HOST", &s0.Host)
	if err := num("port", "TITAN_PORT", &s0.Port); err != nil {
		return cfg, err
	}
	str("monitor-host", "TITAN_MONITOR_HOST", &cfg.Monitor.Host)
	if err := num("monitor-port", "TITAN_MONITOR_PORT", &cfg.Monitor.Port); err != nil {
		return cfg, err
	}
	if v := os.Getenv("TITAN_MONITOR_TOKEN"); v != "" {
		cfg.Monitor.Token = v
	}
	if f.monitorToken != "" { // --monitor-token-file
		cfg.Monitor.Token = f.monitorToken
	}
	str("users", "TITAN_USERS_FILE", &cfg.Security.UsersFile)
	str("data-dir", "TITAN_DATA_DIR", &cfg.Store.DataDir)
	str("store", "TITAN_STORE", &cfg.Store.Type)
	if f.acceptDataLoss {
		cfg.Store.AcceptDataLoss = true
	}
	str("log-level", "TITAN_LOG_LEVEL", &cfg.Log.Level)
	str("log-format", "TITAN_LOG_FORMAT", &cfg.Log.Format)
	str("cluster-name", "TITAN_CLUSTER_NAME", &cfg.Cluster.Name)
	str("cluster-listen", "TITAN_CLUSTER_LISTEN", &cfg.Cluster.Listen)
	str("cluster-node", "TITAN_CLUSTER_NODE", &cfg.Cluster.NodeName)
	routes := ""
	str("cluster-routes", "TITAN_CLUSTER_ROUTES", &routes)
	if routes != "" {
		cfg.Cluster.Routes = strings.Split(routes, ",")
	}
	if err := num("cluster-replicas", "TITAN_CLUSTER_REPLICAS", &cfg.Cluster.Replicas); err != nil {
		return cfg, err
	}
	if err := num("cluster-client-port", "TITAN_CLUSTER_CLIENT_PORT", &cfg.Cluster.ClientPort); err != nil {
		return cfg, err
	}
	if err := num("cluster-partitions", "TITAN_CLUSTER_PARTITIONS", &cfg.Cluster.Partitions); err != nil {
		return cfg, err
	}
	for i := range cfg.Servers {
		str("fanout-mode", "TITAN_FANOUT_MODE", &cfg.Servers[i].ProtocolOptions.FanoutMode)
		str("default-pattern", "TITAN_DEFAULT_PATTERN", &cfg.Servers[i].ProtocolOptions.DefaultPattern)
	}
	cfg.ApplyDefaults()
	if err := cfg.Validate(); err != nil {
		return cfg, fmt.Errorf("invalid configuration:\n%w", err)
	}
	return cfg, nil
}

func newLogger(l config.Log) *slog.Logger {
	var level slog.Level
	_ = level.UnmarshalText([]byte(l.Level))
	opts := &slog.HandlerOptions{Level: level}
	if l.Format == "json" {
		return slog.New(slog.NewJSONHandler(os.Stderr, opts))
	}
	return slog.New(slog.NewTextHandler(os.Stderr, opts))
}

// startGCFloor starts the collector's floor (gctune.Start), except in a race-detector build.
func startGCFloor(floor uint64) *gctune.Tuner {
	if raceDetector {
		return nil
	}
	return gctune.Start(floor)
}
