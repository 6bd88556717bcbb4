// Package config is Titan's configuration: one immutable Config of plain values, its defaults,
// validation, and loading from Titan's titan-env.yml shape (DESIGN §7).
//
// Library packages never read flags or the environment; cmd/titan does, and overlays them on
// the file. Validate reports every problem at once. Unknown YAML keys are errors that name the
// key and its line.
package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/titan-broker/titan/internal/frame"
)

// File is the root of titan-env.yml.
type File struct {
	Titan Config `yaml:"titan"`
}

// Config is the whole broker configuration. Build one with Default, then Load or set fields;
// treat it as immutable once the broker starts.
type Config struct {
	// Servers are the STOMP listeners (default: one TCP server on 0.0.0.0:61613).
	Servers []Server `yaml:"servers"`
	// Monitor is the admin/monitor HTTP API, metrics and web console.
	Monitor Monitor `yaml:"monitor"`
	// FlowControl holds Titan's flow-control defaults.
	FlowControl FlowControl `yaml:"flow-control"`
	// AddressSettings give traffic-created queues their settings by channel match.
	AddressSettings []AddressSetting `yaml:"address-settings"`
	// Store selects the durable store.
	Store Store `yaml:"store"`
	// Log configures logging.
	Log Log `yaml:"log"`
	// Security selects users and permissions (DESIGN §8).
	Security Security `yaml:"security"`
	// Limits bound what clients can make the broker hold.
	Limits Limits `yaml:"limits"`
	// DuplicateDetection configures the duplicate id cache (SEND header _AMQ_DUPL_ID).
	DuplicateDetection DuplicateDetection `yaml:"duplicate-detection"`
	// Cluster, when enabled (a name or a nats-url), runs the broker as one node of a
	// cluster on NATS JetStream instead of the single-node store (README "Running a
	// cluster").
	Cluster Cluster `yaml:"cluster"`
}

// DuplicateDetection is titan.duplicate-detection. A SEND whose _AMQ_DUPL_ID header (Artemis's
// duplicate id) repeats an id seen on the same destination within the window is answered
// (RECEIPT) but not stored or delivered again. The id of a persistent message is stored in
// the message's own store batch and survives any crash or restart for the window.
type DuplicateDetection struct {
	// Window is how long an id is remembered, in ms (default 600000: 10 minutes).
	Window int `yaml:"window"`
	// CacheSize bounds the ids remembered over all destinations (default 100000; the
	// oldest is forgotten first).
	CacheSize int `yaml:"cache-size"`
}

