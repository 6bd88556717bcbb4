package auth

import (
	"errors"
	"log/slog"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/titan-broker/titan/internal/dest"
	"github.com/titan-broker/titan/internal/frame"
	"github.com/titan-broker/titan/internal/router"
)

// Principaled is implemented by router clients that carry an authenticated user (the
// session stamps it at CONNECT; router.Publish's in-process client carries the monitor
// user a POST /publish was made as).
type Principaled interface {
	Principal() string
}

// Trusted is implemented by router clients that may publish without a user: in-process
// code (the embed API) and the monitor API's bearer token, which grants everything.
type Trusted interface {
	Trusted() bool
}

// Stage is the authorization router stage (router.Options.Authorize): it runs on every SEND
// and SUBSCRIBE after the group stage and refuses, with "ERROR message:access refused" and
// the connection closed (STOMP 1.2 requires the close after an ERROR), any frame its user may
// not do. Because it runs before the message is built, buffered in a transaction, stored or
// published, nothing is stored for a refused SEND. The checks:
//
//   - SEND to events, events-store, queues, commands and queries: send on the identity; a
//     SEND to a queue or an events-store log that does not exist yet also needs create.
//   - SEND to a temp-queue: free on the sender's own temp-queue; a reply to another
//     connection's needs send on (group, temp-queue, channel).
//   - SUBSCRIBE: consume on the identity (a responder's SUBSCRIBE to commands or queries
//     included); a SUBSCRIBE to a queue that does not exist yet also needs create. A
//     temp-queue SUBSCRIBE is left to the router (only its owning connection may).
//   - UNSUBSCRIBE (its route runs the stage too): one that would delete another user's
//     durable topic subscription is refused (with WithOwners).
//   - A wildcard SUBSCRIBE (events) needs consume somewhere. Every events subscription's
//     deliveries are then filtered by the user's consume permission on the message's
//     concrete channel, so a reload that withdraws it stops deliveries too. Queues and
//     events-store subscriptions keep receiving until they are re-made.
//
// Decisions come from Authority.Allowed (cached), so a permission withdrawn by a reload
// applies to the next frame — and the next delivery — of existing connections. Safe for
// concurrent use.
type Stage struct {
	a      *Authority
	exists func(dest.Identity) bool
	owners *Owners // nil: no ownership, no durable-subscriptions or destinations quota
	log    *slog.Logger

	// Refused counts refused SEND and SUBSCRIBE frames.
	Refused atomic.Uint64
	// DurableQuotaRefused and DestinationQuotaRefused count frames refused by the
	// durable-subscriptions and destinations quotas.
	DurableQuotaRefused, DestinationQuotaRefused atomic.Uint64
}

// WithOwners makes s keep who made which durable subscription and destination in o, and
// enforce with it (issue #29): a durable subscription of another user is refused ("access
// refused"), making one needs create on its destination, and the durable-subscriptions and
// destinations quotas (Authority.Limit) bound what a user makes ("quota exceeded"). It
// returns s; call it before s is used.
func (s *Stage) WithOwners(o *Owners) *Stage {
	s.owners = o
	return s
}

// creates reports whether a frame of command cmd to a destination of pattern pt that does
// not exist yet creates it: a SEND or SUBSCRIBE makes a queue, a SEND makes an events-store
// log. Events, commands and queries keep nothing.
func creates(cmd frame.Command, pt dest.Pattern) bool {
	return pt == dest.PatternQueues || (pt == dest.PatternEventsStore && cmd == frame.CmdSend)
}

// NewStage returns the authorization stage over a. exists reports whether a queue or log exists
// already (nil: never ask, so create is never required).
func NewStage(a *Authority, exists func(dest.Identity) bool, log *slog.Logger) *Stage {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Stage{a: a, exists: exists, log: log}
}

