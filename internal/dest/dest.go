package dest

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// MaxBytes is the longest destination Parse accepts, in bytes, measured on the raw header
// value before the leading '/' is stripped (reference 003, grammar step 1).
const MaxBytes = 512

// MaxHashes is the most '#' wildcard tokens ParseFilter accepts in one filter: enough for
// any binding key in use, and a bound on the work of matching one (each '#' may consume any
// number of tokens).
const MaxHashes = 8

// DefaultGroup is the group of a SEND or SUBSCRIBE whose group header is absent or empty
// (DESIGN §3).
const DefaultGroup = "default"

// maxGroupBytes is the longest valid group name, in bytes.
const maxGroupBytes = 64

// Pattern is the messaging pattern a destination's prefix selects (DESIGN §2). The zero
// Pattern is no pattern: Valid reports false and Parse never returns it.
type Pattern uint8

// The messaging patterns, in DESIGN §2 table order.
const (
	// PatternEvents is fan-out to the subscribers present now (/topic/, alias /events/).
	PatternEvents Pattern = iota + 1
	// PatternEventsStore is a durable append-only log per channel (/events-store/, alias
	// /store/).
	PatternEventsStore
	// PatternQueues is durable point-to-point delivery (/queue/, alias /queues/).
	PatternQueues
	// PatternCommands is request/response without a response body (/command/, alias
	// /commands/).
	PatternCommands
	// PatternQueries is request/response with a response body (/query/, alias /queries/).
	PatternQueries
	// PatternTempQueue is a connection's private reply queue (/temp-queue/, no alias).
	PatternTempQueue

	// MaxPattern is the largest valid Pattern, for sizing arrays indexed by Pattern
	// ([dest.MaxPattern + 1]T).
	MaxPattern = PatternTempQueue
)

// patternNames are the config names (String, ParsePattern); patternPrefixes the primary
// prefixes used on egress. Both are indexed by Pattern.
var (
	patternNames    = [MaxPattern + 1]string{"", "events", "events-store", "queues", "commands", "queries", "temp-queue"}
	patternPrefixes = [MaxPattern + 1]string{"", "topic", "events-store", "queue", "command", "query", "temp-queue"}
)

// String returns the pattern's config name: "events", "events-store", "queues", "commands",
// "queries" or "temp-queue"; "pattern(N)" for an invalid value.
func (p Pattern) String() string {
	if p.Valid() {
		return patternNames[p]
	}
	return fmt.Sprintf("pattern(%d)", uint8(p))
}

// Valid reports whether p is one of the defined patterns.
func (p Pattern) Valid() bool { return p >= PatternEvents && p <= MaxPattern }

// Prefix returns the primary prefix of p without slashes ("topic", "events-store", "queue",
// "command", "query", "temp-queue"), the one egress always uses; "" for an invalid value.
func (p Pattern) Prefix() string {
	if p.Valid() {
		return patternPrefixes[p]
	}
	return ""
}

// MarshalText implements encoding.TextMarshaler with the config name (see String). It fails
// for an invalid Pattern.
func (p Pattern) MarshalText() ([]byte, error) {
	if !p.Valid() {
		return nil, fmt.Errorf("dest: invalid pattern %d", uint8(p))
	}
	return []byte(patternNames[p]), nil
}

// UnmarshalText implements encoding.TextUnmarshaler, accepting exactly the names ParsePattern
// accepts, so a config file can spell default-pattern as "events".
func (p *Pattern) UnmarshalText(b []byte) error {
	v, ok := ParsePattern(string(b))
	if !ok {
		return fmt.Errorf("dest: unknown pattern %q (want events, events-store, queues, commands, queries or temp-queue)", b)
	}
	*p = v
	return nil
}

// ParsePattern returns the Pattern whose config name (see String) is exactly s; matching is
// case-sensitive and prefixes or aliases ("topic", "queue") are not accepted. ok is false
// for any other string.
func ParsePattern(s string) (p Pattern, ok bool) {
	for i := PatternEvents; i <= MaxPattern; i++ {
		if patternNames[i] == s {
			return i, true
		}
	}
	return 0, false
}

// ValidDefault reports whether p may be the default pattern that routes bare destinations:
// only PatternEvents, PatternEventsStore and PatternQueues may (reference 003, "There is no
// commands / queries default").
func ValidDefault(p Pattern) bool {
	return p == PatternEvents || p == PatternEventsStore || p == PatternQueues
}

