package router

import (
	"strconv"
	"strings"

	"github.com/titan-broker/titan/internal/dest"
	"github.com/titan-broker/titan/internal/frame"
)

// This file is the one place that knows the peers' control headers (issue 26): the headers
// RabbitMQ, ActiveMQ 5 and Artemis give a meaning on SEND and SUBSCRIBE. Each is honoured
// or refused with an ERROR that names it — never silently ignored (the brief's rule: a
// broker that ignores a control header its client relies on is worse than one that refuses
// it). controlStage runs the table on every SEND and SUBSCRIBE route, for every way in
// (STOMP over TCP and WebSocket, Router.Publish), before anything is built or stored.
// Ordinary application headers are not in the table and pass through untouched.

// Control header names.
const (
	hdrPrefetchSize       = "activemq.prefetchSize"     // ActiveMQ: → prefetch
	hdrSubscriptionName   = "activemq.subscriptionName" // ActiveMQ durable subscription
	hdrDurableSubName     = "durable-subscription-name" // Artemis durable subscription
	hdrDurableSubrName    = "durable-subscriber-name"   // Artemis, older spelling
	hdrDurable            = "durable"                   // RabbitMQ durable subscription
	hdrAutoDelete         = "auto-delete"               // RabbitMQ
	hdrMessageTTL         = "x-message-ttl"             // RabbitMQ queue argument
	hdrExpiration         = "expiration"                // RabbitMQ per-message TTL (ms)
	hdrMaxPriority        = "x-max-priority"            // RabbitMQ queue argument
	hdrClientID           = "client-id"                 // CONNECT: ActiveMQ and Artemis
	activeMQHeaderPrefix  = "activemq."                 // every other activemq.* SUBSCRIBE header is refused
	peerDurableDialectRMQ = "RabbitMQ"
)

// controlUse says where a control header may appear.
type controlUse uint8

const (
	onSubscribe controlUse = 1 << iota
	onSend
)

// ControlHeader is one row of the control-header table: a peer's header, the frames it
// applies to, what Titan does with it (Honoured, for the README's migration guide), and
// its check. Exported through ControlHeaders for documentation tests.
type ControlHeader struct {
	// Name is the header name, exactly as the peer spells it.
	Name string
	// Peer is the broker that defines it ("RabbitMQ", "ActiveMQ", "Artemis", or several).
	Peer string
	// Honoured says what Titan does; "" means it is refused (when its value asks for
	// something other than the default, see check).
	Honoured string
	use      controlUse
	// check returns "" when the value is accepted, else the ERROR body; refuse reports
	// whether that is a refusal of the header ("unsupported header <name>") rather than an
	// invalid value ("invalid <name>").
	check func(c *Context, v string) (detail string, refuse bool)
}

// boolDefault accepts a header whose value is the peer's default, def ("true"/"false"), and
// refuses the other one: asking for the feature Titan lacks is an ERROR.
func boolDefault(def, what string) func(*Context, string) (string, bool) {
	return func(_ *Context, v string) (string, bool) {
		switch strings.ToLower(v) {
		case def:
			return "", false
		case "true", "false":
			return what, true
		}
		return "the value is true or false", false
	}
}

// refused refuses the header whatever its value.
func refused(what string) func(*Context, string) (string, bool) {
	return func(*Context, string) (string, bool) { return what, true }
}

// positiveInt accepts a positive decimal integer up to max.
func positiveInt(max int64, what string) func(*Context, string) (string, bool) {
	return func(_ *Context, v string) (string, bool) {
		if n, err := strconv.ParseInt(v, 10, 64); err != nil || n <= 0 || n > max {
			return what, false
		}
		return "", false
	}
}

