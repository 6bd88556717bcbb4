package status

import (
	"testing"

	"github.com/titan-broker/titan/internal/cluster"
	"github.com/titan-broker/titan/internal/dest"
)

// A ring queue's placement (TITAN_<g>_Q_R<N>, subject kind r<N>/rb<N>) is listed as its
// group's queue, and an events-store retention class as its group's events-store.
func TestStatusKnowsRingAndRetentionPlacements(t *testing.T) {
	for _, id := range []dest.Identity{
		{Group: "g_1", Pattern: dest.PatternQueues, Channel: "orders.eu"},
		{Group: "g", Pattern: dest.PatternQueues, Channel: "a b", Bare: true},
	} {
		p := cluster.PlaceQueue(id, 3, 3, 0)
		if got, ok := cluster.IdentityOfSubject(p.Subject); !ok || got != id {
			t.Errorf("cluster.IdentityOfSubject(%q) = %+v, %v; want %+v", p.Subject, got, ok, id)
		}
		if g, k := streamKind(p.Stream); g != id.Group || k != "queues" {
			t.Errorf("streamKind(%q) = %q, %q; want %q, queues", p.Stream, g, k, id.Group)
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
		if _, ok := cluster.IdentityOfSubject(s); ok {
			t.Errorf("cluster.IdentityOfSubject(%q) accepted a subject that is no queue's", s)
		}
	}
}
