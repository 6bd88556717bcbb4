package dest

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

func requireEqual[T comparable](t *testing.T, got, want T, what string) {
	t.Helper()
	if got != want {
		t.Fatalf("%s = %v, want %v", what, got, want)
	}
}

// parseCase is one row of the grammar table. ok=false means ErrInvalid. egress is checked
// only when ok.
type parseCase struct {
	raw    string
	def    Pattern
	filter bool // ParseFilter instead of Parse
	ok     bool
	want   Destination
	egress string
}

func ev(ch string) Destination { return Destination{Pattern: PatternEvents, Channel: ch} }

func TestParse(t *testing.T) {
	long := func(prefix string, n int) string { return prefix + strings.Repeat("x", n-len(prefix)) }
	cases := []parseCase{
		// Reference 003 / DESIGN §2: primaries, slash→dot, egress.
		{raw: "/topic/a/b/c", ok: true, want: ev("a.b.c"), egress: "/topic/a/b/c"},
		{raw: "/topic/orders", ok: true, want: ev("orders"), egress: "/topic/orders"},
		{raw: "/queue/x", ok: true, want: Destination{Pattern: PatternQueues, Channel: "x"}, egress: "/queue/x"},
		{raw: "queue/x", ok: true, want: Destination{Pattern: PatternQueues, Channel: "x"}, egress: "/queue/x"},
		{raw: "/events-store/audit/eu", ok: true, want: Destination{Pattern: PatternEventsStore, Channel: "audit.eu"}, egress: "/events-store/audit/eu"},
		{raw: "/command/svc/ping", ok: true, want: Destination{Pattern: PatternCommands, Channel: "svc.ping"}, egress: "/command/svc/ping"},
		{raw: "/query/svc/get", ok: true, want: Destination{Pattern: PatternQueries, Channel: "svc.get"}, egress: "/query/svc/get"},
		{raw: "/temp-queue/x", ok: true, want: Destination{Pattern: PatternTempQueue, Channel: "x"}, egress: "/temp-queue/x"},
		{raw: "/temp-queue/r/1", ok: true, want: Destination{Pattern: PatternTempQueue, Channel: "r.1"}, egress: "/temp-queue/r/1"},

		// Channels are UTF-8 (STOMP 1.2 headers): multi-byte names pass, invalid bytes do not.
		{raw: "/queue/grüße", ok: true, want: Destination{Pattern: PatternQueues, Channel: "grüße"}, egress: "/queue/grüße"},
		{raw: "/queue/\xff\xfe"},
		{raw: "/topic/a/\xc3"},

		// Literal dot passes through; both spellings are the same channel, egress uses '/'.
		{raw: "/topic/a.b", ok: true, want: ev("a.b"), egress: "/topic/a/b"},
		{raw: "/topic/a/b", ok: true, want: ev("a.b"), egress: "/topic/a/b"},
		{raw: "/topic/a.b/c", ok: true, want: ev("a.b.c"), egress: "/topic/a/b/c"},

		// Aliases route as their primary and egress as the primary.
		{raw: "/events/x", ok: true, want: ev("x"), egress: "/topic/x"},
		{raw: "/store/x", ok: true, want: Destination{Pattern: PatternEventsStore, Channel: "x"}, egress: "/events-store/x"},
		{raw: "/queues/jobs", ok: true, want: Destination{Pattern: PatternQueues, Channel: "jobs"}, egress: "/queue/jobs"},
		{raw: "/commands/c", ok: true, want: Destination{Pattern: PatternCommands, Channel: "c"}, egress: "/command/c"},
		{raw: "/queries/q", ok: true, want: Destination{Pattern: PatternQueries, Channel: "q"}, egress: "/query/q"},
		{raw: "events/a/b", ok: true, want: ev("a.b"), egress: "/topic/a/b"},

		// Prefixes are case-sensitive: an unknown case is a bare destination.
		{raw: "/Topic/x", def: PatternEvents, ok: true, want: Destination{Pattern: PatternEvents, Channel: "Topic.x", Bare: true}, egress: "/Topic/x"},
		{raw: "/QUEUE/x", def: PatternQueues, ok: true, want: Destination{Pattern: PatternQueues, Channel: "QUEUE.x", Bare: true}, egress: "/QUEUE/x"},

		// Bare destinations under each valid default pattern.
		{raw: "/orders/created", def: PatternEvents, ok: true, want: Destination{Pattern: PatternEvents, Channel: "orders.created", Bare: true}, egress: "/orders/created"},
		{raw: "/orders/created", def: PatternEventsStore, ok: true, want: Destination{Pattern: PatternEventsStore, Channel: "orders.created", Bare: true}, egress: "/orders/created"},
		{raw: "/orders/created", def: PatternQueues, ok: true, want: Destination{Pattern: PatternQueues, Channel: "orders.created", Bare: true}, egress: "/orders/created"},
		{raw: "orders", def: PatternQueues, ok: true, want: Destination{Pattern: PatternQueues, Channel: "orders", Bare: true}, egress: "/orders"},
		{raw: "/orders.created", def: PatternEvents, ok: true, want: Destination{Pattern: PatternEvents, Channel: "orders.created", Bare: true}, egress: "/orders/created"},
		{raw: "/a.topic/x", def: PatternEvents, ok: true, want: Destination{Pattern: PatternEvents, Channel: "a.topic.x", Bare: true}, egress: "/a/topic/x"},
		// ... never commands, queries, temp-queue or an invalid pattern.
		{raw: "/orders/created", def: PatternCommands},
		{raw: "/orders/created", def: PatternQueries},
		{raw: "/orders/created", def: PatternTempQueue},
		{raw: "/orders/created", def: 0},
		{raw: "/orders/created", def: 99},
		// ... but the default is irrelevant to a prefixed destination.
		{raw: "/queue/x", def: PatternCommands, ok: true, want: Destination{Pattern: PatternQueues, Channel: "x"}, egress: "/queue/x"},
		// Bare destination whose first dot-token is a prefix: its egress would be prefixed.
		{raw: "/queue.jobs", def: PatternEvents},
		{raw: "/topic.a/b", def: PatternEvents},
		{raw: "temp-queue.x", def: PatternQueues},

		// Empty segments and prefixes without a channel.
		{raw: ""},
		{raw: "/"},
		{raw: "//"},
		{raw: "//x", def: PatternEvents},
		{raw: "//topic/x"},
		{raw: "/topic//x"},
		{raw: "/topic/x/"},
		{raw: "/x/", def: PatternEvents},
		{raw: "/queue"},
		{raw: "/queue/"},
		{raw: "queue"},
		{raw: "/temp-queue"},
		{raw: "/events-store/"},

		// Empty dot tokens (Titan decision).
		{raw: "/topic/a..b"},
		{raw: "/topic/.a"},
		{raw: "/topic/a."},
		{raw: "/topic/a./b"},
		{raw: "/topic/a/.b"},
		{raw: "/topic/."},
		{raw: ".x", def: PatternEvents},

		// Control characters.
		{raw: "/topic/a\x00b"},
		{raw: "/topic/a\nb"},
		{raw: "/topic/a\rb"},
		{raw: "/topic/a\tb"},
		{raw: "/topic/a\x7fb"},
		{raw: "/x\x1f", def: PatternEvents},
		{raw: "/topic/a b", ok: true, want: ev("a b"), egress: "/topic/a b"},
		{raw: "/topic/grüße", ok: true, want: ev("grüße"), egress: "/topic/grüße"},

		// Length: raw ≤ 512 bytes, measured before the slash is stripped.
		{raw: long("/topic/", 512), ok: true, want: ev(strings.Repeat("x", 512-7)), egress: long("/topic/", 512)},
		{raw: long("/topic/", 513)},
		{raw: long("topic/", 512), ok: true, want: ev(strings.Repeat("x", 512-6)), egress: "/" + long("topic/", 512)},
		{raw: long("topic/", 513)},
		{raw: long("/", 512), def: PatternQueues, ok: true, want: Destination{Pattern: PatternQueues, Channel: strings.Repeat("x", 511), Bare: true}, egress: long("/", 512)},
		{raw: long("/", 513), def: PatternQueues},
		{raw: strings.Repeat("x", 512), def: PatternQueues, ok: true, want: Destination{Pattern: PatternQueues, Channel: strings.Repeat("x", 512), Bare: true}, egress: "/" + strings.Repeat("x", 512)},
		{raw: strings.Repeat("x", 513), def: PatternQueues},

		// Wildcards: SEND-style Parse rejects them everywhere.
		{raw: "/topic/orders/*"},
		{raw: "/topic/orders/>"},
		{raw: "/topic/orders.*"},
		{raw: "/*/x", def: PatternEvents},
		// Only a whole token is a wildcard.
		{raw: "/topic/a*", ok: true, want: ev("a*"), egress: "/topic/a*"},
		{raw: "/topic/a>/b", ok: true, want: ev("a>.b"), egress: "/topic/a>/b"},
		{raw: "/topic/a/*b", filter: true, ok: true, want: ev("a.*b"), egress: "/topic/a/*b"},

		// ParseFilter: wildcards on events.
		{raw: "/topic/orders/*", filter: true, ok: true, want: Destination{Pattern: PatternEvents, Channel: "orders.*", Wildcard: true}, egress: "/topic/orders/*"},
		{raw: "/topic/orders/>", filter: true, ok: true, want: Destination{Pattern: PatternEvents, Channel: "orders.>", Wildcard: true}, egress: "/topic/orders/>"},
		{raw: "/topic/a/*/c", filter: true, ok: true, want: Destination{Pattern: PatternEvents, Channel: "a.*.c", Wildcard: true}, egress: "/topic/a/*/c"},
		{raw: "/topic/*", filter: true, ok: true, want: Destination{Pattern: PatternEvents, Channel: "*", Wildcard: true}, egress: "/topic/*"},
		{raw: "/topic/>", filter: true, ok: true, want: Destination{Pattern: PatternEvents, Channel: ">", Wildcard: true}, egress: "/topic/>"},
		{raw: "/topic/*/*/>", filter: true, ok: true, want: Destination{Pattern: PatternEvents, Channel: "*.*.>", Wildcard: true}, egress: "/topic/*/*/>"},
		{raw: "/events/orders.*", filter: true, ok: true, want: Destination{Pattern: PatternEvents, Channel: "orders.*", Wildcard: true}, egress: "/topic/orders/*"},
		{raw: "/orders/*", filter: true, def: PatternEvents, ok: true, want: Destination{Pattern: PatternEvents, Channel: "orders.*", Bare: true, Wildcard: true}, egress: "/orders/*"},
		{raw: "/topic/orders", filter: true, ok: true, want: ev("orders"), egress: "/topic/orders"},
		// '>' must be last.
		{raw: "/topic/>/x", filter: true},
		{raw: "/topic/a/>/b", filter: true},
		{raw: "/topic/a.>.b", filter: true},
		// Wildcards outside events.
		{raw: "/queue/jobs/*", filter: true},
		{raw: "/queues/jobs/>", filter: true},
		{raw: "/events-store/x/*", filter: true},
		{raw: "/store/x/>", filter: true},
		{raw: "/command/x/*", filter: true},
		{raw: "/query/x/*", filter: true},
		{raw: "/temp-queue/*", filter: true},
		{raw: "/orders/*", filter: true, def: PatternQueues},
		{raw: "/orders/>", filter: true, def: PatternEventsStore},
		// ParseFilter applies every other rule too.
		{raw: "/topic//*", filter: true},
		{raw: "/topic/", filter: true},
		{raw: "/topic/a\n/*", filter: true},
		{raw: long("/topic/", 513), filter: true},
	}
	for _, tc := range cases {
		name := tc.raw
		if len(name) > 40 {
			name = fmt.Sprintf("%s...(%d bytes)", name[:20], len(name))
		}
		fn, fname := Parse, "Parse"
		if tc.filter {
			fn, fname = ParseFilter, "ParseFilter"
		}
		got, err := fn(tc.raw, tc.def)
		if !tc.ok {
			if err == nil {
				t.Errorf("%s(%q, %v) = %+v, want ErrInvalid", fname, name, tc.def, got)
			} else if !errors.Is(err, ErrInvalid) {
				t.Errorf("%s(%q, %v) error %v is not ErrInvalid", fname, name, tc.def, err)
			} else if got != (Destination{}) {
				t.Errorf("%s(%q, %v) returned %+v with an error", fname, name, tc.def, got)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s(%q, %v): %v", fname, name, tc.def, err)
			continue
		}
		if got != tc.want {
			t.Errorf("%s(%q, %v) = %+v, want %+v", fname, name, tc.def, got, tc.want)
		}
		if s := got.String(); s != tc.egress {
			t.Errorf("%s(%q).String() = %q, want %q", fname, name, s, tc.egress)
		}
		if b := got.Append([]byte("x")); string(b) != "x"+tc.egress {
			t.Errorf("%s(%q).Append = %q, want %q", fname, name, b, "x"+tc.egress)
		}
		// ParseFilter accepts everything Parse accepts, identically.
		if !tc.filter {
			f, err := ParseFilter(tc.raw, tc.def)
			if err != nil || f != got {
				t.Errorf("ParseFilter(%q) = %+v, %v; Parse gave %+v", name, f, err, got)
			}
		}
	}
}

func TestParseErrorText(t *testing.T) {
	_, err := Parse("/topic//x", PatternEvents)
	if !errors.Is(err, ErrInvalid) {
		t.Fatalf("error %v is not ErrInvalid", err)
	}
	requireEqual(t, ErrInvalid.Error(), "invalid destination", "wire text")
	if !strings.HasPrefix(err.Error(), "invalid destination: ") {
		t.Fatalf("error %q carries no detail", err)
	}
}

// TestSameIdentity checks the equivalences DESIGN §2 states: the literal-dot trap, the
// optional leading slash and aliases all resolve to one identity.
func TestSameIdentity(t *testing.T) {
	groups := [][]string{
		{"/topic/a.b", "/topic/a/b", "topic/a/b", "/events/a.b", "events/a/b"},
		{"/queue/x/y", "queue/x.y", "/queues/x/y"},
		{"/events-store/s", "/store/s", "store/s"},
	}
	for _, g := range groups {
		first, err := Parse(g[0], PatternEvents)
		if err != nil {
			t.Fatal(err)
		}
		for _, raw := range g[1:] {
			d, err := Parse(raw, PatternEvents)
			if err != nil || d != first {
				t.Errorf("Parse(%q) = %+v, %v; want %+v", raw, d, err, first)
			}
		}
	}
}

func TestPattern(t *testing.T) {
	names := map[Pattern][2]string{
		PatternEvents:      {"events", "topic"},
		PatternEventsStore: {"events-store", "events-store"},
		PatternQueues:      {"queues", "queue"},
		PatternCommands:    {"commands", "command"},
		PatternQueries:     {"queries", "query"},
		PatternTempQueue:   {"temp-queue", "temp-queue"},
	}
	for p, n := range names {
		requireEqual(t, p.String(), n[0], "String")
		requireEqual(t, p.Prefix(), n[1], "Prefix")
		requireEqual(t, p.Valid(), true, "Valid")
		got, ok := ParsePattern(n[0])
		requireEqual(t, ok, true, "ParsePattern ok "+n[0])
		requireEqual(t, got, p, "ParsePattern "+n[0])
		b, err := p.MarshalText()
		requireEqual(t, err, nil, "MarshalText error")
		var q Pattern
		requireEqual(t, q.UnmarshalText(b), nil, "UnmarshalText error")
		requireEqual(t, q, p, "UnmarshalText")
	}
	for _, bad := range []string{"", "topic", "queue", "Events", "events ", "store", "temp_queue"} {
		if p, ok := ParsePattern(bad); ok {
			t.Errorf("ParsePattern(%q) = %v, want !ok", bad, p)
		}
	}
	var q Pattern
	if q.UnmarshalText([]byte("topic")) == nil {
		t.Error("UnmarshalText(topic) succeeded")
	}
	for _, p := range []Pattern{0, MaxPattern + 1, 255} {
		requireEqual(t, p.Valid(), false, "Valid")
		requireEqual(t, p.Prefix(), "", "Prefix")
		if _, err := p.MarshalText(); err == nil {
			t.Errorf("MarshalText(%d) succeeded", p)
		}
	}
	requireEqual(t, Pattern(0).String(), "pattern(0)", "String(0)")
	for p := Pattern(0); p <= MaxPattern+1; p++ {
		want := p == PatternEvents || p == PatternEventsStore || p == PatternQueues
		requireEqual(t, ValidDefault(p), want, "ValidDefault("+p.String()+")")
	}
	requireEqual(t, Destination{}.String(), "", "zero Destination String")
	requireEqual(t, string(Destination{}.Append(nil)), "", "zero Destination Append")
}

func TestMatch(t *testing.T) {
	cases := []struct {
		filter, channel string
		want            bool
	}{
		{"orders", "orders", true},
		{"orders", "orders.eu", false},
		{"orders.eu", "orders", false},
		{"orders.*", "orders.eu", true},
		{"orders.*", "orders", false},
		{"orders.*", "orders.eu.x", false},
		{"orders.>", "orders.eu", true},
		{"orders.>", "orders.eu.x.y", true},
		{"orders.>", "orders", false}, // > needs at least one token
		{"orders.>", "ordersx.eu", false},
		{">", "a", true},
		{">", "a.b.c", true},
		{"*", "a", true},
		{"*", "a.b", false},
		{"*.b", "a.b", true},
		{"a.*.c", "a.b.c", true},
		{"a.*.c", "a.b.d", false},
		{"a.*.c", "a.c", false},
		{"*.*.>", "a.b.c", true},
		{"*.*.>", "a.b", false},
		{"*.>", "a.b", true},
		{"a.*.>", "a.b", false},
		{"a.*.>", "a.b.c", true},
		{"a*", "ab", false}, // literal token
		{"a*", "a*", true},
		{"a.>.b", "a.x.b", false}, // non-final '>' matches nothing
		{"a.#", "a", true},        // '#' takes zero or more tokens
		{"a.#", "a.b.c", true},
		{"#", "a", true},
		{"#", "a.b", true},
		{"#.eu", "eu", true},
		{"#.eu", "x.y.eu", true},
		{"#.eu", "x.eu.y", false},
		{"a.#.c", "a.c", true},
		{"a.#.c", "a.b.b.c", true},
		{"a.#.c", "a.b.c.d", false},
		{"a.#.*", "a", false},
		{"a.#.*", "a.b", true},
		{"#.a.#.b", "x.a.y.a.z.b", true},
		{"#.a.#.b", "x.a.y.b.z", false},
		{"a.b", "a.b.", false},
		{"", "", true},
		{"orders", "order", false},
		{"order", "orders", false},
	}
	for _, tc := range cases {
		if got := Match(tc.filter, tc.channel); got != tc.want {
			t.Errorf("Match(%q, %q) = %v, want %v", tc.filter, tc.channel, got, tc.want)
		}
	}
}

// matchRef is the obvious recursive reading of the wildcard rule, to check Match against.
func matchRef(filter, channel string) bool {
	return matchToks(strings.Split(filter, "."), strings.Split(channel, "."))
}

func matchToks(ft, ct []string) bool {
	if len(ft) == 0 {
		return len(ct) == 0
	}
	switch f := ft[0]; {
	case f == "#":
		for k := 0; k <= len(ct); k++ { // '#' takes k tokens
			if matchToks(ft[1:], ct[k:]) {
				return true
			}
		}
		return false
	case f == ">":
		return len(ft) == 1 && len(ct) > 0
	case len(ct) == 0:
		return false
	case f != "*" && f != ct[0]:
		return false
	}
	return matchToks(ft[1:], ct[1:])
}

// TestMatchExhaustive compares Match with matchRef over every pair of strings of up to three
// tokens from a small alphabet, malformed ones included.
func TestMatchExhaustive(t *testing.T) {
	toks := []string{"a", "b", "ab", "*", ">", "#", ""}
	all := []string{}
	level := []string{""}
	for range 3 {
		var next []string
		for _, p := range level {
			for _, tk := range toks {
				if p == "" && len(all) == 0 {
					next = append(next, tk)
				} else {
					next = append(next, p+"."+tk)
				}
			}
		}
		all = append(all, next...)
		level = next
	}
	for _, f := range all {
		for _, c := range all {
			if got, want := Match(f, c), matchRef(f, c); got != want {
				t.Fatalf("Match(%q, %q) = %v, want %v", f, c, got, want)
			}
		}
	}
}

func TestValidGroup(t *testing.T) {
	valid := []string{"default", "a", "A-b_9", strings.Repeat("g", 64), "0"}
	invalid := []string{"", strings.Repeat("g", 65), "a b", "a.b", "a/b", "grüße", "a\n", "a:b", "*"}
	for _, g := range valid {
		requireEqual(t, ValidGroup(g), true, "ValidGroup("+g+")")
	}
	for _, g := range invalid {
		requireEqual(t, ValidGroup(g), false, "ValidGroup("+g+")")
	}
	requireEqual(t, ValidGroup(DefaultGroup), true, "ValidGroup(DefaultGroup)")
}

func TestAllocs(t *testing.T) {
	var sink Destination
	one := testing.AllocsPerRun(100, func() { sink, _ = Parse("/topic/orders", PatternEvents) })
	requireEqual(t, one, 0, "allocs Parse one segment")
	dot := testing.AllocsPerRun(100, func() { sink, _ = Parse("/queue/orders.eu.created", PatternEvents) })
	requireEqual(t, dot, 0, "allocs Parse dotted segment")
	bare := testing.AllocsPerRun(100, func() { sink, _ = Parse("orders", PatternQueues) })
	requireEqual(t, bare, 0, "allocs Parse bare")
	three := testing.AllocsPerRun(100, func() { sink, _ = Parse("/queue/orders/eu/created", PatternEvents) })
	requireEqual(t, three, 1, "allocs Parse three segments")
	m := testing.AllocsPerRun(100, func() { _ = Match("orders.*.x.>", "orders.eu.x.y.z") })
	requireEqual(t, m, 0, "allocs Match")
	buf := make([]byte, 0, 64)
	d, _ := Parse("/queue/orders/eu", PatternEvents)
	a := testing.AllocsPerRun(100, func() { buf = d.Append(buf[:0]) })
	requireEqual(t, a, 0, "allocs Append")
	// A temp-queue's MESSAGEs carry the name its owner used, appended without a string.
	tq := Identity{Group: DefaultGroup, Pattern: PatternTempQueue, Channel: "titan-1.replies.eu"}
	requireEqual(t, string(tq.AppendOwnerDestination(nil)), tq.OwnerDestination(), "AppendOwnerDestination")
	requireEqual(t, tq.OwnerDestination(), "/temp-queue/replies/eu", "OwnerDestination")
	o := testing.AllocsPerRun(100, func() { buf = tq.AppendOwnerDestination(buf[:0]) })
	requireEqual(t, o, 0, "allocs AppendOwnerDestination")
	_ = sink
}

func FuzzParse(f *testing.F) {
	for _, s := range []string{
		"/topic/a/b/c", "/topic/a.b", "queue/x", "/orders/created", "/topic/orders/*",
		"/topic/orders/>", "/topic/>/x", "//x", "/queue/", "/queue.jobs", "/store/x", "a..b", "",
	} {
		f.Add(s, uint8(PatternEvents), false)
		f.Add(s, uint8(PatternQueues), true)
	}
	f.Fuzz(func(t *testing.T, raw string, def uint8, filter bool) {
		fn := Parse
		if filter {
			fn = ParseFilter
		}
		d, err := fn(raw, Pattern(def))
		if err != nil {
			if !errors.Is(err, ErrInvalid) || d != (Destination{}) {
				t.Fatalf("bad error result %+v, %v", d, err)
			}
			return
		}
		if len(raw) > MaxBytes || !d.Pattern.Valid() || d.Channel == "" || strings.Contains(d.Channel, "/") {
			t.Fatalf("accepted %q as %+v", raw, d)
		}
		for tok := range strings.SplitSeq(d.Channel, ".") {
			if tok == "" {
				t.Fatalf("empty token in %+v from %q", d, raw)
			}
		}
		if d.Wildcard && (!filter || d.Pattern != PatternEvents) {
			t.Fatalf("wildcard accepted: %+v from %q", d, raw)
		}
		// Egress round-trips to the same identity.
		eg := d.String()
		if len(eg) <= MaxBytes {
			d2, err := fn(eg, Pattern(def))
			if err != nil || d2 != d {
				t.Fatalf("egress %q of %q reparses to %+v, %v; want %+v", eg, raw, d2, err, d)
			}
		}
		// A concrete channel matches itself.
		if !d.Wildcard && !Match(d.Channel, d.Channel) {
			t.Fatalf("channel %q does not match itself", d.Channel)
		}
	})
}

var benchSink Destination

func BenchmarkParse(b *testing.B) {
	for _, bc := range []struct{ name, raw string }{
		{"one-segment", "/topic/orders"},
		{"dotted-segment", "/topic/orders.eu.created"},
		{"three-segments", "/queue/orders/eu/created"},
		{"bare", "/orders/created"},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				d, err := Parse(bc.raw, PatternEvents)
				if err != nil {
					b.Fatal(err)
				}
				benchSink = d
			}
		})
	}
	b.Run("filter", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			benchSink, _ = ParseFilter("/topic/orders.*.created.>", PatternEvents)
		}
	})
}

