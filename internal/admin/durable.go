package admin

import (
	"errors"
	"net/http"
	"sort"
	"time"

	"github.com/titan-broker/titan/internal/dest"
	"github.com/titan-broker/titan/internal/dispatch"
)

// Error codes of the durable subscription endpoints.
const (
	// CodeDurableNotFound: no durable subscription has that name on that log (404).
	CodeDurableNotFound = "durable_subscription_not_found"
	// CodeDurableInUse: a live SUBSCRIBE reads the durable subscription; close it first (409).
	CodeDurableInUse = "durable_subscription_in_use"
)

// ParamName is the query parameter naming a durable subscription (its durable-name; for a
// durable topic subscription the name its dialect gives it: RabbitMQ's SUBSCRIBE id,
// ActiveMQ's activemq.subscriptionName, Artemis's durable-subscription-name).
const ParamName = "name"

// ParamClientID is the query parameter naming the CONNECT client-id that owns an ActiveMQ or
// Artemis durable topic subscription (absent for RabbitMQ's, named by the id alone).
const ParamClientID = "client-id"

// Kinds of durable subscription (DurableSubscription.Kind).
const (
	// KindEventsStore is an events-store durable-name: a saved position in a log.
	KindEventsStore = "events-store"
	// KindTopic is a durable topic subscription of the peers' dialects (issue 26): a queue
	// fed by a topic's fan-out.
	KindTopic = "topic"
)

// TopicDurableOperator is the part of the broker that lists and deletes durable topic
// subscriptions (RabbitMQ's, ActiveMQ's and Artemis's dialects), declared here by its
// consumer. A Source that does not implement it has none. Safe for concurrent use.
type TopicDurableOperator interface {
	// TopicDurableSubscriptions returns every durable topic subscription, live and
	// offline, in any order, with Kind KindTopic.
	TopicDurableSubscriptions() []DurableSubscription
	// DeleteTopicDurableSubscription deletes the subscription (group, clientID, name) whose
	// topic is filter, with its queue. Errors: dispatch.ErrNoDurableSubscription (none, or
	// on another topic), dispatch.ErrDurableSubscriptionInUse, the store's.
	DeleteTopicDurableSubscription(group, clientID, name string, filter dest.Destination) error
}

// DurableOperator is the part of the broker that lists and deletes events-store durable
// subscriptions, declared here by its consumer. A Source that does not implement it serves
// no durable subscriptions (an empty list; DELETE answers 404). Safe for concurrent use.
type DurableOperator interface {
	// DurableSubscriptions returns every durable subscription the store holds, live and
	// offline, in any order. Errors: the store's.
	DurableSubscriptions() ([]DurableSubscription, error)
	// DeleteDurableSubscription deletes the durable subscription name of log id. Errors:
	// dispatch.ErrNoDurableSubscription, dispatch.ErrDurableSubscriptionInUse, the store's.
	DeleteDurableSubscription(id dest.Identity, name string) error
}

// DurableSubscription is one durable subscription (GET /titan/monitor/durable-subscriptions,
// and the offline entries of GET /titan/monitor/logs): an events-store durable-name, or a
// durable topic subscription of the peers' dialects (Kind).
type DurableSubscription struct {
	// Node is the broker node holding it.
	Node string `json:"node"`
	// Kind is KindEventsStore or KindTopic.
	Kind string `json:"kind"`
	// Group is the log's destination group.
	Group string `json:"group"`
	// Destination is the log's canonical destination ("/events-store/orders"), or the topic
	// (filter) a durable topic subscription is fed by ("/topic/orders/>").
	Destination string `json:"destination"`
	// Name is the durable-name, or the durable topic subscription's name in its dialect.
	Name string `json:"name"`
	// ClientID is the CONNECT client-id owning an ActiveMQ or Artemis durable topic
	// subscription; absent for RabbitMQ's and for events-store ones.
	ClientID string `json:"clientId,omitempty"`
	// Queue is the queue holding a durable topic subscription's messages
	// ("/queue/$durable/<client-id>/<name>"); absent for events-store ones.
	Queue string `json:"queue,omitempty"`
	// Selector is a durable topic subscription's JMS selector, when it has one.
	Selector string `json:"selector,omitempty"`
	// Messages counts what a durable topic subscription's queue holds (ready, delivering,
	// scheduled); 0 for events-store ones.
	Messages int `json:"messages,omitempty"`
	// Position is the last acknowledged sequence saved; the subscription resumes after it
	// (events-store only).
	Position uint64 `json:"position"`
	// Live counts the SUBSCRIBEs reading it now (for a topic one, its queue's consumers);
	// 0 means offline.
	Live int `json:"live"`
	// LastActive is when its position was last saved (for an offline subscription: when it
	// went offline); absent when unknown.
	LastActive *time.Time `json:"lastActive,omitempty"`
}