// Limits is titan.limits: broker-wide resource bounds. Per-connection bounds are
// protocol-options (max-destinations-by-client, max-temp-queues-by-client,
// max-subscriptions-by-client).
type Limits struct {
	// MaxDestinations bounds the destinations traffic can create: queues, temp-queues,
	// fanout-mode events queues and events-store logs together (default 100000; -1
	// unlimited). A SEND that would create one more gets ERROR `destination limit
	// reached`. Operator-created queues and queues restored at start-up count but are
	// never refused.
	MaxDestinations int `yaml:"max-destinations"`
	// MaxGroups bounds the groups holding destinations (default 10000; -1 unlimited). A
	// SEND that would create the first destination of one more group gets ERROR `group
	// limit reached`.
	MaxGroups int `yaml:"max-groups"`
	// DestinationIdleTimeout is how long (ms) a traffic-created queue must stay empty,
	// without consumers and without a SEND before it is removed, with its store stream
	// (default 300000; -1 never). Operator-created queues and events-store logs are kept.
	DestinationIdleTimeout int `yaml:"destination-idle-timeout"`
	// MaxDurableSubscriptions bounds the events-store durable subscriptions the store holds,
	// live and offline, over all logs (default 10000; -1 unlimited). A SUBSCRIBE with a
	// durable-name that would create one more gets ERROR `durable subscription limit
	// reached`; resuming an existing one is never refused. Operators delete unused ones
	// with `titan durable delete` (DELETE /titan/monitor/durable-subscriptions). Reloadable:
	// no (read at start-up).
	MaxDurableSubscriptions int `yaml:"max-durable-subscriptions"`
	// DurableSubscriptionIdleTimeout is how long (ms) a durable subscription may stay
	// offline (no SUBSCRIBE reading it) before it is deleted with its position (default -1:
	// never, as in Artemis and RabbitMQ; 0 means the default).
	DurableSubscriptionIdleTimeout int `yaml:"durable-subscription-idle-timeout"`
	// MaxLargeFrameBytes bounds, over all connections, the bytes held in read buffers of
	// frames over 64 KiB still being received (default 536870912, 512 MiB; -1 unlimited). A
	// frame that would take more gets ERROR `large frame memory limit reached` and its
	// connection closes: connections that each start a maximal frame and never finish it
	// cannot hold max-body-length each without bound.
	MaxLargeFrameBytes int64 `yaml:"max-large-frame-bytes"`
	// MaxPendingRequests bounds the commands and queries awaiting a response (or their
	// timeout) in the whole broker (default 100000; -1 unlimited). A request over it gets
	// ERROR `too many pending requests` naming this key. Reloadable: no.
	MaxPendingRequests int `yaml:"max-pending-requests"`
	// MaxPendingRequestsByClient bounds them per connection (default 1000; -1 unlimited),
	// with the same ERROR naming this key. Reloadable: no.
	MaxPendingRequestsByClient int `yaml:"max-pending-requests-by-client"`
	// MaxConnections bounds the client connections held at once over every STOMP server
	// (default 100000; -1 unlimited). One more gets ERROR `connection limit reached` and is
	// closed (close reason connection_limit). Not reloadable.
	MaxConnections int `yaml:"max-connections"`
	// MaxConnectionsPerAddress bounds the client connections held at once from one IP
	// address (default 1000; -1 unlimited), logged in or not. Not reloadable.
	MaxConnectionsPerAddress int `yaml:"max-connections-per-address"`
	// LoginBackoff is the back-off after the first failed login from an address or of a
	// user, in ms (default 100; -1 turns the back-off off); it doubles with each further
	// failure up to LoginBackoffMax. STOMP (TCP and WebSocket) and the monitor's HTTP
	// authentication alike. Not reloadable.
	LoginBackoff int `yaml:"login-backoff"`
	// LoginBackoffMax bounds the login back-off in ms (default 10000); an attempt that would
	// wait longer is refused unchecked.
	LoginBackoffMax int `yaml:"login-backoff-max"`
}

// Cluster is titan.cluster: cluster mode on NATS JetStream (issue 15). Either an embedded
// clustered nats-server (Name set: every node lists the others as Routes) or an external
// NATS cluster (NatsURL set).
type Cluster struct {
	// Name is the NATS cluster name; the same on every node. Setting it enables the embedded
	// mode.
	Name string `yaml:"name"`
	// NodeName is this node's unique, stable name (its Raft peer identity; default: the
	// hostname plus the route listen port). Renaming a node needs a fresh store directory.
	NodeName string `yaml:"node-name"`
	// Listen is the route listen address HOST:PORT (default 0.0.0.0:6222).
	Listen string `yaml:"listen"`
	// Routes are the seed route URLs (nats://host:port), the same full list on every node
	// (a node ignores its own).
	Routes []string `yaml:"routes"`
	// Replicas is the JetStream replica count of every stream (default 3; at most the
	// number of nodes).
	Replicas int `yaml:"replicas"`
	// Partitions is how many JetStream streams each group's queues (and, separately, its
	// events-store logs, each ring size and retention class) are spread over, a destination
	// in one of them by a hash of its name (1-256; 0, the default: the count the cluster
	// was first started with, 12 for a new cluster). Fixed at the cluster's first start and
	// stored in it: a node configured with another count refuses to start.
	Partitions int `yaml:"partitions"`
	// StoreDir is the JetStream store directory (default <data-dir>/jetstream).
	StoreDir string `yaml:"store-dir"`
	// Sync is "always" (default: every write fsync'd before the PubAck) or a Go duration
	// (fsync at that interval; a RECEIPT then means replicated to a quorum, not on disk).
	Sync string `yaml:"sync"`
	// ClientPort is the embedded server's NATS client port on 127.0.0.1 (default 0: a free
	// port; the broker connects in-process, the listener must exist for routing to start).
	ClientPort int `yaml:"client-port"`
	// NatsURL connects to an external NATS cluster (comma-separated URLs) instead of
	// embedding one.
	NatsURL string `yaml:"nats-url"`
	// Credentials is a NATS .creds file for NatsURL.
	Credentials string `yaml:"credentials"`
	// User and Password authenticate to NatsURL without a creds file.
	User     string `yaml:"user"`
	Password string `yaml:"password"`
	// CAFile, CertFile, KeyFile configure TLS to NatsURL (CAFile alone verifies the server).
	CAFile   string `yaml:"ca-file"`
	CertFile string `yaml:"cert-file"`
	KeyFile  string `yaml:"key-file"`
}