var boolSink bool

func BenchmarkMatch(b *testing.B) {
	for _, bc := range []struct{ name, filter, channel string }{
		{"exact", "orders.eu.created", "orders.eu.created"},
		{"star", "orders.*.created", "orders.eu.created"},
		{"tail", "orders.>", "orders.eu.created.v2"},
		{"miss", "orders.*.deleted", "orders.eu.created"},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				boolSink = Match(bc.filter, bc.channel)
			}
		})
	}
}

func BenchmarkString(b *testing.B) {
	d, _ := Parse("/queue/orders/eu/created", PatternEvents)
	buf := make([]byte, 0, 128)
	b.Run("String", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_ = d.String()
		}
	})
	b.Run("Append", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			buf = d.Append(buf[:0])
		}
	})
}

func BenchmarkValidGroup(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		boolSink = ValidGroup("tenant-42_eu")
	}
}

// TestPeerSpellings holds the peers' destination spellings (issue 26) to the pattern and
// channel Titan routes them by, for SEND (Parse) and SUBSCRIBE (ParseFilter).
func TestPeerSpellings(t *testing.T) {
	q := func(ch string) Destination { return Destination{Pattern: PatternQueues, Channel: ch} }
	cases := []struct {
		raw    string
		filter bool
		ok     bool
		want   Destination
		egress string
	}{
		{raw: "/exchange/amq.topic/orders.eu", ok: true, want: ev("orders.eu"), egress: "/topic/orders/eu"},
		{raw: "/exchange/amq.topic/orders/eu", ok: true, want: ev("orders.eu"), egress: "/topic/orders/eu"},
		{raw: "/exchange/amq.topic/orders.*", filter: true, ok: true, want: Destination{Pattern: PatternEvents, Channel: "orders.*", Wildcard: true}},
		{raw: "/exchange/amq.topic/orders.#", filter: true, ok: true, want: Destination{Pattern: PatternEvents, Channel: "orders.#", Wildcard: true}},
		{raw: "/exchange/amq.topic/#", filter: true, ok: true, want: Destination{Pattern: PatternEvents, Channel: "#", Wildcard: true}},
		{raw: "/exchange/amq.topic/#.eu", filter: true, ok: true, want: Destination{Pattern: PatternEvents, Channel: "#.eu", Wildcard: true}}, // '#' anywhere
		{raw: "/exchange/amq.topic/a.#.*.#", filter: true, ok: true, want: Destination{Pattern: PatternEvents, Channel: "a.#.*.#", Wildcard: true}},
		{raw: "/topic/#.#.#.#.#.#.#.#", filter: true, ok: true, want: Destination{Pattern: PatternEvents, Channel: "#.#.#.#.#.#.#.#", Wildcard: true}},
		{raw: "/topic/#.#.#.#.#.#.#.#.#", filter: true},             // more than MaxHashes
		{raw: "/exchange/amq.topic/orders.*"},                       // no wildcard on SEND
		{raw: "/exchange/amq.topic/a.#", ok: true, want: ev("a.#")}, // a SEND's '#' is literal
		{raw: "/exchange/amq.direct/jobs", ok: true, want: ev("jobs"), egress: "/topic/jobs"},
		{raw: "/exchange/amq.direct/jobs.*", filter: true}, // direct keys are exact
		{raw: "/exchange/amq.topic"},
		{raw: "/exchange/amq.topic/"},
		{raw: "/amq/queue/jobs", ok: true, want: q("jobs"), egress: "/queue/jobs"},
		{raw: "/amq/queue/"},
		{raw: "/reply-queue/r1", ok: true, want: Destination{Pattern: PatternTempQueue, Channel: "r1"}, egress: "/temp-queue/r1"},
		{raw: "queue://jobs", ok: true, want: q("jobs"), egress: "/queue/jobs"},
		{raw: "topic://orders.eu", ok: true, want: ev("orders.eu"), egress: "/topic/orders/eu"},
		{raw: "topic://orders.#", filter: true, ok: true, want: Destination{Pattern: PatternEvents, Channel: "orders.#", Wildcard: true}},
		{raw: "/topic/orders/#", filter: true, ok: true, want: Destination{Pattern: PatternEvents, Channel: "orders.#", Wildcard: true}},
		{raw: "/topic/#/eu", filter: true, ok: true, want: Destination{Pattern: PatternEvents, Channel: "#.eu", Wildcard: true}},
		{raw: "/queue/jobs/#", filter: true}, // wildcards are for events only
		{raw: "queue://"},
	}
	for _, c := range cases {
		parse := Parse
		if c.filter {
			parse = ParseFilter
		}
		d, err := parse(c.raw, PatternEvents)
		if (err == nil) != c.ok {
			t.Errorf("%q (filter %v): err %v, want ok %v", c.raw, c.filter, err, c.ok)
			continue
		}
		if !c.ok {
			if !errors.Is(err, ErrInvalid) {
				t.Errorf("%q: err %v is not ErrInvalid", c.raw, err)
			}
			continue
		}
		if d != c.want {
			t.Errorf("%q: got %+v, want %+v", c.raw, d, c.want)
		}
		if c.egress != "" && d.String() != c.egress {
			t.Errorf("%q: egress %q, want %q", c.raw, d.String(), c.egress)
		}
	}
}

// TestUnsupportedExchange: an exchange other than amq.topic and amq.direct is refused with
// an error that names it (issue 26), on SEND and SUBSCRIBE.
func TestUnsupportedExchange(t *testing.T) {
	for _, parse := range []func(string, Pattern) (Destination, error){Parse, ParseFilter} {
		_, err := parse("/exchange/amq.fanout/x", PatternEvents)
		var xe *ExchangeError
		if !errors.Is(err, ErrUnsupportedExchange) || !errors.As(err, &xe) || xe.Name != "amq.fanout" {
			t.Fatalf("err %v, want ErrUnsupportedExchange naming amq.fanout", err)
		}
	}
}