// prefixPattern maps a destination's first segment to its pattern through the
// case-sensitive prefix table (DESIGN §2): primaries and their aliases.
func prefixPattern(seg string) (Pattern, bool) {
	switch seg {
	case "topic", "events":
		return PatternEvents, true
	case "queue", "queues":
		return PatternQueues, true
	case "events-store", "store":
		return PatternEventsStore, true
	case "command", "commands":
		return PatternCommands, true
	case "query", "queries":
		return PatternQueries, true
	case "temp-queue":
		return PatternTempQueue, true
	}
	return 0, false
}

// Destination is a resolved destination: its pattern and its channel. Together with a group
// it is the broker-internal identity (group, pattern, channel) of DESIGN §2; two raw strings
// that resolve to equal Destinations name the same thing (/topic/a.b and /events/a/b).
//
// Channel is the dot-joined channel ("orders.eu"): never empty, no '/', no control
// characters, and every dot-separated token non-empty. When it came from Parse it may share
// memory with the raw string (it is a substring when raw has a single channel segment), so
// if raw points into a reusable read buffer, clone Channel (strings.Clone) before keeping it.
//
// Bare is set when the first segment was no known prefix: the destination is routed by the
// default pattern and its egress form has no prefix. Wildcard is set when a token of Channel
// is exactly "*" or ">"; only ParseFilter returns such a Destination, and only for events.
//
// The zero Destination is invalid (its Pattern is not Valid). Destination is a small value
// type, comparable with ==.
type Destination struct {
	Pattern  Pattern
	Channel  string
	Bare     bool
	Wildcard bool
}

// Parse resolves a destination header value for every frame but SUBSCRIBE (SEND above all),
// following DESIGN §2 / reference 003 steps 1-6, with def as the pattern for bare
// destinations. A wildcard token is rejected.
//
// The rules, in order:
//  1. len(raw) ≤ MaxBytes, measured on raw itself (so a 513-byte raw fails even if it starts
//     with '/').
//  2. Exactly one leading '/' is stripped (/queue/x and queue/x are the same).
//  3. The rest is split on '/'; an empty segment ("", "/", "//x", "/queue//x", a trailing
//     '/') is invalid.
//  4. The first segment selects the pattern through the case-sensitive prefix table; a
//     prefix with nothing after it ("/queue", "/queue/") is invalid.
//  5. The remaining segments joined with '.' are the channel. A literal '.' inside a segment
//     passes through, so /topic/a.b and /topic/a/b are the same channel "a.b". Titan
//     decision: every dot-separated token of the channel must be non-empty, so "/topic/a..b",
//     "/topic/.a" and "/topic/a." are invalid and the channel is always a well-formed dot
//     sequence that Match and the subscription index can tokenize.
//  6. A first segment that is no known prefix makes the destination bare: all segments form
//     the channel and def routes it; def must satisfy ValidDefault. Titan decision: a bare
//     destination whose first dot-token is a known prefix ("/queue.jobs", "topic.a/b") is
//     invalid, because its egress form ("/queue/jobs") would parse as a different,
//     prefixed destination.
//
// Bytes below 0x20 and 0x7f are invalid anywhere. Other bytes, including non-ASCII UTF-8,
// pass through untouched. Only a whole token "*" or ">" is a wildcard; "a*" and "a>" are
// literal tokens.
//
// Errors: ErrInvalid, wrapped with a detail for the log. Allocation: none for a destination
// with a single channel segment (the channel is a substring of raw); one (the joined
// channel) when there are several; the error path allocates. Safe for concurrent use.
func Parse(raw string, def Pattern) (Destination, error) {
	return parse(raw, def, false)
}