// Apply implements router.Stage.
func (s *Stage) Apply(c *router.Context) {
	if c.Err != nil {
		return
	}
	if t, ok := c.Conn.Client.(Trusted); ok && t.Trusted() {
		return
	}
	user := ""
	if p, ok := c.Conn.Client.(Principaled); ok {
		user = p.Principal()
	}
	id := c.Identity
	switch c.Frame.Command {
	case frame.CmdSend:
		if id.Pattern == dest.PatternTempQueue {
			if owner, _, _ := strings.Cut(id.Channel, "."); owner == c.Conn.Client.ID() {
				return
			}
		}
		s.require(c, user, id, Send)
	case frame.CmdUnsubscribe:
		s.unsubscribe(c, user)
	case frame.CmdSubscribe:
		if id.Pattern == dest.PatternTempQueue {
			return
		}
		if c.Dest.Wildcard {
			if !s.a.Has(user, Consume) {
				s.refuse(c, user, id, Consume)
				return
			}
		} else if !s.require(c, user, id, Consume) {
			return
		}
		if !s.durable(c, user, id) {
			return
		}
		if id.Pattern == dest.PatternEvents && !s.a.Open() {
			// Every events delivery is checked (a cached decision): a wildcard subscription
			// receives only permitted channels, and a reload that withdraws consume stops
			// deliveries to subscriptions that already exist.
			a, group := s.a, strings.Clone(id.Group)
			c.SetAllow(func(channel string) bool { return a.Allowed(user, group, dest.PatternEvents, channel)&Consume != 0 })
		}
	}
}

// require refuses c unless user has need on id, plus create for a queue that does not exist;
// it reports whether c may proceed.
func (s *Stage) require(c *router.Context, user string, id dest.Identity, need Permission) bool {
	p := s.a.Allowed(user, id.Group, id.Pattern, id.Channel)
	if p&need == 0 {
		s.refuse(c, user, id, need)
		return false
	}
	if !creates(c.Frame.Command, id.Pattern) || s.exists == nil {
		return true
	}
	// The destinations quota is the only reason to look when the user may create: without
	// one, a SEND by such a user costs no lookup (destinations made meanwhile are not counted
	// by a quota configured later).
	if p&Create != 0 && (s.owners == nil || s.a.Limit(user, QuotaDestinations) == 0) {
		return true
	}
	if !s.exists(id) {
		if p&Create == 0 {
			s.refuse(c, user, id, Create)
			return false
		}
		return s.claim(c, Owned{Kind: KindDestination, Identity: id, User: user}, id, true)
	}
	return true
}

// durable checks a SUBSCRIBE that asks for a durable subscription (an events-store
// durable-name; a durable topic subscription in a peer's dialect, router.DurableTopicName)
// against its owner, the create permission and the durable-subscriptions quota; it reports
// whether c may proceed.
func (s *Stage) durable(c *router.Context, user string, id dest.Identity) bool {
	if s.owners == nil {
		return true
	}
	var o Owned
	switch id.Pattern {
	case dest.PatternEventsStore:
		name := c.Frame.Value("durable-name")
		if name == "" || !dest.ValidGroup(name) {
			return true // none, or refused by the router
		}
		o = Owned{Kind: KindLogDurable, Identity: id, Name: name, User: user}
	case dest.PatternEvents:
		owner, name, asked := router.DurableTopicName(c.Frame, c.Conn.ClientID)
		if !asked || c.Dest.Wildcard {
			return true // none, or refused by the router's durable stage
		}
		o = Owned{Kind: KindTopicDurable, Identity: dest.Identity{Group: id.Group, Pattern: dest.PatternEvents}, Owner: owner, Name: name, User: user}
	default:
		return true
	}
	may := s.a.Allowed(user, id.Group, id.Pattern, id.Channel)&Create != 0
	return s.claim(c, o, id, may)
}

