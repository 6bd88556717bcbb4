package archtest

// Module is the module path every rule is relative to.
const Module = "github.com/titan-broker/titan"

// Patterns are the pattern packages: each is an adapter behind ports the router declares
// (internal/cluster holds the cluster-mode adapters on NATS JetStream).
var Patterns = append(append([]string{}, SingleNodePatterns...), "internal/cluster")

// SingleNodePatterns are the single-node pattern packages. The cluster adapters sit one
// layer above them: internal/cluster may wrap one (its request/response keeps rpc's pending
// requests and timeouts and adds NATS for what crosses nodes), never the reverse.
var SingleNodePatterns = []string{"internal/event", "internal/pointqueue", "internal/eventlog", "internal/rpc"}

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
		Name:      "the transport and session never import the router or a pattern package",
		From:      []string{"internal/transport", "internal/session"},
		Forbidden: append([]string{"internal/router"}, Patterns...),
	},
	{
		Name: "the router imports no adapter (pattern implementations, store implementations, admin, broker)",
		From: []string{"internal/router"},
		Forbidden: append([]string{
			"internal/store/...", "internal/durable", "internal/admin", "internal/broker",
			"internal/session", "internal/transport", "internal/metrics", "embed",
		}, Patterns...),
	},
	{
		Name:      "pattern packages import each other only through declared ports",
		From:      SingleNodePatterns,
		Forbidden: append([]string{"internal/router", "internal/broker", "internal/admin"}, Patterns...),
	},
	{
		Name:      "the cluster adapters wrap single-node patterns but never reach the router, broker or admin",
		From:      []string{"internal/cluster"},
		Forbidden: []string{"internal/router", "internal/broker", "internal/admin"},
	},
	{
		Name:      "lockorder (the ranked locks of LOCKS.md) imports nothing of ours",
		From:      []string{"internal/lockorder"},
		Forbidden: []string{"..."},
	},
	{
		Name:      "selector (JMS message selectors) imports nothing of ours",
		From:      []string{"internal/selector"},
		Forbidden: []string{"..."},
	},
	{
		Name:      "config imports no runtime package",
		From:      []string{"internal/config"},
		Forbidden: []string{"..."},
		Allowed:   []string{"internal/dest", "internal/address", "internal/frame"},
	},
}