// ParseFilter is Parse for SUBSCRIBE: it additionally accepts wildcard tokens in the channel
// (DESIGN §2 "Wildcards"; reference 003). A token that is exactly "*" matches one token in
// any position; a token that is exactly ">" matches one or more trailing tokens and must be
// the last token of the channel. Tokens such as "a*" or "a>" are literal. Slash-to-dot still
// applies, so /topic/a/*/c gives the filter "a.*.c" and /topic/a.* gives "a.*".
//
// A token that is exactly "#" is the multi-word wildcard of RabbitMQ's topic exchange and of
// Artemis: it matches zero or more tokens, in any position, so "a.#" matches "a" and
// "a.b.c", "#.eu" matches "eu" and "x.y.eu", and "#" matches every channel. At most
// MaxHashes of them. Titan's own ">" keeps its meaning (one or more, last only). The '#'
// stays in the channel as a token; on SEND it is a literal token.
//
// Wildcards are legal only when the resolved pattern is PatternEvents (prefixed, or bare
// under an events default); ParseFilter rejects them for every other pattern. The returned
// Destination has Wildcard set when the channel holds a wildcard token.
//
// Errors: ErrInvalid, wrapped, for everything Parse rejects other than a wildcard, for a '>'
// that is not the last token, for more than MaxHashes '#', and for a wildcard outside events. Allocation and concurrency as
// Parse.
func ParseFilter(raw string, def Pattern) (Destination, error) {
	return parse(raw, def, true)
}

// invalid wraps ErrInvalid with a detail. It is only called on the error path.
func invalid(detail string) error {
	return fmt.Errorf("%w: %s", ErrInvalid, detail)
}

func parse(raw string, def Pattern, filter bool) (Destination, error) {
	if len(raw) > MaxBytes {
		return Destination{}, invalid(fmt.Sprintf("%d bytes, longer than the %d-byte limit", len(raw), MaxBytes))
	}
	s := raw
	if len(s) > 0 && s[0] == '/' {
		s = s[1:]
	}
	if s == "" {
		return Destination{}, invalid("empty")
	}

	var d Destination
	rest := s
	direct := false
	if p, r, dir, ok, err := peerSpelling(raw, s); err != nil {
		return Destination{}, err
	} else if ok {
		d.Pattern, rest, direct = p, r, dir
	} else if i := strings.IndexByte(s, '/'); i >= 0 {
		if p, ok := prefixPattern(s[:i]); ok {
			d.Pattern = p
			rest = s[i+1:]
			if rest == "" {
				return Destination{}, invalid("prefix " + s[:i] + " has no channel")
			}
		}
	} else if _, ok := prefixPattern(s); ok {
		return Destination{}, invalid("prefix " + s + " has no channel")
	}
	if d.Pattern == 0 {
		if !ValidDefault(def) {
			return Destination{}, invalid("default pattern " + def.String() + " cannot route bare destinations")
		}
		d.Pattern = def
		d.Bare = true
	}

	// One pass over the channel part: tokens are separated by '/' (segments) or '.' (literal
	// dots); none may be empty; find control characters and wildcards.
	slash, multibyte, hashes := false, false, 0
	start := 0
	for i := 0; i <= len(rest); i++ {
		var c byte
		if i < len(rest) {
			c = rest[i]
			if c != '/' && c != '.' {
				if c < 0x20 || c == 0x7f {
					return Destination{}, invalid(fmt.Sprintf("control character 0x%02x", c))
				}
				multibyte = multibyte || c >= utf8.RuneSelf
				continue
			}
		}
		tok := rest[start:i]
		switch {
		case tok == "":
			if c == '.' || (start > 0 && rest[start-1] == '.') {
				return Destination{}, invalid("empty channel token")
			}
			return Destination{}, invalid("empty segment")
		case tok == "*":
			d.Wildcard = true
		case tok == ">":
			d.Wildcard = true
			if i != len(rest) {
				return Destination{}, invalid("'>' must be the last segment")
			}
		case tok == "#" && filter:
			// Artemis's and RabbitMQ's multi-word wildcard, on SUBSCRIBE only (a SEND's '#'
			// is a literal token): zero or more tokens, in any position (see ParseFilter).
			d.Wildcard = true
			if hashes++; hashes > MaxHashes {
				return Destination{}, invalid(fmt.Sprintf("more than %d '#' wildcards", MaxHashes))
			}
		case start == 0 && d.Bare && c == '.':
			// A bare destination whose first dot-token is a prefix would egress as that
			// prefixed destination.
			if _, ok := prefixPattern(tok); ok {
				return Destination{}, invalid("bare destination starts with prefix " + tok + " followed by '.'")
			}
		}
		if c == '/' {
			slash = true
		}
		start = i + 1
	}
	if multibyte && !utf8.ValidString(rest) {
		// STOMP 1.2 headers are UTF-8; a name that is not could not be shown, named to the
		// monitor API or deleted by an operator.
		return Destination{}, invalid("not valid UTF-8")
	}
	if d.Wildcard {
		if direct {
			return Destination{}, invalid("wildcard on the amq.direct exchange; its routing keys are exact")
		}
		if !filter {
			return Destination{}, invalid("wildcard outside SUBSCRIBE")
		}
		if d.Pattern != PatternEvents {
			return Destination{}, invalid("wildcard on " + d.Pattern.String() + "; wildcards are for events only")
		}
	}
	if slash {
		d.Channel = strings.ReplaceAll(rest, "/", ".")
	} else {
		d.Channel = rest
	}
	return d, nil
}

