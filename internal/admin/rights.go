package admin

import (
	"net/http"

	"github.com/titan-broker/titan/internal/dest"
)

// Operator rights (issue #29). With Options.Users set, a request made as a user (HTTP Basic)
// is checked as STOMP checks SEND and SUBSCRIBE: every route that reads a destination needs
// browse on it, every route that changes one needs manage on it, and listings keep only the
// destinations the user may browse. What names no destination (connections, the users file,
// cluster membership, /metrics) needs the broker-wide right: browse to read, manage to
// change, as granted by the catch-all rule (channel "#", any group and pattern; see
// Users.Operator). The bearer token, and a server without users, may do everything.

// checkOn returns a CodeForbidden error unless r's user holds browse (manage false) or manage
// on id.
func (a *Admin) checkOn(r *http.Request, manage bool, id dest.Identity) error {
	user := requestUser(r)
	if user == "" || a.opts.Users == nil || a.opts.Users.MayOn(user, manage, id) {
		return nil
	}
	return newError(CodeForbidden, "forbidden: user "+user+" lacks the "+rightName(manage)+" permission on "+describe(id), ErrForbidden)
}

// checkBroker returns a CodeForbidden error unless r's user holds the broker-wide browse
// (manage false) or manage right; what names the operation for the message.
func (a *Admin) checkBroker(r *http.Request, manage bool, what string) error {
	user := requestUser(r)
	if user == "" || a.opts.Users == nil || a.opts.Users.Operator(user, manage) {
		return nil
	}
	return newError(CodeForbidden, "forbidden: "+what+" needs the broker-wide "+rightName(manage)+
		" permission (a permissions rule with channel \"#\" granting "+rightName(manage)+" to a role of user "+user+")", ErrForbidden)
}

// brokerWide reports whether r's user holds the broker-wide right (no error).
func (a *Admin) brokerWide(r *http.Request, manage bool) bool {
	return a.checkBroker(r, manage, "") == nil
}

// visible reports whether r's user may browse the destination (a canonical destination or
// subscription filter, as the listings carry it) in group. A destination that does not parse
// is not shown to a user (it is to the token).
func (a *Admin) visible(r *http.Request, group, destination string) bool {
	user := requestUser(r)
	if user == "" || a.opts.Users == nil {
		return true
	}
	d, err := dest.ParseFilter(destination, a.defaultPattern())
	if err != nil {
		return false
	}
	return a.opts.Users.MayOn(user, false, dest.IdentityOf(group, d))
}

func rightName(manage bool) string {
	if manage {
		return "manage"
	}
	return "browse"
}

// onDestination wraps h, an action on the destination of the request's QueueRef: resolve
// names it (as the action does), and the user must hold browse (manage false) or manage on
// it. A ref that does not resolve is left to h, which answers with the same error as before.
func (a *Admin) onDestination(manage bool, resolve func(QueueRef) (dest.Identity, error), h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if requestUser(r) != "" && a.opts.Users != nil {
			if id, err := resolve(ref(r)); err == nil {
				if err := a.checkOn(r, manage, id); err != nil {
					a.respond(w, r, 0, nil, err)
					return
				}
			}
		}
		h(w, r)
	}
}

// broker wraps h, an operation that names no destination, with the broker-wide right.
func (a *Admin) broker(manage bool, what string, h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if err := a.checkBroker(r, manage, what); err != nil {
			a.respond(w, r, 0, nil, err)
			return
		}
		h(w, r)
	}
}

// dlqOf resolves ref as Redrive does: the dead-letter queue it drains.
func (a *Admin) dlqOf(ref QueueRef) (dest.Identity, error) {
	id, err := a.queueOf(ref, "redrive")
	if err == nil && !hasDLQPrefix(id.Channel) {
		id.Channel = "DLQ." + id.Channel
	}
	return id, err
}

func hasDLQPrefix(ch string) bool { return len(ch) >= 4 && ch[:4] == "DLQ." }

// queueIdentity is identity for an action on a queues-pattern queue.
func (a *Admin) queueIdentity(what string) func(QueueRef) (dest.Identity, error) {
	return func(ref QueueRef) (dest.Identity, error) { return a.queueOf(ref, what) }
}
