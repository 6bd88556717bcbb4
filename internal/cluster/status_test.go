package cluster

import (
	"testing"

	"github.com/titan-broker/titan/internal/address"
	"github.com/titan-broker/titan/internal/dest"
)

// identityOfSubject undoes Subject for queue identities, percent-encoded bytes included.
func TestIdentityOfSubjectRoundTrip(t *testing.T) {
	for _, id := range []dest.Identity{
		{Group: "default", Pattern: dest.PatternQueues, Channel: "orders"},
		{Group: "g-1", Pattern: dest.PatternQueues, Channel: "orders.eu.x y"},
		{Group: "g", Pattern: dest.PatternQueues, Channel: "a%b.*lit>.ü", Bare: true},
	} {
		got, ok := identityOfSubject(Subject(id))
		if !ok || got != id {
			t.Errorf("identityOfSubject(%q) = %+v, %v; want %+v", Subject(id), got, ok, id)
		}
	}
	for _, s := range []string{"t.g.ev.x", "t.g.qs.abc", "x.g.q.a", "t.g.q.%Z1", "t.g.q"} {
		if _, ok := identityOfSubject(s); ok {
			t.Errorf("identityOfSubject(%q) accepted a subject that is no queue's", s)
		}
	}
}

// A ring queue's placement (TITAN_<g>_Q_R<N>, subject kind r<N>/rb<N>) is listed as its
// group's queue, and an events-store retention class as its group's events-store.
func TestStatusKnowsRingAndRetentionPlacements(t *testing.T) {
	q := &Queues{settings: ringSettings{3}}
	for _, id := range []dest.Identity{
		{Group: "g_1", Pattern: dest.PatternQueues, Channel: "orders.eu"},
		{Group: "g", Pattern: dest.PatternQueues, Channel: "a b", Bare: true},
	} {
		p := q.place(id)
		if got, ok := identityOfSubject(p.subject); !ok || got != id {
			t.Errorf("identityOfSubject(%q) = %+v, %v; want %+v", p.subject, got, ok, id)
		}
		if g, k := streamKind(p.stream); g != id.Group || k != "queues" {
			t.Errorf("streamKind(%q) = %q, %q; want %q, queues", p.stream, g, k, id.Group)
		}
	}
	for name, want := range map[string][2]string{
		"TITAN_a_b_ES":          {"a_b", "events-store"},
		"TITAN_a_ES_0123abcd":   {"a", "events-store"},
		"TITAN_x_Q_R10":         {"x", "queues"},
		"TITAN_x_R10":           {"x_R10", "other"},
		"TITAN_odd_ES_notahash": {"odd_ES_notahash", "other"},
	} {
		if g, k := streamKind(name); g != want[0] || k != want[1] {
			t.Errorf("streamKind(%q) = %q, %q; want %q", name, g, k, want)
		}
	}
	for _, s := range []string{"t.g.rs3.abc", "t.g.r.x", "t.g.rbx.y"} {
		if _, ok := identityOfSubject(s); ok {
			t.Errorf("identityOfSubject(%q) accepted a subject that is no queue's", s)
		}
	}
}

type ringSettings struct{ n int }

func (r ringSettings) Settings(id dest.Identity) address.Settings {
	s := address.Defaults(id)
	s.RingSize = r.n
	return s
}