// The peers' destination spellings that Parse and ParseFilter accept besides Titan's own
// prefixes (issue 26, so that an unchanged client of RabbitMQ, ActiveMQ or Artemis reaches
// the same pattern):
//
//   - RabbitMQ /exchange/amq.topic/<routing key> is the events destination of that channel
//     (/topic/<routing key>, which RabbitMQ routes through amq.topic too); /exchange/amq.direct/<rk>
//     is the same events channel without wildcards (a direct exchange matches keys exactly). Any
//     other exchange is ErrUnsupportedExchange.
//   - RabbitMQ /amq/queue/<name> is the queue <name> (/queue/<name>), which must exist
//     (AddressesExisting; the router refuses it otherwise).
//   - RabbitMQ /reply-queue/<name> is the temp-queue <name>: a responder that sends to the
//     reply-to it was given reaches the requester.
//   - ActiveMQ's and Artemis's queue://<name> and topic://<name> are /queue/<name> and
//     /topic/<name>.
//
// Egress always uses Titan's canonical form (/topic/..., /queue/...), as for aliases.
const (
	exchangePrefix  = "exchange/"
	amqQueuePrefix  = "amq/queue/"
	replyQueuePref  = "reply-queue/"
	queueURIPrefix  = "queue://"
	topicURIPrefix  = "topic://"
	exchangeTopic   = "amq.topic"
	exchangeDirect  = "amq.direct"
	maxExchangeEcho = 64
)

// AddressesExisting reports whether raw is a destination spelling that addresses an existing
// queue only, RabbitMQ's /amq/queue/<name> (with or without its leading '/'): RabbitMQ
// answers a SEND or SUBSCRIBE to one that does not exist with "NOT_FOUND - no queue", where
// /queue/<name> declares it. Pure and allocation-free.
func AddressesExisting(raw string) bool {
	if len(raw) > 0 && raw[0] == '/' {
		raw = raw[1:]
	}
	return strings.HasPrefix(raw, amqQueuePrefix)
}

// peerSpelling resolves a peer's spelling (see above) of raw, s being raw without its
// leading '/'. ok is false when raw is none of them; direct is set for amq.direct. rest is
// the channel part for the grammar's remaining steps (it must be non-empty).
func peerSpelling(raw, s string) (p Pattern, rest string, direct, ok bool, err error) {
	switch {
	case strings.HasPrefix(raw, queueURIPrefix):
		p, rest = PatternQueues, raw[len(queueURIPrefix):]
	case strings.HasPrefix(raw, topicURIPrefix):
		p, rest = PatternEvents, raw[len(topicURIPrefix):]
	case strings.HasPrefix(s, amqQueuePrefix):
		p, rest = PatternQueues, s[len(amqQueuePrefix):]
	case strings.HasPrefix(s, replyQueuePref):
		p, rest = PatternTempQueue, s[len(replyQueuePref):]
	case strings.HasPrefix(s, exchangePrefix):
		ex := s[len(exchangePrefix):]
		i := strings.IndexByte(ex, '/')
		if i < 0 {
			i = len(ex)
		}
		switch ex[:i] {
		case exchangeTopic:
		case exchangeDirect:
			direct = true
		default:
			return 0, "", false, false, &ExchangeError{Name: ex[:min(i, maxExchangeEcho)]}
		}
		p = PatternEvents
		if i < len(ex) {
			rest = ex[i+1:]
		}
	default:
		return 0, "", false, false, nil
	}
	if rest == "" {
		return 0, "", false, false, invalid("peer destination without a name")
	}
	return p, rest, direct, true, nil
}

