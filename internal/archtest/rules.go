package archtest

// Module is the module path every rule is relative to.
const Module = "github.com/titan-broker/titan"

// Patterns are the pattern packages: each is an adapter behind ports the router declares,
// on a single node and in cluster mode.
var Patterns = append(append([]string{}, SingleNodePatterns...), ClusterPatterns...)

// ClusterPatterns are the cluster-mode pattern packages on NATS JetStream, one per
// pattern as on the single node (issue 28). Below them sits internal/cluster (the node and
// what they share) and internal/cluster/pull (the pull loop of queues and logs); above
// them internal/cluster/pipeline (the store stage's publisher, over their Store port) and
// internal/cluster/status.
var ClusterPatterns = []string{"internal/cluster/events", "internal/cluster/queues", "internal/cluster/logs", "internal/cluster/requests", "internal/cluster/durables"}

// ClusterShared are the cluster packages every cluster pattern may use; they reach none.
var ClusterShared = []string{"internal/cluster", "internal/cluster/pull"}

// SingleNodePatterns are the single-node pattern packages. The cluster adapters sit one
// layer above them: internal/cluster may wrap one (its request/response keeps rpc's pending
// requests and timeouts and adds NATS for what crosses nodes), never the reverse.
var SingleNodePatterns = []string{"internal/event", "internal/pointqueue", "internal/eventlog", "internal/rpc", "internal/topicsub"}

// Rule forbids packages From from depending, directly or through others, on any package
// matching Forbidden (a path relative to Module; "x/..." matches x and everything under it;
// "..." matches every package of the module).
type Rule struct {
	// Name says the rule in words; it is printed with every violation.
	Name string
	// From are the packages the rule applies to.
	From []string
	// Forbidden are the packages they may not reach.
	Forbidden []string
	// Allowed are exceptions to Forbidden (config may use the pure grammar and settings).
	Allowed []string
}

// Rules are the import rules of DESIGN §1 and issue 10.
var Rules = []Rule{
	{
		Name:      "frame imports nothing of ours",
		From:      []string{"internal/frame"},
		Forbidden: []string{"..."},
	},
	{
		Name:      "slotcache imports nothing of ours",
		From:      []string{"internal/slotcache"},
		Forbidden: []string{"..."},
	},
	{
		Name:      "the transport and session never import the router or a pattern package",
		From:      []string{"internal/transport", "internal/session"},
		Forbidden: append([]string{"internal/router", "internal/cluster/..."}, Patterns...),
	},
	{
		Name: "the router imports no adapter (pattern implementations, store implementations, admin, broker)",
		From: []string{"internal/router"},
		Forbidden: append([]string{
			"internal/store/...", "internal/durable", "internal/admin", "internal/broker", "internal/dispatch",
			"internal/session", "internal/transport", "internal/metrics", "embed", "internal/cluster/...",
		}, Patterns...),
	},
	{
		Name:      "pattern packages import each other only through declared ports",
		From:      SingleNodePatterns,
		Forbidden: append([]string{"internal/router", "internal/broker", "internal/admin", "internal/cluster/..."}, Patterns...),
	},
	{
		Name: "cluster pattern packages import each other only through declared ports (they may wrap a single-node pattern)",
		From: ClusterPatterns,
		Forbidden: append([]string{"internal/router", "internal/broker", "internal/admin",
			"internal/cluster/pipeline", "internal/cluster/status"}, ClusterPatterns...),
	},
	{
		Name:      "the cluster's shared packages (node, pull loop) reach no pattern, pipeline or status",
		From:      ClusterShared,
		Forbidden: append([]string{"internal/router", "internal/broker", "internal/admin", "internal/cluster/..."}, SingleNodePatterns...),
		Allowed:   []string{"internal/cluster"},
	},
	{
		Name:      "the cluster pipeline and status reach patterns only through ports",
		From:      []string{"internal/cluster/pipeline", "internal/cluster/status"},
		Forbidden: append([]string{"internal/router", "internal/broker", "internal/admin"}, Patterns...),
	},
	{
		Name:      "lockorder (the ranked locks of LOCKS.md) imports nothing of ours",
		From:      []string{"internal/lockorder"},
		Forbidden: []string{"..."},
	},
	{
		Name:      "refusal (the router's refusal errors, which the adapters behind its ports return) imports nothing of ours",
		From:      []string{"internal/router/refusal"},
		Forbidden: []string{"..."},
	},
	{
		Name:      "selector (JMS message selectors) imports nothing of ours",
		From:      []string{"internal/selector"},
		Forbidden: []string{"..."},
	},
	{
		Name:      "admission (limits before login) is a leaf: the session and admin reach it through ports they declare",
		From:      []string{"internal/admission"},
		Forbidden: []string{"..."},
	},
	{
		Name:      "the session and the monitor API declare their login-throttle port instead of importing admission",
		From:      []string{"internal/session", "internal/admin", "internal/transport"},
		Forbidden: []string{"internal/admission"},
	},
	{
		Name:      "deliverytest (the shared delivery.Writer fakes) imports only frame, so delivery's own tests can use it",
		From:      []string{"internal/delivery/deliverytest"},
		Forbidden: []string{"..."},
		Allowed:   []string{"internal/frame"},
	},
	{
		Name:      "config imports no runtime package",
		From:      []string{"internal/config"},
		Forbidden: []string{"..."},
		Allowed:   []string{"internal/dest", "internal/address", "internal/frame"},
	},
}
