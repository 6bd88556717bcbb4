package cluster

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/titan-broker/titan/internal/address"
	"github.com/titan-broker/titan/internal/dest"
)

// PartitionOf is part of every cluster's stored layout: these values must never change
// (a destination would move to another stream and its stored messages be stranded). They
// were computed independently of the Go code (FNV-1a 64 in Python).
func TestPartitionOfIsStable(t *testing.T) {
	cases := []struct {
		id   dest.Identity
		n    int
		want int
	}{
		{dest.Identity{Group: "default", Pattern: dest.PatternQueues, Channel: "orders"}, 12, 1},
		{dest.Identity{Group: "default", Pattern: dest.PatternEventsStore, Channel: "orders"}, 12, 1},
		{dest.Identity{Group: "default", Pattern: dest.PatternQueues, Channel: "orders", Bare: true}, 12, 1},
		{dest.Identity{Group: "g", Pattern: dest.PatternQueues, Channel: "a.b.c"}, 12, 6},
		{dest.Identity{Group: "g", Pattern: dest.PatternQueues, Channel: "a.b.c"}, 7, 1},
		{dest.Identity{Group: "g", Pattern: dest.PatternQueues, Channel: "a.b.c"}, 1, 0},
		{dest.Identity{Group: "g", Pattern: dest.PatternQueues, Channel: "a.b.c"}, 0, 0},
	}
	for _, c := range cases {
		if got := PartitionOf(c.id, c.n); got != c.want {
			t.Errorf("PartitionOf(%+v, %d) = %d, want %d", c.id, c.n, got, c.want)
		}
	}
}

// A destination always maps to the same partition, the same stream and subject, and the
// partitions of a group share its destinations out evenly.
func TestPartitionOfSpreadsDestinations(t *testing.T) {
	const n, queues = 12, 12000
	counts := make([]int, n)
	for i := range queues {
		id := dest.Identity{Group: "default", Pattern: dest.PatternQueues, Channel: fmt.Sprintf("orders.%d", i)}
		k := PartitionOf(id, n)
		if k < 0 || k >= n {
			t.Fatalf("PartitionOf(%v) = %d, outside [0, %d)", id, k, n)
		}
		a, b := PlaceQueue(id, 0, 3, n, 0), PlaceQueue(id, 0, 3, n, 0)
		if a.Stream != b.Stream || a.Subject != b.Subject || a.Partition != k || PartitionOf(id, n) != k {
			t.Fatalf("%v placed twice differently: %+v / %+v (partition %d)", id, a, b, k)
		}
		counts[k]++
	}
	for k, c := range counts {
		if mean := queues / n; c < mean*8/10 || c > mean*12/10 {
			t.Errorf("partition %d holds %d of %d queues (mean %d): %v", k, c, queues, mean, counts)
		}
	}
}

// Every partition stream of a group owns a disjoint subject space: each destination's
// subject (and scheduled holder) is matched by its own stream's subjects and by no other
// stream's of any class of the group, so JetStream accepts all the streams side by side
// and a message can only be stored in its destination's partition.
func TestPartitionsHaveDisjointSubjects(t *testing.T) {
	const n = 12
	retained := address.Settings{RetentionMaxMessages: 10}
	type placed struct {
		p    Placement
		name string
	}
	var all []placed
	streams := map[string][]string{}
	for i := range 200 {
		for _, bare := range []bool{false, true} {
			q := dest.Identity{Group: "g", Pattern: dest.PatternQueues, Channel: fmt.Sprintf("q.%d", i), Bare: bare}
			l := dest.Identity{Group: "g", Pattern: dest.PatternEventsStore, Channel: fmt.Sprintf("q.%d", i), Bare: bare}
			for _, p := range []Placement{PlaceQueue(q, 0, 3, n, 0), PlaceQueue(q, 5, 3, n, 0),
				PlaceLog(l, address.Settings{}, 3, n, 0), PlaceLog(l, retained, 3, n, 0)} {
				all = append(all, placed{p, q.String()})
				streams[p.Stream] = p.Config.Subjects
			}
		}
	}
	if len(streams) != 4*n {
		t.Fatalf("%d streams, want %d (4 classes × %d partitions)", len(streams), 4*n, n)
	}
	names := make([]string, 0, len(streams))
	for name := range streams {
		names = append(names, name)
	}
	for i, a := range names {
		for _, b := range names[i+1:] {
			for _, sa := range streams[a] {
				for _, sb := range streams[b] {
					if server.SubjectsCollide(sa, sb) {
						t.Errorf("streams %s and %s overlap: %q and %q", a, b, sa, sb)
					}
				}
			}
		}
	}
	owners := func(subject string) []string {
		var in []string
		for name, subs := range streams {
			for _, s := range subs {
				if server.SubjectMatchesFilter(subject, s) {
					in = append(in, name)
					break
				}
			}
		}
		return in
	}
	for _, x := range all {
		if got := owners(x.p.Subject); len(got) != 1 || got[0] != x.p.Stream {
			t.Errorf("%s: subject %q is stored by %v, want only %s", x.name, x.p.Subject, got, x.p.Stream)
		}
		if x.p.Holders != "" {
			if got := owners(x.p.Holders + "id1"); len(got) != 1 || got[0] != x.p.Stream {
				t.Errorf("%s: holder %q is stored by %v, want only %s", x.name, x.p.Holders+"id1", got, x.p.Stream)
			}
		}
		if !strings.HasSuffix(x.p.Stream, fmt.Sprintf("_P%d", x.p.Partition)) {
			t.Errorf("%s: stream %s is not partition %d's", x.name, x.p.Stream, x.p.Partition)
		}
	}
}