// String returns the canonical egress form of d that a MESSAGE carries (DESIGN §2 "Egress
// destination"): "/" + the primary prefix + "/" + the channel with every '.' turned into '/'
// ("/topic/orders/eu", also for a destination parsed through an alias), and for a bare
// destination no prefix ("/orders/created"). It returns "" for a Destination whose Pattern is
// not Valid. The result can be longer than MaxBytes when raw used a shorter alias.
// Allocates the result once; see Append to avoid that.
func (d Destination) String() string {
	n := d.egressLen()
	if n == 0 {
		return ""
	}
	var b strings.Builder
	b.Grow(n)
	b.WriteByte('/')
	if !d.Bare {
		b.WriteString(d.Pattern.Prefix())
		b.WriteByte('/')
	}
	ch := d.Channel
	for {
		i := strings.IndexByte(ch, '.')
		if i < 0 {
			b.WriteString(ch)
			break
		}
		b.WriteString(ch[:i])
		b.WriteByte('/')
		ch = ch[i+1:]
	}
	return b.String()
}

// Append appends the egress form of d (see String) to b and returns the extended slice; it
// appends nothing for a Destination whose Pattern is not Valid. It does not allocate when b
// has room, so an encoder can write the destination straight into a frame buffer.
func (d Destination) Append(b []byte) []byte {
	if d.egressLen() == 0 {
		return b
	}
	b = append(b, '/')
	if !d.Bare {
		b = append(b, d.Pattern.Prefix()...)
		b = append(b, '/')
	}
	for i := 0; i < len(d.Channel); i++ {
		c := d.Channel[i]
		if c == '.' {
			c = '/'
		}
		b = append(b, c)
	}
	return b
}

// egressLen is the byte length of String's result, 0 when d is invalid.
func (d Destination) egressLen() int {
	if !d.Pattern.Valid() {
		return 0
	}
	n := 1 + len(d.Channel)
	if !d.Bare {
		n += len(d.Pattern.Prefix()) + 1
	}
	return n
}

// Match reports whether the channel filter (dot-separated tokens, possibly with wildcards, as
// in ParseFilter's Destination.Channel) matches the concrete channel (as in Parse's). A filter
// token "*" matches exactly one channel token in any position; a last filter token ">"
// matches one or more remaining tokens, so "orders.>" matches "orders.eu" and "orders.eu.x"
// but not "orders"; a filter token "#" matches zero or more tokens in any position
// (RabbitMQ's and Artemis's rule), so "orders.#" also matches "orders". Every other token
// must be equal byte for byte.
//
// Malformed input is handled consistently with the subscription index rather than rejected: a
// '>' that is not the filter's last token makes the filter match nothing, and empty tokens
// compare literally. Pure, allocation-free, safe for concurrent use; time O(len(filter) ×
// len(channel)) at worst (the greedy glob algorithm: only the last '#' is ever backtracked).
func Match(filter, channel string) bool {
	// Token offsets: a position past the end (len+1) means no token is left, so a trailing
	// empty token ("a.") is still a token.
	f, c := 0, 0
	starF, starC := -1, -1 // filter position after the last '#', channel position it resumed at
	for c <= len(channel) {
		if f <= len(filter) {
			fe := tokenEnd(filter, f)
			switch ft := filter[f:fe]; ft {
			case "#":
				starF, starC = fe+1, c // '#' first takes no token
				f = fe + 1
				continue
			case ">":
				// One or more channel tokens are left; a '>' that is not last matches nothing.
				return fe == len(filter)
			case "*":
				f, c = fe+1, tokenEnd(channel, c)+1
				continue
			default:
				if ce := tokenEnd(channel, c); channel[c:ce] == ft {
					f, c = fe+1, ce+1
					continue
				}
			}
		}
		if starF < 0 {
			return false
		}
		// Mismatch after a '#': let it take one more token and retry from there.
		starC = tokenEnd(channel, starC) + 1
		f, c = starF, starC
	}
	// The channel is used up: what is left of the filter must be '#'s (each taking nothing).
	for f <= len(filter) {
		fe := tokenEnd(filter, f)
		if filter[f:fe] != "#" {
			return false
		}
		f = fe + 1
	}
	return true
}

// tokenEnd returns the offset of the '.' ending the token that starts at i in s, or len(s).
func tokenEnd(s string, i int) int {
	if j := strings.IndexByte(s[i:], '.'); j >= 0 {
		return i + j
	}
	return len(s)
}

// ValidGroup reports whether name is a valid group name, ^[a-zA-Z0-9_-]{1,64}$ (DESIGN §3).
// The empty string is not valid: callers map an absent or empty group header to DefaultGroup
// before asking. Allocation-free, without regexp.
func ValidGroup(name string) bool {
	if len(name) == 0 || len(name) > maxGroupBytes {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}
