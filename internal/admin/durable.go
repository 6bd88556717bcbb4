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

// ParamName is the query parameter naming a durable subscription (its durable-name).
const ParamName = "name"

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

// DurableSubscription is one events-store durable subscription (GET
// /titan/monitor/durable-subscriptions, and the offline entries of GET /titan/monitor/logs).
type DurableSubscription struct {
	// Node is the broker node holding it.
	Node string `json:"node"`
	// Group is the log's destination group.
	Group string `json:"group"`
	// Destination is the log's canonical destination ("/events-store/orders").
	Destination string `json:"destination"`
	// Name is the durable-name.
	Name string `json:"name"`
	// Position is the last acknowledged sequence saved; the subscription resumes after it.
	Position uint64 `json:"position"`
	// Live counts the SUBSCRIBEs reading it now; 0 means offline.
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
	Deleted     bool   `json:"deleted"`
}

// logIdentity resolves ref to an events-store log (the destination is read with the
// events-store pattern, so "orders" and "/events-store/orders" name the same log).
func logIdentity(ref QueueRef) (dest.Identity, error) {
	if ref.Destination == "" {
		return dest.Identity{}, invalidParam("destination is required")
	}
	d, err := dest.Parse(ref.Destination, dest.PatternEventsStore)
	if err != nil || d.Pattern != dest.PatternEventsStore {
		return dest.Identity{}, newError(CodeUnsupportedPattern, "durable subscriptions belong to events-store destinations (/events-store/...)", ErrUnsupportedPattern)
	}
	g := ref.Group
	if g == "" {
		g = dest.DefaultGroup
	} else if !dest.ValidGroup(g) {
		return dest.Identity{}, newError(CodeInvalidGroup, "invalid group: names match ^[a-zA-Z0-9_-]{1,64}$", ErrInvalidGroup)
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
		id, err := logIdentity(QueueRef{Destination: ref.Destination, Group: dest.DefaultGroup})
		if err != nil {
			return nil, err
		}
		want = canonicalLog(id)
	}
	if ref.Group != "" && !dest.ValidGroup(ref.Group) {
		return nil, newError(CodeInvalidGroup, "invalid group: names match ^[a-zA-Z0-9_-]{1,64}$", ErrInvalidGroup)
	}
	do, ok := a.src.(DurableOperator)
	if !ok {
		return out, nil
	}
	all, err := do.DurableSubscriptions()
	if err != nil {
		return nil, asError(err)
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
	res, err := a.DeleteDurableSubscription(ref(r), r.URL.Query().Get(ParamName))
	a.respond(w, r, http.StatusOK, res, err)
}
