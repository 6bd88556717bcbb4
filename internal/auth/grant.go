package auth

import (
	"fmt"
	"slices"
	"strings"

	"github.com/titan-broker/titan/internal/dest"
)

// Grant is one `--grant` argument of `titan user add|grant|revoke` and `titan role
// grant|revoke`: a destination match and the permissions it names, written
// "DEST-PATTERN:perm,perm" (issue #31). DEST-PATTERN is a destination as a client writes it,
// with Artemis wildcards in its channel ("/queue/orders.#", "/topic/prices/*"), or "#" for
// every destination of every pattern; an optional "GROUP@" in front names a destination
// group ("market@/queue/#"). perm is send, consume, browse, create, manage or all.
type Grant struct {
	// Group, Pattern and Channel are the Rule match ("" for any group or pattern).
	Group, Pattern, Channel string
	// Perms are the permissions granted or revoked.
	Perms Permission
}

// ParseGrant parses "DEST-PATTERN:perm,perm". Errors wrap ErrInvalidFile and say what is
// wrong.
func ParseGrant(s string) (Grant, error) {
	var g Grant
	i := strings.LastIndexByte(s, ':')
	if i < 0 {
		return g, fmt.Errorf("%w: grant %q: write DEST-PATTERN:perm,perm (for example '/queue/orders.#:send,consume')", ErrInvalidFile, s)
	}
	match, perms := s[:i], s[i+1:]
	for _, name := range strings.Split(perms, ",") {
		name = strings.TrimSpace(name)
		if name == "all" {
			g.Perms |= All
			continue
		}
		j := slices.IndexFunc(permNames, func(n struct {
			p    Permission
			name string
		}) bool {
			return n.name == name
		})
		if j < 0 {
			return g, fmt.Errorf("%w: grant %q: %q is not a permission (send, consume, browse, create, manage or all)", ErrInvalidFile, s, name)
		}
		g.Perms |= permNames[j].p
	}
	if group, rest, ok := strings.Cut(match, "@"); ok {
		if !dest.ValidGroup(group) {
			return g, fmt.Errorf("%w: grant %q: %q is not a group name", ErrInvalidFile, s, group)
		}
		g.Group, match = group, rest
	}
	if match == "#" || match == "/#" {
		g.Channel = "#"
		return g, nil
	}
	segs := strings.Split(strings.TrimPrefix(match, "/"), "/")
	if len(segs) < 2 {
		return g, fmt.Errorf("%w: grant %q: the destination needs a prefix and a channel (/queue/NAME, /topic/NAME.#, ...) or is \"#\"", ErrInvalidFile, s)
	}
	d, err := dest.Parse("/"+segs[0]+"/x", dest.PatternQueues)
	if err != nil || d.Bare {
		return g, fmt.Errorf("%w: grant %q: %q is not a destination prefix (queue, topic, events-store, command, query, temp-queue)", ErrInvalidFile, s, segs[0])
	}
	g.Pattern = d.Pattern.String()
	g.Channel = strings.Join(segs[1:], ".")
	if _, err := compileRule(Rule{Group: g.Group, Pattern: g.Pattern, Channel: g.Channel}, 0); err != nil {
		return g, fmt.Errorf("%w: grant %q: %v", ErrInvalidFile, s, err)
	}
	return g, nil
}

// String renders g as ParseGrant reads it.
func (g Grant) String() string {
	m := "#"
	if g.Pattern != "" {
		p, _ := dest.ParsePattern(g.Pattern)
		m = "/" + p.Prefix() + "/" + strings.ReplaceAll(g.Channel, ".", "/")
		if p.Prefix() == "" {
			m = "/" + g.Pattern + "/" + g.Channel
		}
	}
	if g.Group != "" {
		m = g.Group + "@" + m
	}
	return m + ":" + g.Perms.String()
}

// GrantRole gives role g.Perms on every destination g's match covers. An existing rule with
// the same match gains the role; otherwise a new rule is added, starting with every grant of
// the rule that covered the match until now, so that a narrower rule never takes a right from
// anyone (the most specific rule wins: a new "orders.#" rule naming only this role would lock
// every other role out of orders.#). The narrower rules the match covers gain the role too,
// since they win on their destinations. Errors: ErrInvalidFile for a role name that is
// empty.
func (f *File) GrantRole(role string, g Grant) error {
	if role == "" {
		return fmt.Errorf("%w: empty role", ErrInvalidFile)
	}
	i := f.ruleIndex(g)
	if i < 0 {
		r := Rule{Group: g.Group, Pattern: g.Pattern, Channel: g.Channel}
		if cover := f.covering(g); cover != nil {
			r.Send, r.Consume, r.Browse = slices.Clone(cover.Send), slices.Clone(cover.Consume), slices.Clone(cover.Browse)
			r.Create, r.Manage = slices.Clone(cover.Create), slices.Clone(cover.Manage)
		}
		f.Permissions = append(f.Permissions, r)
		i = len(f.Permissions) - 1
	}
	for _, j := range append([]int{i}, f.narrower(g, i)...) {
		for _, l := range f.Permissions[j].lists() {
			if g.Perms&l.p != 0 && !slices.Contains(*l.roles, role) {
				*l.roles = append(*l.roles, role)
			}
		}
	}
	return nil
}