// DurableSubscriptionList is the answer of GET /titan/monitor/durable-subscriptions.
type DurableSubscriptionList struct {
	Node string `json:"node"`
	// Subscriptions are sorted by group, destination and name. Never nil.
	Subscriptions []DurableSubscription `json:"subscriptions"`
}

// DeleteDurableResult is the answer of DELETE /titan/monitor/durable-subscriptions.
type DeleteDurableResult struct {
	Node        string `json:"node"`
	Group       string `json:"group"`
	Destination string `json:"destination"`
	Name        string `json:"name"`
	ClientID    string `json:"clientId,omitempty"`
	Deleted     bool   `json:"deleted"`
}

// durableIdentity resolves ref to what a durable subscription belongs to: an events-store
// log (as logIdentity; a bare destination is a log) or a topic (/topic/..., wildcards
// allowed, for durable topic subscriptions).
func durableIdentity(ref QueueRef) (dest.Identity, error) {
	id, _, err := durableTarget(ref)
	return id, err
}

// durableTarget is durableIdentity with, for a topic, the filter as dest.ParseFilter read it
// (the zero Destination for a log).
func durableTarget(ref QueueRef) (dest.Identity, dest.Destination, error) {
	if d, err := dest.ParseFilter(ref.Destination, dest.PatternEventsStore); err == nil && d.Pattern == dest.PatternEvents {
		g, err := refGroup(ref.Group)
		if err != nil {
			return dest.Identity{}, dest.Destination{}, err
		}
		return dest.IdentityOf(g, d), d, nil
	}
	id, err := logIdentity(ref)
	return id, dest.Destination{}, err
}

// refGroup returns the group a request names: g, or dest.DefaultGroup when it is empty.
// Errors: CodeInvalidGroup for a name outside ^[a-zA-Z0-9_-]{1,64}$.
func refGroup(g string) (string, error) {
	if g == "" {
		return dest.DefaultGroup, nil
	}
	if !dest.ValidGroup(g) {
		return "", newError(CodeInvalidGroup, "invalid group: names match ^[a-zA-Z0-9_-]{1,64}$", ErrInvalidGroup)
	}
	return g, nil
}

// logIdentity resolves ref to an events-store log (the destination is read with the
// events-store pattern, so "orders" and "/events-store/orders" name the same log).
func logIdentity(ref QueueRef) (dest.Identity, error) {
	if ref.Destination == "" {
		return dest.Identity{}, invalidParam("destination is required")
	}
	d, err := dest.Parse(ref.Destination, dest.PatternEventsStore)
	if err != nil || d.Pattern != dest.PatternEventsStore {
		return dest.Identity{}, newError(CodeUnsupportedPattern, "durable subscriptions belong to events-store destinations (/events-store/...) and topics (/topic/...)", ErrUnsupportedPattern)
	}
	g, err := refGroup(ref.Group)
	if err != nil {
		return dest.Identity{}, err
	}
	return dest.IdentityOf(g, d), nil
}

// canonicalLog is the prefixed destination of id's log ("/events-store/orders"), the form
// durable subscriptions are reported under: a bare destination routed to events-store
// ("/orders") names the same log and the same durable subscriptions.
func canonicalLog(id dest.Identity) string {
	return dest.Identity{Group: id.Group, Channel: id.Channel, Pattern: dest.PatternEventsStore}.Destination()
}

// DurableSubscriptions lists the durable subscriptions, filtered by ref's group and
// destination when set. Errors (*Error): invalid filters, the store's.
func (a *Admin) DurableSubscriptions(ref QueueRef) (*DurableSubscriptionList, error) {
	out := &DurableSubscriptionList{Node: a.node(), Subscriptions: []DurableSubscription{}}
	want := ""
	if ref.Destination != "" {
		id, err := durableIdentity(QueueRef{Destination: ref.Destination, Group: dest.DefaultGroup})
		if err != nil {
			return nil, err
		}
		want = id.Destination()
		if id.Pattern == dest.PatternEventsStore {
			want = canonicalLog(id)
		}
	}
	if _, err := refGroup(ref.Group); err != nil {
		return nil, err
	}
	var all []DurableSubscription
	if do, ok := a.src.(DurableOperator); ok {
		logs, err := do.DurableSubscriptions()
		if err != nil {
			return nil, asError(err)
		}
		for _, d := range logs {
			d.Kind = KindEventsStore
			all = append(all, d)
		}
	}
	if to, ok := a.src.(TopicDurableOperator); ok {
		all = append(all, to.TopicDurableSubscriptions()...)
	}
	for _, d := range all {
		if (ref.Group != "" && d.Group != ref.Group) || (want != "" && d.Destination != want) {
			continue
		}
		d.Node = a.node()
		out.Subscriptions = append(out.Subscriptions, d)
	}
	sort.Slice(out.Subscriptions, func(i, j int) bool {
		x, y := out.Subscriptions[i], out.Subscriptions[j]
		if x.Group != y.Group {
			return x.Group < y.Group
		}
		if x.Destination != y.Destination {
			return x.Destination < y.Destination
		}
		if x.ClientID != y.ClientID {
			return x.ClientID < y.ClientID
		}
		return x.Name < y.Name
	})
	return out, nil
}

