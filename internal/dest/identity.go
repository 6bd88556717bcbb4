package dest

import "strings"

// Identity is a destination's identity inside the broker: (group, pattern, channel)
// (DESIGN §2 "Identity", reference 000: routing is by exact identity). Comparable; usable as
// a map key. It is defined here, beside the grammar that produces it, so that every package
// (router, pattern packages, store, admin) speaks of destinations in the same terms without
// depending on a runtime package.
type Identity struct {
	// Group is the destination group (DESIGN §3); "default" when a frame names none.
	Group string
	// Pattern is the messaging pattern the destination's prefix selected.
	Pattern Pattern
	// Channel is the dot-separated channel ("orders.eu").
	Channel string
	// Bare is set for destinations without a known prefix, whose egress form has no prefix.
	Bare bool
}

// IdentityOf returns the identity of d in group ("" is DefaultGroup).
func IdentityOf(group string, d Destination) Identity {
	if group == "" {
		group = DefaultGroup
	}
	return Identity{Group: group, Pattern: d.Pattern, Channel: d.Channel, Bare: d.Bare}
}

// Destination returns the canonical egress destination string of id ("/queue/orders/eu", or
// "/orders/created" for a bare destination; DESIGN §2 "Egress destination").
func (id Identity) Destination() string {
	ch := strings.ReplaceAll(id.Channel, ".", "/")
	if id.Bare {
		return "/" + ch
	}
	return "/" + id.Pattern.Prefix() + "/" + ch
}

// AppendDestination appends id.Destination() to dst without building the string.
func (id Identity) AppendDestination(dst []byte) []byte {
	dst = append(dst, '/')
	if !id.Bare {
		dst = append(dst, id.Pattern.Prefix()...)
		dst = append(dst, '/')
	}
	for i := 0; i < len(id.Channel); i++ {
		if c := id.Channel[i]; c == '.' {
			dst = append(dst, '/')
		} else {
			dst = append(dst, c)
		}
	}
	return dst
}

// String renders "group:/destination" for logs.
func (id Identity) String() string { return id.Group + ":" + id.Destination() }

// OwnerDestination returns the destination as the client that owns it names it: for a
// temp-queue, whose channel is "<owner session>.<name>", /temp-queue/<name> (the form the
// owner subscribed to and sent as reply-to; issue 26: a reply arrives on the destination the
// client used); for any other identity, Destination(). A temp-queue's messages only ever
// reach its owner, so MESSAGE frames of temp-queues carry this form.
func (id Identity) OwnerDestination() string { return id.owned().Destination() }

// AppendOwnerDestination appends id.OwnerDestination() to dst without building the string
// (the message stage's egress destination, per SEND).
func (id Identity) AppendOwnerDestination(dst []byte) []byte {
	return id.owned().AppendDestination(dst)
}

// owned is id as its owner names it (see OwnerDestination).
func (id Identity) owned() Identity {
	if id.Pattern == PatternTempQueue {
		if _, name, ok := strings.Cut(id.Channel, "."); ok {
			id.Channel = name
		}
	}
	return id
}
