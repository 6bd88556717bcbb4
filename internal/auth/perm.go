package auth

import (
	"fmt"
	"strings"

	"github.com/titan-broker/titan/internal/dest"
)

// Permission is a set of rights on a (group, pattern, channel), as a bit mask. The names and
// meanings follow ActiveMQ Artemis security-settings permission types.
type Permission uint8

// The permission types.
const (
	// Send publishes to a destination (SEND, POST /publish).
	Send Permission = 1 << iota
	// Consume subscribes to a destination, events-store replay included.
	Consume
	// Browse reads the monitor API (queues, snapshot, metrics).
	Browse
	// Create makes a queue that does not exist yet (a SEND or SUBSCRIBE to a new queue).
	Create
	// Manage changes state through the monitor API (create, delete, pause, publish, reload).
	Manage

	// All is every permission.
	All = Send | Consume | Browse | Create | Manage
)

var permNames = []struct {
	p    Permission
	name string
}{{Send, "send"}, {Consume, "consume"}, {Browse, "browse"}, {Create, "create"}, {Manage, "manage"}}

// String returns the permission names joined by "," ("send,consume"), or "none".
func (p Permission) String() string {
	var parts []string
	for _, n := range permNames {
		if p&n.p != 0 {
			parts = append(parts, n.name)
		}
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ",")
}

// Rule is one security setting: who (by role) may do what on the identities its match covers.
// The match is (Group, Pattern, Channel): Group is a group name or "*" (any; the default),
// Pattern a pattern name (events, events-store, queues, commands, queries, temp-queue) or "*"
// (any; the default), Channel a dot-channel match with Artemis wildcards (`#` zero or more
// words, `*` exactly one; default "#").
type Rule struct {
	Group   string   `yaml:"group,omitempty"`
	Pattern string   `yaml:"pattern,omitempty"`
	Channel string   `yaml:"channel,omitempty"`
	Send    []string `yaml:"send,omitempty,flow"`
	Consume []string `yaml:"consume,omitempty,flow"`
	Browse  []string `yaml:"browse,omitempty,flow"`
	Create  []string `yaml:"create,omitempty,flow"`
	Manage  []string `yaml:"manage,omitempty,flow"`
}

// rule is a compiled Rule.
type rule struct {
	group   string       // "" is any
	pattern dest.Pattern // 0 is any
	channel []string     // match words
	grants  map[string]Permission
	score   [4]int // specificity, compared lexicographically (higher wins)
	index   int    // declaration order (earlier wins a tie)
}

func compileRule(r Rule, index int) (rule, error) {
	c := rule{index: index, grants: map[string]Permission{}}
	if r.Group != "" && r.Group != "*" {
		if !dest.ValidGroup(r.Group) {
			return c, fmt.Errorf("group %q is not a group name or \"*\"", r.Group)
		}
		c.group = r.Group
	}
	if r.Pattern != "" && r.Pattern != "*" {
		p, ok := dest.ParsePattern(r.Pattern)
		if !ok {
			return c, fmt.Errorf("pattern %q is not one of events, events-store, queues, commands, queries, temp-queue or \"*\"", r.Pattern)
		}
		c.pattern = p
	}
	ch := r.Channel
	if ch == "" {
		ch = "#"
	}
	c.channel = strings.Split(ch, ".")
	for _, w := range c.channel {
		if w == "" {
			return c, fmt.Errorf("channel %q has an empty word", ch)
		}
	}
	for _, g := range []struct {
		roles []string
		p     Permission
	}{{r.Send, Send}, {r.Consume, Consume}, {r.Browse, Browse}, {r.Create, Create}, {r.Manage, Manage}} {
		for _, role := range g.roles {
			c.grants[role] |= g.p
		}
	}
	// Most specific wins: the channel first (Artemis: more literal words, then more `*`,
	// then fewer `#`), then a named pattern over any, then a named group over any.
	lit, star, hash := 0, 0, 0
	for _, w := range c.channel {
		switch w {
		case "#":
			hash++
		case "*":
			star++
		default:
			lit++
		}
	}
	c.score = [4]int{lit*1000 + star, -hash, b2i(c.pattern != 0), b2i(c.group != "")}
	return c, nil
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// moreSpecific reports whether a sorts before b (a wins when both match).
func moreSpecific(a, b *rule) bool {
	for i := range a.score {
		if a.score[i] != b.score[i] {
			return a.score[i] > b.score[i]
		}
	}
	return a.index < b.index
}

// matches reports whether r covers (group, pattern, channel).
func (r *rule) matches(group string, pattern dest.Pattern, channel string) bool {
	if r.group != "" && r.group != group {
		return false
	}
	if r.pattern != 0 && r.pattern != pattern {
		return false
	}
	return matchChannel(r.channel, channel)
}

// matchChannel reports whether the match words m cover the dot channel: `#` is zero or more
// words, `*` exactly one, any other word itself (ActiveMQ Artemis wildcard syntax). It does
// not allocate.
func matchChannel(m []string, channel string) bool {
	for len(m) > 0 {
		w := m[0]
		if w == "#" {
			if len(m) == 1 {
				return true
			}
			// Try the rest of the match at every word boundary, zero words consumed first.
			rest := channel
			for {
				if matchChannel(m[1:], rest) {
					return true
				}
				i := strings.IndexByte(rest, '.')
				if i < 0 {
					return rest != "" && matchChannel(m[1:], "")
				}
				rest = rest[i+1:]
			}
		}
		if channel == "" {
			return false
		}
		word, next := channel, ""
		if i := strings.IndexByte(channel, '.'); i >= 0 {
			word, next = channel[:i], channel[i+1:]
			if next == "" {
				return false // trailing dot: not a channel
			}
		}
		if w != "*" && w != word {
			return false
		}
		m, channel = m[1:], next
	}
	return channel == ""
}