// Enabled reports whether cluster mode is on.
func (c Cluster) Enabled() bool { return c.Name != "" || c.NatsURL != "" }

// Security is titan.security.
type Security struct {
	// UsersFile is the users file (users, bcrypt password hashes, roles, permissions,
	// anonymous; see internal/auth.File). Empty runs open: anonymous with every permission
	// from loopback peers only, every other peer refused. Re-read on SIGHUP.
	UsersFile string `yaml:"users-file"`
}

// Server is one STOMP listener (titan.servers[]).
type Server struct {
	// Name identifies the server in logs and metrics (default "stomp").
	Name string `yaml:"name"`
	// Protocol must be "stomp".
	Protocol string `yaml:"protocol"`
	// Host is the listen address (default 0.0.0.0).
	Host string `yaml:"host"`
	// Port is the listen port. In titan-env.yml an entry without `port:` gets
	// DefaultStompPort (61613); an explicit `port: 0` picks a free port (tests, ephemeral
	// brokers). Range 0-65535. Not reloadable.
	Port int `yaml:"port"`
	// Transport is "tcp" (default) or "websocket".
	Transport string `yaml:"transport"`
	// TransportOptions holds transport settings (path for websocket, default "/stomp").
	TransportOptions TransportOptions `yaml:"transport-options"`
	// ProtocolOptions are the STOMP settings.
	ProtocolOptions ProtocolOptions `yaml:"protocol-options"`
	// TLS enables TLS on the listener.
	TLS TLS `yaml:"tls"`
}

// TransportOptions are transport settings.
type TransportOptions struct {
	// Path is the WebSocket upgrade path (default "/stomp").
	Path string `yaml:"path"`
	// AllowedOrigins lists the Origin host patterns (path.Match syntax, e.g.
	// "app.example.com", "*.example.com"; "*" for any) from which browser pages on other
	// sites may open WebSocket connections. Empty allows same-origin pages only (the Origin
	// host equals the Host the page was served from); clients that send no Origin header
	// are not browsers and are not affected.
	AllowedOrigins []string `yaml:"allowed-origins"`
	// AllowedHosts are DNS names browsers may use to reach a WebSocket server, besides its
	// host, IP literals and loopback names: a browser request with another Host is refused
	// (DNS rebinding). Clients that send no Origin header are not checked.
	AllowedHosts []string `yaml:"allowed-hosts"`
	// TCPKeepAlive is the TCP keepalive period of accepted connections in ms: the idle time
	// before the first probe and the interval between probes; after 4 unanswered probes the
	// connection is dropped (default 15000; -1 off). It finds dead peers of connections
	// that negotiated no heart-beats. TCP and WebSocket alike.
	TCPKeepAlive int `yaml:"tcp-keepalive"`
}

