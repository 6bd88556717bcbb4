package admin

import (
	"log/slog"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/titan-broker/titan/internal/dest"
	"github.com/titan-broker/titan/internal/frame"
	"github.com/titan-broker/titan/internal/metrics"
)

// Source is the broker as the admin API sees it, declared here by its consumer: what the
// metrics collector reads (metrics.Source), since the snapshot and /metrics report the same
// state, plus the default pattern and the SEND path publications take. internal/broker
// implements it with a small adapter; every method must be safe for concurrent use. Router
// may be nil (then: no route metrics).
type Source interface {
	metrics.Source
	Publisher
	Operator
	// DefaultPattern is the pattern bare destinations resolve to, as for a SEND.
	DefaultPattern() dest.Pattern
}

// Publisher is the port POST /publish (and embed.Publish) publish through: the router's
// SEND route for the destination, with every stage a STOMP SEND passes (custom stages
// included). Errors: the *frame.ProtocolError the route ended in, whose Err (when set) is
// the sentinel (dispatch.ErrQueueFull, dispatch.ErrQueuePaused, dispatch.ErrNotStored).
type Publisher interface {
	Publish(p Publication) (*Published, error)
}

// Publication is one in-process SEND: headers as a client would send them, plus native
// metadata set after ingress mapping (reference 003).
type Publication struct {
	Destination string
	Group       string
	Headers     []frame.Header
	Native      []frame.Header
	Body        []byte
	// Principal is the user the publication is made as (a monitor API user logged in with
	// HTTP Basic), checked by the SEND route's authorization stage like a STOMP SEND of
	// that user; "" publishes as trusted code (the embed API, the bearer token).
	Principal string
}

// Published is an accepted Publication.
type Published struct {
	Identity  dest.Identity
	MessageID string
	// Destination is the message's canonical destination.
	Destination string
	// Dropped is set when a DROP address-full policy discarded it.
	Dropped bool
}

var _ metrics.Source = Source(nil)

// Options configure an Admin. The zero value is valid.
type Options struct {
	// Token, when non-empty, is required on every HTTP request as
	// "Authorization: Bearer <token>" (or as the password of HTTP Basic credentials).
	// Pure methods do not check it.
	Token string
	// Users, when set, authenticates requests with the broker's users (HTTP Basic) and
	// authorizes them: browse to read, manage to change anything (see Users).
	Users Users
	// LoginThrottle, when set, backs off failed logins (token or user credentials) per
	// remote address and user; nil: none.
	LoginThrottle LoginThrottle
	// Hosts are the names, besides IP literals and loopback names, that the Host header may
	// carry (the configured listen host and titan.monitor.allowed-hosts); any other Host is
	// refused with 403 (DNS rebinding).
	Hosts []string
	// MaxBodyBytes bounds a published message body after base64 decoding, in bytes
	// (default 16 MiB, the STOMP max-body-length default). A larger body is ErrTooLarge.
	MaxBodyBytes int
	// Collectors are extra Prometheus collectors served on /metrics beside the broker's
	// own (for example a metrics.DestinationStage).
	Collectors []prometheus.Collector
	// Node names this broker in every answer of the operator routes (the "node" field, for
	// the cluster-aware shape); "" leaves it empty.
	Node string
	// Cluster, set in cluster mode, is where GET /titan/monitor/cluster and the queue list
	// read the cluster-wide state; every /metrics series then carries the const label
	// node=Node. Nil in single-node mode (metrics unlabelled).
	Cluster ClusterSource
	// ClusterQueues, set in cluster mode, is what the queue actions (create, delete,
	// pause, resume, purge, browse, re-drive) of queues-pattern destinations act on, so
	// that they apply cluster-wide; nil: this node's dispatcher.
	ClusterQueues ClusterQueues
	// Logger receives request failures (5xx); nil discards them.
	Logger *slog.Logger
	// History, when set, is the broker's recent rates served on PathHistory (the broker
	// samples it); nil: PathHistory answers with no samples.
	History *History
}

// DefaultMaxBodyBytes is Options.MaxBodyBytes' default: 16 MiB.
const DefaultMaxBodyBytes = 16 << 20

// Admin implements the monitor API over a Source. Its options are immutable after New
// (it caches the sorted queue list, see nameCache); safe for concurrent use.
type Admin struct {
	src   Source
	opts  Options
	log   *slog.Logger
	names *nameCache // the sorted queue list, kept while no queue is added or removed
}

// New returns an Admin over src.
func New(src Source, o Options) *Admin {
	if o.MaxBodyBytes <= 0 {
		o.MaxBodyBytes = DefaultMaxBodyBytes
	}
	a := &Admin{src: src, opts: o, log: o.Logger, names: &nameCache{}}
	if a.log == nil {
		a.log = slog.New(slog.DiscardHandler)
	}
	return a
}

// defaultPattern is the pattern bare destinations resolve to, as for a SEND.
func (a *Admin) defaultPattern() dest.Pattern {
	if p := a.src.DefaultPattern(); p.Valid() {
		return p
	}
	return dest.PatternEvents
}

// QueueRef names one queue: a destination as a client would write it in SEND (any prefix or
// alias, or bare) and a group ("" means "default").
type QueueRef struct {
	// Destination is the destination as written in a SEND ("/orders", "/queues/jobs").
	Destination string `json:"destination"`
	// Group is the destination group; "" means "default".
	Group string `json:"group,omitempty"`
}

// identity resolves ref like a SEND would, for a dispatcher queue (events and queues). Errors
// (*Error): CodeInvalidParameter for a missing destination, CodeInvalidDestination,
// CodeUnsupportedPattern, CodeInvalidGroup.
func (a *Admin) identity(ref QueueRef) (dest.Identity, error) {
	return a.resolve(ref, false)
}

// resolve is identity; forPublish also admits events-store destinations, which have a log
// but no dispatcher queue.
func (a *Admin) resolve(ref QueueRef, forPublish bool) (dest.Identity, error) {
	if ref.Destination == "" {
		return dest.Identity{}, invalidParam("destination is required")
	}
	d, err := dest.Parse(ref.Destination, a.defaultPattern())
	if err != nil {
		a.log.Debug("invalid destination", "destination", ref.Destination, "err", err)
		return dest.Identity{}, errInvalidDestination(err)
	}
	switch {
	case d.Pattern == dest.PatternEvents, d.Pattern == dest.PatternQueues:
	case forPublish && d.Pattern == dest.PatternEventsStore:
	case forPublish:
		return dest.Identity{}, newError(CodeUnsupportedPattern,
			d.Pattern.String()+" destinations cannot be published to over HTTP (requests need a STOMP client to receive the reply)", ErrUnsupportedPattern)
	default:
		return dest.Identity{}, newError(CodeUnsupportedPattern,
			d.Pattern.String()+" destinations have no dispatcher queue (use /queue/... or /topic/...)", ErrUnsupportedPattern)
	}
	g, err := refGroup(ref.Group)
	if err != nil {
		return dest.Identity{}, err
	}
	return dest.IdentityOf(g, d), nil
}

// describe renders id for messages: "/orders" or "/orders in group market".
func describe(id dest.Identity) string {
	if id.Group == dest.DefaultGroup {
		return id.Destination()
	}
	return id.Destination() + " in group " + id.Group
}
