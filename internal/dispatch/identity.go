package dispatch

import (
	"strings"

	"github.com/titan-broker/titan/internal/dest"
)

// Identity is a destination's identity inside the broker: (group, pattern, channel)
// (DESIGN §2 "Identity"). Comparable; usable as a map key.
type Identity struct {
	Group   string
	Pattern dest.Pattern
	Channel string
	// Bare is set for destinations without a known prefix, whose egress form has no prefix.
	Bare bool
}

// IdentityOf returns the identity of d in group.
func IdentityOf(group string, d dest.Destination) Identity {
	if group == "" {
		group = dest.DefaultGroup
	}
	return Identity{Group: group, Pattern: d.Pattern, Channel: d.Channel, Bare: d.Bare}
}

// Destination returns the canonical egress destination string of id ("/queue/orders/eu", or
// "/orders/created" for a bare destination).
func (id Identity) Destination() string {
	ch := strings.ReplaceAll(id.Channel, ".", "/")
	if id.Bare {
		return "/" + ch
	}
	return "/" + id.Pattern.Prefix() + "/" + ch
}

// String renders "group:/destination" for logs.
func (id Identity) String() string { return id.Group + ":" + id.Destination() }
