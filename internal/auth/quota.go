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
			if v.Connections < 0 {
				errs = append(errs, fmt.Errorf("quotas.%s.%s.connections: %d is negative (0 is no limit)", what, name, v.Connections))
			}
		}
	}
	return errs
}

// QuotaConnections is the metric label and ERROR wording of the connections quota.
const QuotaConnections = "connections"

// ConnectionLimit returns user's connections quota (0: no limit). In open mode there is none.
func (a *Authority) ConnectionLimit(user string) int {
	s := a.snap.Load()
	if s.open {
		return 0
	}
	if q, ok := s.quotas.Users[user]; ok {
		return q.Connections
	}
	u, ok := s.users[user]
	if !ok {
		return 0
	}
	limit, limited := 0, false
	for _, role := range u.Roles {
		q, ok := s.quotas.Roles[role]
		if !ok || q.Connections == 0 {
			return 0 // a role without a limit: the most generous entry is no limit
		}
		if !limited || q.Connections > limit {
			limit, limited = q.Connections, true
		}
	}
	return limit
}