// ProtocolOptions are STOMP settings (titan.servers[].protocol-options). Lengths are bytes,
// intervals milliseconds, as in Titan's existing file format.
type ProtocolOptions struct {
	// SupportedVersions lists offered versions (default ["1.0","1.1","1.2"]).
	SupportedVersions []string `yaml:"supported-versions"`
	// MaxHeaderLength bounds one header line in bytes (default 10240).
	MaxHeaderLength int `yaml:"max-header-length"`
	// MaxHeaders bounds headers per frame (default 1000).
	MaxHeaders int `yaml:"max-headers"`
	// MaxHeadersBytes bounds the command line, header lines and blank line of a frame,
	// EOLs included (default 262144).
	MaxHeadersBytes int `yaml:"max-headers-bytes"`
	// MaxBodyLength bounds a frame body in bytes (default 16777216).
	MaxBodyLength int `yaml:"max-body-length"`
	// MaxFrameInTransaction bounds frames buffered by one transaction (default 10000).
	MaxFrameInTransaction int `yaml:"max-frame-in-transaction"`
	// HeartbeatX is the server's outgoing heart-beat interval in ms (default 10000; 0 none).
	HeartbeatX *int `yaml:"heartbeat-x"`
	// HeartbeatY is the incoming heart-beat interval the server asks for in ms (default 10000).
	HeartbeatY *int `yaml:"heartbeat-y"`
	// HeartbeatMin is the shortest heart-beat interval in ms the server agrees to, either
	// way (default 1000). A client that asks for heart-beats (CONNECT heart-beat:cx,cy) is
	// offered its own intervals, raised to this floor, instead of heartbeat-x/-y.
	HeartbeatMin *int `yaml:"heartbeat-min"`
	// HeartbeatGrace multiplies the client interval before a silent connection closes
	// (default 2.0).
	HeartbeatGrace float64 `yaml:"heartbeat-grace"`
	// ConnectionTTL, when positive, closes connections without client heart-beats after
	// this many ms of silence (ActiveMQ Artemis's connection-ttl). Default off (0 or -1):
	// such connections are never closed for silence, as in RabbitMQ and ActiveMQ 5, and
	// dead peers are found by TCP keepalive (transport-options.tcp-keepalive).
	ConnectionTTL int `yaml:"connection-ttl"`
	// ConnectTimeout is how long, in ms, a connection may take from accept to a complete
	// CONNECT frame (default 10000).
	ConnectTimeout int `yaml:"connect-timeout"`
	// FrameTimeout is how long, in ms, a frame may take to arrive once its first byte was
	// read (default 60000; -1 no bound). A frame still incomplete then gets ERROR `frame
	// timeout` and the connection closes (close reason frame_timeout).
	FrameTimeout int `yaml:"frame-timeout"`
	// MaxSubscriptionsByClient bounds subscriptions per connection (default 1000).
	MaxSubscriptionsByClient int `yaml:"max-subscriptions-by-client"`
	// MaxDestinationsByClient bounds the queues and events-store logs one connection's
	// SENDs create (default 1000; -1 unlimited). Over it: ERROR `destination limit reached`.
	MaxDestinationsByClient int `yaml:"max-destinations-by-client"`
	// MaxTempQueuesByClient bounds the temp-queues of its own one connection creates
	// (default 100; -1 unlimited). Over it: ERROR `temp-queue limit reached`.
	MaxTempQueuesByClient int `yaml:"max-temp-queues-by-client"`
	// MaxOutboundBytes bounds bytes queued to one connection (default 16777216).
	MaxOutboundBytes int64 `yaml:"max-outbound-bytes"`
	// DefaultPrefetch bounds unacknowledged messages per subscription without a
	// prefetch-count header (default 1000).
	DefaultPrefetch int `yaml:"default-prefetch"`
	// FanoutMode "virtual" routes events SENDs through dispatcher queues (reference 000);
	// empty sends them straight to subscriptions. Broker-wide when set on any server.
	FanoutMode string `yaml:"fanout-mode"`
	// DefaultPattern routes bare destinations: events (default), events-store or queues.
	DefaultPattern string `yaml:"default-pattern"`
}