// controlHeaders is the table (see ControlHeaders).
var controlHeaders = []ControlHeader{
	{Name: hdrPrefetchSize, Peer: "ActiveMQ", Honoured: "the subscription's prefetch (as prefetch-count; prefetch-count wins when both are set)", use: onSubscribe,
		check: positiveInt(1<<31-1, "activemq.prefetchSize is a positive number of messages")},
	{Name: hdrSubscriptionName, Peer: "ActiveMQ", Honoured: "a durable topic subscription named (client-id, name); UNSUBSCRIBE naming it deletes it", use: onSubscribe, check: durableOnTopic},
	{Name: hdrDurableSubName, Peer: "Artemis", Honoured: "a durable topic subscription named (client-id, name); UNSUBSCRIBE naming it deletes it", use: onSubscribe, check: durableOnTopic},
	{Name: hdrDurableSubrName, Peer: "Artemis", Honoured: "as durable-subscription-name", use: onSubscribe, check: durableOnTopic},
	{Name: hdrDurable, Peer: "RabbitMQ", Honoured: "durable:true on a topic with an id: a durable subscription named by the id; on a queue: the default (queues are durable)", use: onSubscribe | onSend, check: durableFlag},
	{Name: frame.HdrPersistent, Peer: "RabbitMQ", Honoured: "SUBSCRIBE: as durable; SEND: persistent:false is not stored (queues, durable subscriptions)", use: onSubscribe | onSend, check: persistentFlag},
	{Name: hdrAutoDelete, Peer: "RabbitMQ", Honoured: "auto-delete:false with a durable subscription, auto-delete:true on an ordinary topic subscription (both the behaviour Titan has); the opposite is refused", use: onSubscribe | onSend, check: autoDelete},
	{Name: "activemq.exclusive", Peer: "ActiveMQ", use: onSubscribe, check: boolDefault("false", "exclusive consumers are not supported; every consumer of a queue takes its share")},
	{Name: "exclusive", Peer: "RabbitMQ, Artemis", use: onSubscribe | onSend, check: boolDefault("false", "exclusive queues and consumers are not supported; every consumer of a queue takes its share")},
	{Name: "activemq.retroactive", Peer: "ActiveMQ", use: onSubscribe, check: boolDefault("false", "retroactive consumers are not supported: use an /events-store/ destination and start-position to replay")},
	{Name: "activemq.noLocal", Peer: "ActiveMQ", use: onSubscribe, check: boolDefault("false", "no-local subscriptions are not supported: a subscription receives its own connection's messages")},
	{Name: "no-local", Peer: "Artemis", use: onSubscribe, check: boolDefault("false", "no-local subscriptions are not supported: a subscription receives its own connection's messages")},
	{Name: "activemq.dispatchAsync", Peer: "ActiveMQ", Honoured: "accepted: Titan always dispatches asynchronously", use: onSubscribe,
		check: func(_ *Context, v string) (string, bool) {
			if v != "true" && v != "false" {
				return "the value is true or false", false
			}
			return "", false
		}},
	{Name: "x-queue-name", Peer: "RabbitMQ", use: onSubscribe | onSend, check: refused("naming the queue behind a subscription is not supported; a durable subscription's queue is /queue/$durable/...")},
	{Name: hdrMaxPriority, Peer: "RabbitMQ", Honoured: "accepted: every queue delivers by priority 0-9 (higher first)", use: onSubscribe | onSend,
		check: func(_ *Context, v string) (string, bool) {
			if n, err := strconv.Atoi(v); err != nil || n < 0 || n > 255 {
				return "x-max-priority is a number from 0 to 255", false
			}
			return "", false
		}},
	{Name: hdrMessageTTL, Peer: "RabbitMQ", Honoured: "SEND: the message expires that many ms after it is accepted (as expires); SUBSCRIBE (a queue-wide TTL): refused", use: onSubscribe | onSend,
		check: func(c *Context, v string) (string, bool) {
			if c.Frame.Command == frame.CmdSubscribe {
				return "a queue-wide message TTL is not supported; set x-message-ttl or expires on SEND", true
			}
			return positiveInt(maxDelayMs, "x-message-ttl is a positive number of milliseconds")(c, v)
		}},
	{Name: hdrExpiration, Peer: "RabbitMQ", Honoured: "SEND: the message expires that many ms after it is accepted (as expires)", use: onSend,
		check: positiveInt(maxDelayMs, "expiration is a positive number of milliseconds")},
	{Name: "x-expires", Peer: "RabbitMQ", use: onSubscribe | onSend, check: refused("queue expiry is not supported; idle traffic-made queues are reclaimed after limits.destination-idle-timeout")},
	{Name: "x-dead-letter-exchange", Peer: "RabbitMQ", use: onSubscribe | onSend, check: refused("dead-letter exchanges are not supported; a queue dead-letters to /queue/DLQ/<name> (address setting dead-letter)")},
	{Name: "x-dead-letter-routing-key", Peer: "RabbitMQ", use: onSubscribe | onSend, check: refused("dead-letter routing is not supported; a queue dead-letters to /queue/DLQ/<name> (address setting dead-letter)")},
	{Name: "x-max-length", Peer: "RabbitMQ", use: onSubscribe | onSend, check: refused("per-queue length arguments are not supported; use the address settings (default-ring-size, max-pending-bytes)")},
	{Name: "x-max-length-bytes", Peer: "RabbitMQ", use: onSubscribe | onSend, check: refused("per-queue length arguments are not supported; use the address settings (max-pending-bytes)")},
	{Name: "x-overflow", Peer: "RabbitMQ", use: onSubscribe | onSend, check: refused("per-queue overflow arguments are not supported; use the address setting address-full-policy")},
	{Name: "x-queue-type", Peer: "RabbitMQ", use: onSubscribe | onSend, check: refused("queue types are not supported; /queue/ is a durable queue, /events-store/ a log")},
	{Name: "x-single-active-consumer", Peer: "RabbitMQ", use: onSubscribe | onSend, check: refused("single active consumer is not supported; every consumer of a queue takes its share")},
	{Name: "x-queue-mode", Peer: "RabbitMQ", use: onSubscribe | onSend, check: refused("queue modes are not supported")},
	{Name: "x-stream-offset", Peer: "RabbitMQ", use: onSubscribe, check: refused("streams are not supported: use an /events-store/ destination and start-position")},
}