// DeleteDurableSubscription deletes the durable subscription name of the log ref names: its
// position is forgotten and a later SUBSCRIBE with that name starts afresh. Errors
// (*Error): invalid input, CodeDurableNotFound, CodeDurableInUse (a live SUBSCRIBE reads it:
// close that connection first), the store's.
func (a *Admin) DeleteDurableSubscription(ref QueueRef, name string) (*DeleteDurableResult, error) {
	id, err := logIdentity(ref)
	if err != nil {
		return nil, err
	}
	if !dest.ValidGroup(name) {
		return nil, invalidParam("name is required: durable names match ^[a-zA-Z0-9_-]{1,64}$")
	}
	do, ok := a.src.(DurableOperator)
	if !ok {
		return nil, newError(CodeDurableNotFound, "no durable subscription "+name+" on "+describe(id), dispatch.ErrNoDurableSubscription)
	}
	switch err := do.DeleteDurableSubscription(id, name); {
	case err == nil:
	case errors.Is(err, dispatch.ErrNoDurableSubscription):
		return nil, newError(CodeDurableNotFound, "no durable subscription "+name+" on "+describe(id), err)
	case errors.Is(err, dispatch.ErrDurableSubscriptionInUse):
		return nil, newError(CodeDurableInUse, "durable subscription "+name+" on "+describe(id)+" is in use by a live subscription; close it first", err)
	default:
		return nil, asError(err)
	}
	a.log.Info("durable subscription deleted", "group", id.Group, "destination", canonicalLog(id), "name", name)
	return &DeleteDurableResult{Node: a.node(), Group: id.Group, Destination: canonicalLog(id), Name: name, Deleted: true}, nil
}

func (a *Admin) serveDurables(w http.ResponseWriter, r *http.Request) {
	l, err := a.DurableSubscriptions(ref(r))
	if err == nil {
		kept := l.Subscriptions[:0]
		for _, d := range l.Subscriptions {
			if a.visible(r, d.Group, d.Destination) {
				kept = append(kept, d)
			}
		}
		l.Subscriptions = kept
	}
	a.respond(w, r, http.StatusOK, l, err)
}

func (a *Admin) serveDeleteDurable(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	var res *DeleteDurableResult
	var err error
	if id, e := durableIdentity(ref(r)); e == nil && id.Pattern == dest.PatternEvents {
		res, err = a.DeleteTopicDurableSubscription(ref(r), q.Get(ParamClientID), q.Get(ParamName))
	} else {
		res, err = a.DeleteDurableSubscription(ref(r), q.Get(ParamName))
	}
	a.respond(w, r, http.StatusOK, res, err)
}

// DeleteTopicDurableSubscription deletes the durable topic subscription (ref's group,
// clientID, name) fed by the topic ref names, with its queue and what it holds, as the
// peer's UNSUBSCRIBE would. Errors (*Error): invalid input, CodeDurableNotFound,
// CodeDurableInUse (a connection consumes it: close it first), the store's.
func (a *Admin) DeleteTopicDurableSubscription(ref QueueRef, clientID, name string) (*DeleteDurableResult, error) {
	id, filter, err := durableTarget(ref)
	if err != nil {
		return nil, err
	}
	if id.Pattern != dest.PatternEvents {
		return nil, newError(CodeUnsupportedPattern, "durable topic subscriptions belong to topics (/topic/...)", ErrUnsupportedPattern)
	}
	if name == "" {
		return nil, invalidParam("name is required: the subscription's name (RabbitMQ: its SUBSCRIBE id)")
	}
	what := "durable subscription " + name
	if clientID != "" {
		what += " of client-id " + clientID
	}
	to, ok := a.src.(TopicDurableOperator)
	if !ok {
		return nil, newError(CodeDurableNotFound, "no "+what+" on "+describe(id), dispatch.ErrNoDurableSubscription)
	}
	switch err := to.DeleteTopicDurableSubscription(id.Group, clientID, name, filter); {
	case err == nil:
	case errors.Is(err, dispatch.ErrNoDurableSubscription):
		return nil, newError(CodeDurableNotFound, "no "+what+" on "+describe(id), err)
	case errors.Is(err, dispatch.ErrDurableSubscriptionInUse):
		return nil, newError(CodeDurableInUse, what+" on "+describe(id)+" is in use by a connection; close it first", err)
	default:
		return nil, asError(err)
	}
	a.log.Info("durable topic subscription deleted", "group", id.Group, "destination", id.Destination(), "client_id", clientID, "name", name)
	return &DeleteDurableResult{Node: a.node(), Group: id.Group, Destination: id.Destination(), Name: name, ClientID: clientID, Deleted: true}, nil
}