// TLS configures TLS on a listener.
type TLS struct {
	Enabled  bool   `yaml:"enabled"`
	CertFile string `yaml:"cert-file"`
	KeyFile  string `yaml:"key-file"`
	// ClientAuth is none (default), request (verify a client certificate when one is sent)
	// or require (refuse the handshake without a verified one). A verified client
	// certificate authenticates the connection: its subject CN or a SAN names the user.
	ClientAuth string `yaml:"client-auth"`
	// CAFile holds the PEM certificates client certificates must chain to (needed with
	// client-auth request or require).
	CAFile string `yaml:"ca-file"`
	// MinVersion is the lowest TLS version accepted: "1.2" (default) or "1.3".
	MinVersion string `yaml:"min-version"`
	// CipherSuites lists the TLS 1.2 cipher suites offered, by Go's names (e.g.
	// TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256). Default: the ECDHE suites with AEAD
	// ciphers (AES-GCM, ChaCha20-Poly1305) — no CBC or SHA-1 suites. TLS 1.3's suites are
	// fixed by Go and always offered.
	CipherSuites []string `yaml:"cipher-suites"`
}

// Monitor configures the admin HTTP API (titan.monitor).
type Monitor struct {
	// Enabled turns the API on (default true).
	Enabled *bool `yaml:"enabled"`
	// Host is the listen address (default 127.0.0.1: loopback only; listening elsewhere
	// needs a users file or a token).
	Host string `yaml:"host"`
	// Port is the listen port. In titan-env.yml a monitor section without `port:` gets
	// DefaultMonitorPort (7777); an explicit `port: 0` picks a free port. Range 0-65535.
	Port int `yaml:"port"`
	// Token, when set, is required as "Authorization: Bearer <token>" on every call.
	Token string `yaml:"token"`
	// AllowedHosts are DNS names, besides the listen host, IP literals and loopback names,
	// that requests may carry in their Host header; any other Host is refused (DNS
	// rebinding protection).
	AllowedHosts []string `yaml:"allowed-hosts"`
	// TLS serves the API over HTTPS (same settings as a listener's tls).
	TLS TLS `yaml:"tls"`
	// HistoryIntervalMs is how often the broker samples the rates the console's charts
	// start with (admin.History), in milliseconds: default 5000, range 100-60000. The last
	// 15 minutes are kept.
	HistoryIntervalMs int `yaml:"history-interval-ms"`
}

// FlowControl is titan.flow-control.
type FlowControl struct {
	Queue      QueueFlow      `yaml:"queue"`
	Subscriber SubscriberFlow `yaml:"subscriber"`
	Heap       HeapFlow       `yaml:"heap"`
}

// SubscriberFlow holds the watermarks of one subscriber connection's pending output (DESIGN
// §9): past MaxPendingBytes the producers feeding it are paused, and they resume at
// ResumePendingBytes; a subscriber that stays over without reading for
// SlowConsumerTimeout is closed with ERROR "slow consumer".
type SubscriberFlow struct {
	// MaxPendingBytes is the high watermark (default 16777216 = 16 MiB). A server's
	// protocol-options.max-outbound-bytes, when set, overrides it for that server.
	MaxPendingBytes int64 `yaml:"max-pending-bytes"`
	// ResumePendingBytes is the low watermark (default half of the high one).
	ResumePendingBytes int64 `yaml:"resume-pending-bytes"`
	// SlowConsumerTimeout is how long, in ms, a subscriber may stay over the high watermark
	// without its pending output shrinking (default 30000; -1 disables the close).
	SlowConsumerTimeout int `yaml:"slow-consumer-timeout"`
	// MaxBufferBytes bounds what one subscriber connection may have queued or held for its
	// events subscriptions (issue 30): past MaxPendingBytes the slow-consumer timer runs;
	// at MaxBufferBytes the subscriber is closed as a slow consumer at once (under
	// slow-consumer-policy DROP it drops at MaxPendingBytes instead). Default 0: four
	// times MaxPendingBytes. Must be 0 or at least MaxPendingBytes.
	MaxBufferBytes int64 `yaml:"max-buffer-bytes"`
}