// controlIndex maps a header name to its row.
var controlIndex = func() map[string]*ControlHeader {
	m := make(map[string]*ControlHeader, len(controlHeaders))
	for i := range controlHeaders {
		m[controlHeaders[i].Name] = &controlHeaders[i]
	}
	return m
}()

// controlShapes is the cheap first test of controlStage: bit n of controlShapes[b] is set
// when a row's name starts with byte b and is n bytes long (every name is shorter than 64).
// An application header fails it with one array load and no string compare, so a frame
// without control headers costs a few loads per header, not a map lookup each.
var controlShapes = func() (t [256]uint64) {
	for _, h := range controlHeaders {
		if len(h.Name) == 0 || len(h.Name) >= 64 {
			panic("router: control header name length out of range: " + h.Name)
		}
		t[h.Name[0]] |= 1 << len(h.Name)
	}
	return t
}()

// ControlHeaders returns the control-header table (a copy), for documentation and tests.
func ControlHeaders() []ControlHeader { return append([]ControlHeader(nil), controlHeaders...) }

// controlStage checks a SEND's or SUBSCRIBE's headers against the table. A refused header
// is the ERROR "unsupported header <name>"; a value a peer would not accept is "invalid
// <name>". On SUBSCRIBE every other activemq.* header is refused by name as well.
type controlStage struct{}

func (controlStage) Apply(c *Context) {
	f := c.Frame
	use := onSend
	if f.Command == frame.CmdSubscribe {
		use = onSubscribe
	}
	for i, h := range f.Headers {
		k := h.Key
		var row *ControlHeader
		if k != "" && len(k) < 64 && controlShapes[k[0]]&(1<<len(k)) != 0 {
			row = controlIndex[k]
		}
		if row == nil {
			if use == onSubscribe && strings.HasPrefix(k, activeMQHeaderPrefix) && !repeated(f.Headers[:i], k) {
				c.fail("unsupported header "+plainName(k), "Titan does not implement this ActiveMQ subscription header; see the migration guide in the README")
				return
			}
			continue
		}
		if row.use&use == 0 || repeated(f.Headers[:i], k) {
			continue // not a control header on this frame (an application header), or a repeat
		}
		if detail, refuse := row.check(c, h.Value); detail != "" {
			if refuse {
				c.fail("unsupported header "+row.Name, detail)
			} else {
				c.fail("invalid "+row.Name, detail)
			}
			return
		}
	}
}

// repeated reports whether k occurs in hs (first occurrence wins, STOMP 1.2).
func repeated(hs []frame.Header, k string) bool {
	for _, h := range hs {
		if h.Key == k {
			return true
		}
	}
	return false
}

// isTrue reports a true boolean header value (any case).
func isTrue(v string) bool { return strings.EqualFold(v, "true") }

// durableOnTopic accepts a durable subscription name on an events destination only.
func durableOnTopic(c *Context, v string) (string, bool) {
	if c.Dest.Pattern != dest.PatternEvents {
		return "durable subscriptions are for topics (/topic/...); a queue keeps its messages anyway", true
	}
	if v == "" {
		return "the durable subscription name is empty", false
	}
	return "", false
}

// durableFlag checks RabbitMQ's durable header: SUBSCRIBE durable:true makes a durable topic
// subscription (the durable stage); on a queue, durable:true is what Titan's queues are and
// durable:false (a transient queue) is refused.
func durableFlag(c *Context, v string) (string, bool) {
	if !isTrue(v) && !strings.EqualFold(v, "false") {
		return "the value is true or false", false
	}
	if c.Dest.Pattern == dest.PatternQueues && !isTrue(v) {
		return "transient queues are not supported: every /queue/ destination is durable", true
	}
	return "", false
}

// persistentFlag checks persistent: a boolean on SEND (false skips the store) and on
// SUBSCRIBE (RabbitMQ's legacy spelling of durable).
func persistentFlag(c *Context, v string) (string, bool) {
	if !isTrue(v) && !strings.EqualFold(v, "false") {
		return "the value is true or false", false
	}
	if c.Frame.Command == frame.CmdSubscribe {
		return durableFlag(c, v)
	}
	return "", false
}

