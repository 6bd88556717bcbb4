package auth

import "fmt"

// Quota is one set of per-user limits (issue #29: per-user quotas), configured in the
// users file for a user or a role:
//
//	quotas:
//	  roles: {apps: {connections: 50}}
//	  users: {batch: {connections: 2}}
//
// A user's own entry wins; otherwise the most generous entry among its roles applies (a role
// without an entry, or a limit of 0, is no limit). RabbitMQ has the same per-user
// max-connections limit (`rabbitmqctl set_user_limits`).
type Quota struct {
	// Connections bounds the user's open STOMP connections (every listener, TCP and
	// WebSocket); 0 is no limit. A CONNECT over it gets "ERROR message:quota exceeded"
	// naming the quota.
	Connections int `yaml:"connections,omitempty"`
	// DurableSubscriptions bounds the durable subscriptions the user owns (events-store
	// durable-names and durable topic subscriptions, counted while they exist); 0 is no
	// limit. A SUBSCRIBE that would make one more gets "ERROR message:quota exceeded".
	// Artemis bounds the same per user with max-queues (a durable subscription is a queue).
	DurableSubscriptions int `yaml:"durable-subscriptions,omitempty"`
	// Destinations bounds the queues and events-store logs the user's SENDs and SUBSCRIBEs
	// created that still exist; 0 is no limit. A frame that would create one more gets
	// "ERROR message:quota exceeded". (Artemis: max-queues; RabbitMQ: max-queues.)
	Destinations int `yaml:"destinations,omitempty"`
}

// limit returns the limit of quota name in q.
func (q Quota) limit(name string) int {
	switch name {
	case QuotaConnections:
		return q.Connections
	case QuotaDurableSubscriptions:
		return q.DurableSubscriptions
	case QuotaDestinations:
		return q.Destinations
	}
	return 0
}

// Quotas are the users file's quotas section.
type Quotas struct {
	// Roles maps role names to their quota.
	Roles map[string]Quota `yaml:"roles,omitempty"`
	// Users maps user names to their quota (wins over the roles').
	Users map[string]Quota `yaml:"users,omitempty"`
}

func (q Quotas) validate() []error {
	var errs []error
	for what, m := range map[string]map[string]Quota{"roles": q.Roles, "users": q.Users} {
		for name, v := range m {
			for _, q := range []string{QuotaConnections, QuotaDurableSubscriptions, QuotaDestinations} {
				if n := v.limit(q); n < 0 {
					errs = append(errs, fmt.Errorf("quotas.%s.%s.%s: %d is negative (0 is no limit)", what, name, q, n))
				}
			}
		}
	}
	return errs
}

// The quotas' names: their users-file keys, metric labels (titan_quota_refused_total) and
// the ERROR body's wording.
const (
	// QuotaConnections is the connections quota.
	QuotaConnections = "connections"
	// QuotaDurableSubscriptions is the durable-subscriptions quota.
	QuotaDurableSubscriptions = "durable-subscriptions"
	// QuotaDestinations is the destinations (created) quota.
	QuotaDestinations = "destinations"
)

// ConnectionLimit returns user's connections quota (0: no limit). In open mode there is none.
func (a *Authority) ConnectionLimit(user string) int { return a.Limit(user, QuotaConnections) }

// Limit returns user's limit for the quota named name (QuotaConnections,
// QuotaDurableSubscriptions, QuotaDestinations); 0 is no limit. In open mode there is none.
// A user's own entry wins; otherwise the most generous among its roles' entries.
func (a *Authority) Limit(user, name string) int {
	s := a.snap.Load()
	if s.open {
		return 0
	}
	if q, ok := s.quotas.Users[user]; ok {
		return q.limit(name)
	}
	u, ok := s.users[user]
	if !ok {
		return 0
	}
	limit, limited := 0, false
	for _, role := range u.Roles {
		q, ok := s.quotas.Roles[role]
		if !ok || q.limit(name) == 0 {
			return 0 // a role without a limit: the most generous entry is no limit
		}
		if n := q.limit(name); !limited || n > limit {
			limit, limited = n, true
		}
	}
	return limit
}