// QueueFlow bounds queues-pattern queues.
type QueueFlow struct {
	// MaxPendingBytes bounds a traffic-created queue (default 67108864 = 64 MiB).
	MaxPendingBytes int64 `yaml:"max-pending-bytes"`
	// ResumePendingBytes is accepted for compatibility; producers resume as soon as there is
	// room.
	ResumePendingBytes int64 `yaml:"resume-pending-bytes"`
}

// HeapFlow is the pair of heap watermarks (DESIGN §9): fractions of MaxBytes, or of the Go
// memory limit (GOMEMLIMIT) when MaxBytes is 0, else of half the memory available to the
// process. Past HighWatermark every producer pauses before publishing until the heap falls
// to LowWatermark. MaxBytes -1 turns the heap watermarks off.
type HeapFlow struct {
	// HighWatermark is the fraction of the limit that pauses producers (default 0.9).
	HighWatermark float64 `yaml:"high-watermark"`
	// LowWatermark is the fraction at which they resume (default 0.7).
	LowWatermark float64 `yaml:"low-watermark"`
	// MaxBytes is the heap size the fractions refer to (default 0: GOMEMLIMIT, else half of
	// the memory available to the process — the cgroup's memory.max, else physical memory —
	// as Artemis's global-max-size defaults to half the JVM heap; -1: no heap watermarks).
	MaxBytes int64 `yaml:"max-bytes"`
}

// AddressSetting applies to traffic-created queues whose dot channel matches Match (`#` many
// words, `*` one word; the most specific match wins, as in ActiveMQ Artemis).
type AddressSetting struct {
	Match                     string `yaml:"match"`
	DefaultRingSize           *int   `yaml:"default-ring-size"`
	DefaultMaxPendingMessages *int   `yaml:"default-max-pending-messages"`
	MaxPendingBytes           *int64 `yaml:"max-pending-bytes"`
	AddressFullPolicy         string `yaml:"address-full-policy"`
	BlockTimeout              *int   `yaml:"block-timeout"` // ms
	MaxDeliveries             *int   `yaml:"max-deliveries"`
	DeadLetter                string `yaml:"dead-letter"`
	RedeliveryDelay           *int   `yaml:"redelivery-delay"` // ms
	RetentionMaxMessages      *int64 `yaml:"retention-max-messages"`
	RetentionMaxBytes         *int64 `yaml:"retention-max-bytes"`
	RetentionMaxAge           string `yaml:"retention-max-age"` // Go duration

	// SlowConsumerPolicy is what events destinations do for a subscriber over its outbound
	// limit: CLOSE (default; BLOCK is accepted as its old name: buffer up to max-buffer-bytes
	// and close the subscriber as a slow consumer after slow-consumer-timeout or at that
	// bound; producers never wait) or DROP (drop the message for that subscriber, count it
	// and log it, rate-limited).
	SlowConsumerPolicy string `yaml:"slow-consumer-policy"`
}

