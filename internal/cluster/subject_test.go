package cluster

import (
	"testing"

	"github.com/titan-broker/titan/internal/dest"
)

func TestSubject(t *testing.T) {
	cases := []struct {
		id   dest.Identity
		want string
	}{
		{dest.Identity{Group: "default", Pattern: dest.PatternEvents, Channel: "orders.eu"}, "t.default.ev.orders.eu"},
		{dest.Identity{Group: "g-1", Pattern: dest.PatternEvents, Channel: "orders.*.x"}, "t.g-1.ev.orders.*.x"},
		{dest.Identity{Group: "g", Pattern: dest.PatternEvents, Channel: "orders.>"}, "t.g.ev.orders.>"},
		{dest.Identity{Group: "g", Pattern: dest.PatternEvents, Channel: "orders", Bare: true}, "t.g.evb.orders"},
		{dest.Identity{Group: "g", Pattern: dest.PatternQueues, Channel: "jobs"}, "t.g.q.jobs"},
		{dest.Identity{Group: "g", Pattern: dest.PatternQueues, Channel: "jobs", Bare: true}, "t.g.qb.jobs"},
		// Literal wildcard characters, '%', spaces and UTF-8 inside a segment are encoded:
		// they never become NATS syntax, and distinct channels stay distinct subjects.
		{dest.Identity{Group: "g", Pattern: dest.PatternEvents, Channel: "a*.b>"}, "t.g.ev.a%2A.b%3E"},
		{dest.Identity{Group: "g", Pattern: dest.PatternEvents, Channel: "50%.a b.é"}, "t.g.ev.50%25.a%20b.%C3%A9"},
	}
	for _, c := range cases {
		if got := Subject(c.id); got != c.want {
			t.Errorf("Subject(%+v) = %q, want %q", c.id, got, c.want)
		}
	}
}

func BenchmarkSubject(b *testing.B) {
	id := dest.Identity{Group: "default", Pattern: dest.PatternQueues, Channel: "orders.eu.created"}
	b.ReportAllocs()
	for b.Loop() {
		_ = Subject(id)
	}
}

// IdentityOfSubject undoes Subject for queue identities, percent-encoded bytes included.
func TestIdentityOfSubjectRoundTrip(t *testing.T) {
	for _, id := range []dest.Identity{
		{Group: "default", Pattern: dest.PatternQueues, Channel: "orders"},
		{Group: "g-1", Pattern: dest.PatternQueues, Channel: "orders.eu.x y"},
		{Group: "g", Pattern: dest.PatternQueues, Channel: "a%b.*lit>.ü", Bare: true},
	} {
		got, ok := IdentityOfSubject(Subject(id))
		if !ok || got != id {
			t.Errorf("IdentityOfSubject(%q) = %+v, %v; want %+v", Subject(id), got, ok, id)
		}
	}
	for _, s := range []string{"t.g.ev.x", "t.g.qs.abc", "x.g.q.a", "t.g.q.%Z1", "t.g.q"} {
		if _, ok := IdentityOfSubject(s); ok {
			t.Errorf("IdentityOfSubject(%q) accepted a subject that is no queue's", s)
		}
	}
}

// TestFilterSubject: a '#' filter subscribes to a subject that covers every channel it
// matches (checked with a NATS-style match of the subject's tokens), and says it is wider.
func TestFilterSubject(t *testing.T) {
	cases := []struct {
		filter, want string
		exact        bool
	}{
		{"orders.*", "t.g.ev.orders.*", true},
		{"orders.>", "t.g.ev.orders.>", true},
		{"#", "t.g.ev.>", false},
		{"#.eu", "t.g.ev.>", false},
		{"orders.#", "t.g.ev.>", false},
		{"orders.eu.#.x", "t.g.ev.orders.>", false},
		{"a.*.b.#", "t.g.ev.a.*.>", false},
	}
	for _, tc := range cases {
		got, exact := FilterSubject(dest.Identity{Group: "g", Pattern: dest.PatternEvents, Channel: tc.filter})
		if got != tc.want || exact != tc.exact {
			t.Errorf("FilterSubject(%q) = %q, %v; want %q, %v", tc.filter, got, exact, tc.want, tc.exact)
		}
	}
}