// unsubscribe refuses an UNSUBSCRIBE that would delete another user's durable topic
// subscription (RabbitMQ durable:true, ActiveMQ activemq.subscriptionName, Artemis
// durable-subscription-name, each in its own group).
func (s *Stage) unsubscribe(c *router.Context, user string) {
	if s.owners == nil {
		return
	}
	owner, name, asked := router.DurableTopicName(c.Frame, c.Conn.ClientID)
	if !asked {
		return
	}
	group, ok := router.FrameGroup(c.Frame)
	if !ok {
		return // deletes nothing: the router refuses the group
	}
	o := Owned{Kind: KindTopicDurable, Identity: dest.Identity{Group: group, Pattern: dest.PatternEvents}, Owner: owner, Name: name, User: user}
	err := s.owners.Check(o)
	switch {
	case err == nil:
	case errors.Is(err, ErrOwnedByOther):
		s.Refused.Add(1)
		s.log.Info("access refused", "user", user, "command", "UNSUBSCRIBE", "durable", name, "reason", "owned by another user")
		c.Err = &frame.ProtocolError{Reason: "access refused", ReceiptID: c.Receipt, Fatal: true,
			Detail: "the durable subscription " + frame.Echo(name) + " belongs to another user; it is not deleted"}
	default:
		s.log.Error("owners ledger", "err", err)
		c.Err = &frame.ProtocolError{Reason: "store failed", ReceiptID: c.Receipt, Fatal: true,
			Detail: "the broker could not read who made the durable subscription; it is not deleted"}
	}
}

// claim records o as user's through the ledger and refuses c when it may not be made or
// used; it reports whether c may proceed.
func (s *Stage) claim(c *router.Context, o Owned, id dest.Identity, canCreate bool) bool {
	if s.owners == nil {
		return true
	}
	quota := QuotaDestinations
	if o.Kind != KindDestination {
		quota = QuotaDurableSubscriptions
	}
	limit := s.a.Limit(o.User, quota)
	_, err := s.owners.Claim(o, canCreate, limit)
	switch {
	case err == nil:
		return true
	case errors.Is(err, ErrOwnedByOther):
		s.Refused.Add(1)
		s.log.Info("access refused", "user", o.User, "destination", id.Destination(), "durable", o.Name, "reason", "owned by another user")
		c.Err = &frame.ProtocolError{Reason: "access refused", ReceiptID: c.Receipt, Fatal: true,
			Detail: "the durable subscription " + frame.Echo(o.Name) + " belongs to another user"}
	case errors.Is(err, ErrCreateRefused):
		s.Refused.Add(1)
		s.log.Info("access refused", "user", o.User, "destination", id.Destination(), "durable", o.Name, "missing", "create")
		c.Err = &frame.ProtocolError{Reason: "access refused", ReceiptID: c.Receipt, Fatal: true,
			Detail: "user " + o.User + " may not create a durable subscription " + frame.Echo(o.Name) + " on " + id.Destination() + " (it needs create)"}
	case errors.Is(err, ErrQuotaExceeded):
		if quota == QuotaDestinations {
			s.DestinationQuotaRefused.Add(1)
		} else {
			s.DurableQuotaRefused.Add(1)
		}
		s.log.Info("quota exceeded", "user", o.User, "quota", quota, "limit", limit, "destination", id.Destination())
		what := "destinations it created"
		if quota != QuotaDestinations {
			what = "durable subscriptions"
		}
		c.Err = &frame.ProtocolError{Reason: "quota exceeded", ReceiptID: c.Receipt, Fatal: true,
			Detail: "user " + o.User + " holds its maximum of " + strconv.Itoa(limit) + " " + what + " (quota " + quota + " in the users file)"}
	default:
		s.log.Error("owners ledger", "err", err)
		c.Err = &frame.ProtocolError{Reason: "store failed", ReceiptID: c.Receipt, Fatal: true,
			Detail: "the broker could not record who made the " + o.Kind + "; nothing was made"}
	}
	return false
}

func (s *Stage) refuse(c *router.Context, user string, id dest.Identity, missing Permission) {
	s.Refused.Add(1)
	s.log.Info("access refused", "user", user, "command", c.Frame.Command.String(),
		"group", id.Group, "destination", id.Destination(), "missing", missing.String())
	c.Err = &frame.ProtocolError{Reason: "access refused", ReceiptID: c.Receipt, Fatal: true,
		Detail: "user " + user + " may not " + verb(missing) + " " + id.Destination()}
}

func verb(p Permission) string {
	switch p {
	case Send:
		return "send to"
	case Consume:
		return "consume from"
	case Create:
		return "create"
	}
	return p.String()
}