// RevokeRole takes g.Perms away from role on g's match and on the narrower rules it covers;
// a rule left granting nothing is removed. It reports whether a rule with exactly that match
// existed (nothing changes otherwise). Rights the role holds through broader rules stay.
func (f *File) RevokeRole(role string, g Grant) bool {
	i := f.ruleIndex(g)
	if i < 0 {
		return false
	}
	idx := append([]int{i}, f.narrower(g, i)...)
	drop := map[int]bool{}
	for _, j := range idx {
		empty := true
		for _, l := range f.Permissions[j].lists() {
			if g.Perms&l.p != 0 {
				*l.roles = slices.DeleteFunc(*l.roles, func(s string) bool { return s == role })
			}
			if len(*l.roles) > 0 {
				empty = false
			}
		}
		drop[j] = empty
	}
	kept := f.Permissions[:0]
	for j, r := range f.Permissions {
		if !drop[j] {
			kept = append(kept, r)
		}
	}
	f.Permissions = kept
	return true
}

// UserRole is the role `titan user add|grant` grants to when a grant names a user: the
// user's own role, "user:NAME", added to the user's roles.
func UserRole(user string) string { return "user:" + user }

// Unpermitted returns the users no rule grants anything, sorted (the broker warns about
// each at start and reload: such a user can log in and do nothing).
func (f *File) Unpermitted() []string {
	var out []string
	for _, name := range f.Names() {
		u := f.Users[name]
		granted := false
		for _, r := range f.Permissions {
			for _, l := range r.lists() {
				for _, role := range u.Roles {
					if slices.Contains(*l.roles, role) {
						granted = true
					}
				}
			}
		}
		if !granted {
			out = append(out, name)
		}
	}
	return out
}

func (r *Rule) lists() []struct {
	p     Permission
	roles *[]string
} {
	return []struct {
		p     Permission
		roles *[]string
	}{{Send, &r.Send}, {Consume, &r.Consume}, {Browse, &r.Browse}, {Create, &r.Create}, {Manage, &r.Manage}}
}

func norm(s, any string) string {
	if s == any || s == "*" {
		return ""
	}
	return s
}

// ruleIndex returns the index of the rule whose match is exactly g's, or -1.
func (f *File) ruleIndex(g Grant) int {
	for i, r := range f.Permissions {
		ch := r.Channel
		if ch == "" {
			ch = "#"
		}
		if norm(r.Group, "") == norm(g.Group, "") && norm(r.Pattern, "") == norm(g.Pattern, "") && ch == g.Channel {
			return i
		}
	}
	return -1
}

// covers reports whether every destination inner's match covers is covered by outer too:
// outer matches inner's channel with each "*" as some word and each "#" as zero and as two
// words (a word no rule names literally, so only a wildcard of outer matches it), and outer's
// group and pattern are inner's or any.
func covers(outer *rule, inner Grant) bool {
	p, _ := dest.ParsePattern(inner.Pattern)
	if inner.Group == "" && outer.group != "" || inner.Pattern == "" && outer.pattern != 0 {
		return false
	}
	const w = "\x01"
	var zero, two []string
	for _, word := range strings.Split(inner.Channel, ".") {
		switch word {
		case "*":
			zero, two = append(zero, w), append(two, w)
		case "#":
			two = append(two, w, w)
		default:
			zero, two = append(zero, word), append(two, word)
		}
	}
	if !outer.matches(inner.Group, p, strings.Join(two, ".")) {
		return false
	}
	if len(zero) == 0 {
		return outer.group == "" || outer.group == inner.Group
	}
	return outer.matches(inner.Group, p, strings.Join(zero, "."))
}

// grantOf is r's match as a Grant.
func grantOf(r Rule) Grant {
	ch := r.Channel
	if ch == "" {
		ch = "#"
	}
	return Grant{Group: norm(r.Group, ""), Pattern: norm(r.Pattern, ""), Channel: ch}
}

// covering returns the most specific existing rule whose match covers all of g's, or nil.
func (f *File) covering(g Grant) *Rule {
	var best *rule
	bestIndex := -1
	for i, r := range f.Permissions {
		c, err := compileRule(r, i)
		if err != nil || !covers(&c, g) {
			continue
		}
		if best == nil || moreSpecific(&c, best) {
			cc := c
			best, bestIndex = &cc, i
		}
	}
	if bestIndex < 0 {
		return nil
	}
	return &f.Permissions[bestIndex]
}

// narrower returns the indexes of the rules other than i whose match g's covers: they win
// over g's rule on their destinations, so a grant on g must reach them too.
func (f *File) narrower(g Grant, i int) []int {
	outer, err := compileRule(Rule{Group: g.Group, Pattern: g.Pattern, Channel: g.Channel}, 0)
	if err != nil {
		return nil
	}
	var out []int
	for j, r := range f.Permissions {
		if j != i && covers(&outer, grantOf(r)) {
			out = append(out, j)
		}
	}
	return out
}