// Store selects the durable store.
type Store struct {
	// Type is "pebble" (default, embedded, durable) or "memory" (nothing survives a restart).
	Type string `yaml:"type"`
	// DataDir is the store directory (default ./data).
	DataDir string `yaml:"data-dir"`
	// AcceptDataLoss starts on a store whose recovery found fewer committed records than it
	// had recorded as synced (a write-ahead log cut or lost after a crash), keeping what
	// remains and logging the loss; false (the default) refuses to start and points at
	// `titan store check`. Meant for one start (the serve flag --accept-data-loss), not
	// for a config file. Not reloadable.
	AcceptDataLoss bool `yaml:"accept-data-loss"`
	// MinFreeBytes is the low-water mark of free space on the data directory's file
	// system, in bytes: below it new persistent messages are refused (ERROR `store
	// unavailable: free disk space below the low-water mark`, health down at once) until
	// the free space is above ResumeFreeBytes; acknowledgements go on. 0 (the default)
	// means 64 MiB (four memtables: room for Pebble's WAL preallocation, a flush and a
	// compaction); -1 turns the check off. Not reloadable.
	MinFreeBytes int64 `yaml:"min-free-bytes"`
	// ResumeFreeBytes is the high-water mark, in bytes: refused SENDs are taken again above
	// it. 0 (the default), or a value not above MinFreeBytes, means 1.5 × MinFreeBytes.
	// Not reloadable.
	ResumeFreeBytes int64 `yaml:"resume-free-bytes"`
}

// Log configures logging.
type Log struct {
	// Level is debug, info (default), warn or error.
	Level string `yaml:"level"`
	// Format is text (default) or json.
	Format string `yaml:"format"`
}

// Parse decodes a titan-env.yml document. Unknown keys are errors naming the key and line.
// A server entry or monitor section without `port:` gets its default port (61613, 7777);
// an explicit `port: 0` picks a free port.
// The result has defaults applied but is not validated.
func Parse(data []byte) (Config, error) {
	var f File
	f.Titan.Monitor.Port = DefaultMonitorPort // no monitor section at all
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&f); err != nil && !errors.Is(err, io.EOF) {
		return Config{}, fmt.Errorf("config: %w", err)
	}
	f.Titan.ApplyDefaults()
	return f.Titan, nil
}

// Load reads and parses the file at path, then validates it.
func Load(path string) (Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return Config{}, fmt.Errorf("config: %w", err)
	}
	c, err := Parse(data)
	if err != nil {
		return Config{}, fmt.Errorf("%s: %w", path, err)
	}
	if err := c.Validate(); err != nil {
		return Config{}, fmt.Errorf("%s: %w", path, err)
	}
	return c, nil
}

// Versions returns the server's supported versions.
func (s Server) Versions() []frame.Version {
	var out []frame.Version
	for _, v := range s.ProtocolOptions.SupportedVersions {
		if fv, ok := frame.ParseVersion(v); ok {
			out = append(out, fv)
		}
	}
	return out
}

// Addr returns host:port.
func (s Server) Addr() string { return s.Host + ":" + strconv.Itoa(s.Port) }

// Addr returns the monitor's host:port.
func (m Monitor) Addr() string { return m.Host + ":" + strconv.Itoa(m.Port) }

// IsEnabled reports whether the monitor runs (default true).
func (m Monitor) IsEnabled() bool { return m.Enabled == nil || *m.Enabled }

// Ms converts a millisecond count to a Duration.
func Ms(n int) time.Duration { return time.Duration(n) * time.Millisecond }

// DefaultSubscriberMaxPendingBytes is the default high watermark of a subscriber
// connection's pending output (flow-control.subscriber.max-pending-bytes).
const DefaultSubscriberMaxPendingBytes = 16 << 20

// ParseSlowConsumerPolicy maps an address setting's slow-consumer-policy ("" or CLOSE, DROP;
// any case; BLOCK, the name before issue 30, is CLOSE) to drop: whether events are dropped
// for a subscriber over its limit rather than buffered until it is closed as a slow consumer.
func ParseSlowConsumerPolicy(s string) (drop, ok bool) {
	switch strings.ToUpper(s) {
	case "", "CLOSE", "BLOCK":
		return false, true
	case "DROP":
		return true, true
	}
	return false, false
}

// SlowConsumerTimeoutDuration is flow-control.subscriber.slow-consumer-timeout as a duration (0 when
// disabled).
func (f SubscriberFlow) SlowConsumerTimeoutDuration() time.Duration {
	if f.SlowConsumerTimeout < 0 {
		return 0
	}
	return Ms(f.SlowConsumerTimeout)
}
