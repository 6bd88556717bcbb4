package cluster

import (
	"testing"

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