// With one partition the names are those of a cluster made before partitions, so such a
// cluster (settled at 1 partition) finds its streams and messages where they are.
func TestOnePartitionKeepsUnpartitionedNames(t *testing.T) {
	q := dest.Identity{Group: "g", Pattern: dest.PatternQueues, Channel: "jobs"}
	l := dest.Identity{Group: "g", Pattern: dest.PatternEventsStore, Channel: "jobs"}
	for _, c := range []struct {
		p                Placement
		stream, subject  string
		holders          string
		configSubjectsIn string
	}{
		{PlaceQueue(q, 0, 3, 1, time.Minute), "TITAN_g_Q", "t.g.q.jobs", "t.g.qs.", "t.g.q.>"},
		{PlaceQueue(q, 4, 3, 1, time.Minute), "TITAN_g_Q_R4", "t.g.r4.jobs", "t.g.rs4.", "t.g.r4.>"},
		{PlaceLog(l, address.Settings{}, 3, 1, time.Minute), "TITAN_g_ES", "t.g.es.jobs", "", "t.g.es.>"},
		{PlaceQueue(q, 0, 3, 12, time.Minute), "TITAN_g_Q_P6", "t.g.q_6.jobs", "t.g.qs_6.", "t.g.q_6.>"},
		{PlaceQueue(q, 4, 3, 12, time.Minute), "TITAN_g_Q_R4_P6", "t.g.r4_6.jobs", "t.g.rs4_6.", "t.g.r4_6.>"},
		{PlaceLog(l, address.Settings{}, 3, 12, time.Minute), "TITAN_g_ES_P6", "t.g.es_6.jobs", "", "t.g.es_6.>"},
	} {
		if c.p.Stream != c.stream || c.p.Subject != c.subject || c.p.Holders != c.holders || c.p.Config.Subjects[0] != c.configSubjectsIn {
			t.Errorf("placement %s %s %s %v, want %s %s %s [%s …]", c.p.Stream, c.p.Subject, c.p.Holders, c.p.Config.Subjects,
				c.stream, c.subject, c.holders, c.configSubjectsIn)
		}
	}
}

func TestSplitPartition(t *testing.T) {
	for name, want := range map[string]struct {
		class string
		k     int
		ok    bool
	}{
		"TITAN_g_Q_P3":            {"TITAN_g_Q", 3, true},
		"TITAN_g_ES_0a1b2c3d_P11": {"TITAN_g_ES_0a1b2c3d", 11, true},
		"TITAN_g_Q":               {"TITAN_g_Q", 0, false},
		"TITAN_g_Q_P":             {"TITAN_g_Q_P", 0, false},
		"TITAN_g_Q_Px":            {"TITAN_g_Q_Px", 0, false},
	} {
		if c, k, ok := SplitPartition(name); c != want.class || k != want.k || ok != want.ok {
			t.Errorf("SplitPartition(%q) = %q, %d, %v; want %+v", name, c, k, ok, want)
		}
	}
}

// The preferred leaders of a class's partitions go round-robin over a shared peer set,
// whatever order the peers are listed in: 12 partitions on 3 nodes, 4 each.
func TestPreferredLeaderSpreadsPartitions(t *testing.T) {
	for _, class := range []string{"TITAN_default_Q", "TITAN_default_ES", "TITAN_g_Q_R3"} {
		per := map[string]int{}
		for k := range 12 {
			name := fmt.Sprintf("%s_P%d", class, k)
			a := PreferredLeader(name, []string{"n2", "n0", "n1"})
			if b := PreferredLeader(name, []string{"n1", "n2", "n0", "n1"}); a != b {
				t.Fatalf("PreferredLeader(%s) depends on the peers' order: %s / %s", name, a, b)
			}
			per[a]++
		}
		if per["n0"] != 4 || per["n1"] != 4 || per["n2"] != 4 {
			t.Errorf("%s: preferred leaders per node %v, want 4 each", class, per)
		}
	}
	if got := PreferredLeader("TITAN_g_Q_P0", nil); got != "" {
		t.Errorf("PreferredLeader without peers = %q, want \"\"", got)
	}
}