// autoDelete accepts RabbitMQ's auto-delete when it asks for what Titan does: a durable
// subscription is kept (auto-delete:false), an ordinary topic subscription ends with its
// connection (auto-delete:true), a queue is kept (auto-delete:false).
func autoDelete(c *Context, v string) (string, bool) {
	if !isTrue(v) && !strings.EqualFold(v, "false") {
		return "the value is true or false", false
	}
	keeps := c.Dest.Pattern != dest.PatternEvents || (c.Frame.Command == frame.CmdSubscribe && durableAsked(c.Frame))
	switch {
	case keeps && isTrue(v):
		return "auto-delete:true is not supported here: queues and durable subscriptions are kept until deleted", true
	case !keeps && !isTrue(v) && c.Frame.Command == frame.CmdSubscribe:
		return "auto-delete:false on a topic needs durable:true and an id (a durable subscription)", true
	}
	return "", false
}

// durableAsked reports whether a SUBSCRIBE asks for a durable topic subscription in any
// dialect (see durableRequest).
func durableAsked(f *frame.Frame) bool {
	return isTrue(f.Value(hdrDurable)) || isTrue(f.Value(frame.HdrPersistent)) ||
		f.Value(hdrSubscriptionName) != "" || f.Value(hdrDurableSubName) != "" || f.Value(hdrDurableSubrName) != ""
}

// durableRequest is what a SUBSCRIBE or UNSUBSCRIBE asks of a durable topic subscription,
// in the dialect it used.
type durableRequest struct {
	dialect string // "RabbitMQ", "ActiveMQ" or "Artemis"
	header  string // the header that asked
	owner   string // the CONNECT client-id; "" for RabbitMQ
	name    string // the subscription name (RabbitMQ: the id header)
}

// parseDurable reads a durable request from f (SUBSCRIBE or UNSUBSCRIBE) on a connection
// with CONNECT client-id clientID. asked is false when f names none. A request that lacks
// what its dialect needs (RabbitMQ: an id; ActiveMQ and Artemis: a client-id) is an error
// recorded on c.
func parseDurable(c *Context, f *frame.Frame, clientID string) (r durableRequest, asked bool) {
	for _, h := range []string{hdrSubscriptionName, hdrDurableSubName, hdrDurableSubrName} {
		name := f.Value(h)
		if name == "" {
			continue
		}
		r = durableRequest{dialect: "Artemis", header: h, owner: clientID, name: name}
		if h == hdrSubscriptionName {
			r.dialect = "ActiveMQ"
		}
		if clientID == "" {
			c.fail("missing client-id", h+" names a durable subscription of a client: CONNECT with a client-id header ("+r.dialect+" requires it too)")
			return r, true
		}
		return r, true
	}
	for _, h := range []string{hdrDurable, frame.HdrPersistent} {
		if !isTrue(f.Value(h)) {
			continue
		}
		id, _ := f.Get(frame.HdrID)
		r = durableRequest{dialect: peerDurableDialectRMQ, header: h, name: id}
		if id == "" {
			c.fail("missing id header", h+":true names a durable subscription by its id header: add id (RabbitMQ requires it too)")
		}
		return r, true
	}
	return r, false
}

// plainName returns a header name for an ERROR's message header: as is when it is short
// printable ASCII, else quoted and escaped by frame.Echo.
func plainName(k string) string {
	if len(k) > 64 {
		return frame.Echo(k)
	}
	for i := 0; i < len(k); i++ {
		if c := k[i]; c <= 0x20 || c >= 0x7f || c == ':' || c == '\\' {
			return frame.Echo(k)
		}
	}
	return k
}

// DurableTopicName returns the durable topic subscription a SUBSCRIBE f of a connection with
// CONNECT client-id clientID asks for, in its peer's way (RabbitMQ durable:true or
// persistent:true with the id, ActiveMQ activemq.subscriptionName, Artemis
// durable-subscription-name with the client-id): owner is the client-id ("" for
// RabbitMQ's), name the subscription name. asked is false for a SUBSCRIBE that asks for none,
// and for a malformed request (the durable stage refuses it). For stages that act on durable
// subscriptions before they are made (authorization, per-user quotas).
func DurableTopicName(f *frame.Frame, clientID string) (owner, name string, asked bool) {
	var c Context
	r, asked := parseDurable(&c, f, clientID)
	if !asked || c.Err != nil || r.name == "" {
		return "", "", false
	}
	return r.owner, r.name, true
}
