package sublist

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"unsafe"

	"github.com/titan-broker/titan/internal/dest"
)

func requireEqual[T comparable](t testing.TB, got, want T, what string) {
	t.Helper()
	if got != want {
		t.Fatalf("%s = %v, want %v", what, got, want)
	}
}

// matched returns Match's subscribers for channel, sorted.
func matched[T interface{ ~int | ~string }](s *Sublist[T], channel string) []T {
	var out []T
	s.Match(channel, func(v T) { out = append(out, v) })
	slices.Sort(out)
	return out
}

func requireMatch[T interface{ ~int | ~string }](t *testing.T, s *Sublist[T], channel string, want ...T) {
	t.Helper()
	slices.Sort(want)
	// Twice: the first call may miss the cache, the second must hit it with the same answer.
	for i := range 2 {
		if got := matched(s, channel); !slices.Equal(got, want) {
			t.Fatalf("Match(%q) call %d = %v, want %v", channel, i+1, got, want)
		}
	}
}

func TestExact(t *testing.T) {
	s := New[string]()
	s.Insert("orders", "a")
	s.Insert("orders.eu", "b")
	s.Insert("orders.eu", "c")
	s.Insert("orders.eu.created", "d")
	requireMatch(t, s, "orders", "a")
	requireMatch(t, s, "orders.eu", "b", "c")
	requireMatch(t, s, "orders.eu.created", "d")
	requireMatch[string](t, s, "orders.us")
	requireMatch[string](t, s, "order")
	requireMatch[string](t, s, "orders.eu.created.v2")
	requireMatch[string](t, s, "eu")
	requireEqual(t, s.Count(), 4, "Count")
}

func TestStar(t *testing.T) {
	s := New[string]()
	s.Insert("orders.*", "star")
	s.Insert("*.eu", "lead")
	s.Insert("a.*.c", "mid")
	s.Insert("*", "one")
	requireMatch(t, s, "orders.eu", "star", "lead")
	requireMatch(t, s, "orders.us", "star")
	requireMatch(t, s, "orders", "one")
	requireMatch[string](t, s, "orders.eu.x")
	requireMatch(t, s, "a.b.c", "mid")
	requireMatch[string](t, s, "a.c")
	requireMatch(t, s, "x.eu", "lead")
	requireMatch(t, s, "*", "one") // a literal "*" token is still one token
}

func TestTail(t *testing.T) {
	s := New[string]()
	s.Insert("orders.>", "tail")
	s.Insert(">", "all")
	s.Insert("orders.eu.>", "eutail")
	requireMatch(t, s, "orders", "all") // "orders.>" needs at least one more token
	requireMatch(t, s, "orders.eu", "tail", "all")
	requireMatch(t, s, "orders.eu.created", "tail", "all", "eutail")
	requireMatch(t, s, "orders.eu.created.v2.x", "tail", "all", "eutail")
	requireMatch(t, s, "x", "all")
	requireMatch(t, s, "ordersx.eu", "all")
}

func TestMixed(t *testing.T) {
	s := New[int]()
	filters := []string{"a.b.c", "a.*.c", "a.>", "*.b.>", "*.*.*", ">", "a.b", "a.*", "*.b.c", "a.b.*"}
	for i, f := range filters {
		s.Insert(f, i)
	}
	for _, ch := range []string{"a", "a.b", "a.b.c", "a.x.c", "x.b.c", "a.b.c.d", "z.z.z", "a.b.d"} {
		var want []int
		for i, f := range filters {
			if dest.Match(f, ch) {
				want = append(want, i)
			}
		}
		requireMatch(t, s, ch, want...)
	}
}

// TestHash holds the '#' wildcard (RabbitMQ's and Artemis's) to its rule: zero or more
// tokens in any position, one report per (filter, v) pair however many ways it matches.
func TestHash(t *testing.T) {
	s := New[string]()
	for _, f := range []string{"a.#", "#", "#.eu", "a.#.c", "#.#", "a.#.#.c", "a.>", "#.a.#.b"} {
		s.Insert(f, f)
	}
	requireMatch(t, s, "a", "a.#", "#", "#.#")
	requireMatch(t, s, "a.c", "a.#", "#", "#.#", "a.#.c", "a.#.#.c", "a.>")
	requireMatch(t, s, "a.b.b.c", "a.#", "#", "#.#", "a.#.c", "a.#.#.c", "a.>")
	requireMatch(t, s, "eu", "#", "#.eu", "#.#")
	requireMatch(t, s, "x.a.y.a.z.b", "#", "#.#", "#.a.#.b")
	requireMatch(t, s, "x.y", "#", "#.#")
	// A long channel against many '#' stays a polynomial walk.
	long := strings.Repeat("a.", 200) + "z"
	requireMatch(t, s, long, "a.#", "#", "#.#", "a.>")
	requireEqual(t, s.Remove("#.#", "#.#"), true, "Remove #.#")
	requireEqual(t, s.Remove("a.#", "a.#"), true, "Remove a.#")
	requireMatch(t, s, "a", "#")
}

func TestDuplicates(t *testing.T) {
	s := New[string]()
	s.Insert("a.*", "x")
	s.Insert("a.*", "x") // same pair: stored once
	s.Insert("a.>", "x") // other filter, same subscriber: a second subscription
	requireEqual(t, s.Count(), 2, "Count")
	requireMatch(t, s, "a.b", "x", "x")
	requireEqual(t, s.Remove("a.*", "x"), true, "Remove a.*")
	requireEqual(t, s.Remove("a.*", "x"), false, "Remove a.* again")
	requireMatch(t, s, "a.b", "x")
}

func TestRemovePrunes(t *testing.T) {
	s := New[int]()
	filters := []string{"a.b.c", "a.b", "a.*.c", "a.>", "*", ">", "x.y.z.w", "a.b.c.d.e"}
	for i, f := range filters {
		s.Insert(f, i)
		s.Insert(f, i+100)
	}
	requireEqual(t, s.Count(), 2*len(filters), "Count")
	requireEqual(t, s.Remove("a.b.c", 999), false, "Remove unknown subscriber")
	requireEqual(t, s.Remove("a.b.q", 0), false, "Remove unknown filter")
	requireEqual(t, s.Remove("a.b.c.d", 0), false, "Remove filter through a missing level")
	requireEqual(t, s.Remove("q", 0), false, "Remove unknown literal")

	requireEqual(t, s.Remove("a.b.c", 0), true, "Remove a.b.c 0")
	requireMatch(t, s, "a.b.c", 100, 2, 102, 3, 103, 5, 105)
	requireEqual(t, s.Remove("a.b.c", 100), true, "Remove a.b.c 100")
	requireMatch(t, s, "a.b.c", 2, 102, 3, 103, 5, 105)
	// a.b.c.d.e still hangs below a.b.c, so the emptied node stays.
	requireEqual(t, s.root.nodes["a"].next.nodes["b"].next.nodes["c"] != nil, true, "a.b.c kept")
	requireMatch(t, s, "a.b.c.d.e", 7, 107, 3, 103, 5, 105)

	for i, f := range filters {
		s.Remove(f, i)
		s.Remove(f, i+100)
	}
	requireEqual(t, s.Count(), 0, "Count")
	requireEqual(t, s.root.empty(), true, "root empty after removing everything")
	requireEqual(t, s.root.nodes == nil, true, "root literal map dropped")
	requireMatch[int](t, s, "a.b.c")
}

func TestRemoveBigNode(t *testing.T) {
	s := New[int]()
	const n = 200 // well above setMinEntries: exercises the map index
	for i := range n {
		s.Insert("hot.topic", i)
		s.Insert("hot.topic", i) // duplicate, ignored
	}
	requireEqual(t, s.Count(), n, "Count")
	for i := 0; i < n; i += 2 {
		requireEqual(t, s.Remove("hot.topic", i), true, "Remove "+strconv.Itoa(i))
	}
	var want []int
	for i := 1; i < n; i += 2 {
		want = append(want, i)
	}
	requireMatch(t, s, "hot.topic", want...)
	for i := 1; i < n; i += 2 {
		requireEqual(t, s.Remove("hot.topic", i), true, "Remove "+strconv.Itoa(i))
	}
	requireEqual(t, s.root.empty(), true, "root empty")
}

func TestCache(t *testing.T) {
	s := New[int]()
	s.Insert("a.*", 1)
	requireMatch(t, s, "a.b", 1)
	// Inserts and removes invalidate cached results, including negative ones.
	requireMatch[int](t, s, "c.d")
	s.Insert("c.>", 2)
	requireMatch(t, s, "c.d", 2)
	requireMatch(t, s, "a.b", 1)
	s.Insert("a.b", 3)
	requireMatch(t, s, "a.b", 1, 3)
	s.Remove("a.*", 1)
	requireMatch(t, s, "a.b", 3)

	// The cache stays bounded.
	for i := range 5 * cacheMaxEntries {
		s.Match("c."+strconv.Itoa(i), func(int) {})
		if len(s.cache) > cacheMaxEntries {
			t.Fatalf("cache grew to %d entries", len(s.cache))
		}
	}

	// A hit does not allocate.
	s.Match("c.hot", func(int) {})
	sum := 0
	fn := func(v int) { sum += v }
	allocs := testing.AllocsPerRun(100, func() { s.Match("c.hot", fn) })
	requireEqual(t, allocs, 0, "allocs per cache hit")
}

// TestCacheKeyCopied checks that the cache does not keep a caller's channel memory, which in
// Titan often points into a reusable read buffer.
func TestCacheKeyCopied(t *testing.T) {
	s := New[int]()
	s.Insert("a.b", 1)
	buf := []byte("a.b")
	ch := unsafeString(buf)
	requireMatch(t, s, ch, 1)
	copy(buf, "x.y")
	requireMatch[int](t, s, "x.y")
	requireMatch(t, s, "a.b", 1)
}

func unsafeString(b []byte) string { return unsafe.String(&b[0], len(b)) }

func TestReentrantCallback(t *testing.T) {
	s := New[int]()
	s.Insert("a", 1)
	s.Insert("a", 2)
	var seen []int
	s.Match("a", func(v int) {
		seen = append(seen, v)
		s.Remove("a", v) // must not deadlock
		s.Insert("b", v)
	})
	requireEqual(t, len(seen), 2, "callbacks")
	requireMatch[int](t, s, "a")
	requireMatch(t, s, "b", 1, 2)
}

// randFilter returns a filter over a small alphabet, so collisions and wildcards are
// frequent. About one in twenty is malformed (a '>' before the end, an empty token), which
// Sublist must treat exactly as dest.Match does.
func randFilter(r *rand.Rand) string {
	n := 1 + r.IntN(4)
	toks := make([]string, n)
	for i := range toks {
		switch x := r.IntN(40); {
		case x < 8:
			toks[i] = "*"
		case x < 12 && i == n-1, x == 12:
			toks[i] = ">"
		case x == 13:
			toks[i] = ""
		case x < 19:
			toks[i] = "#"
		default:
			toks[i] = string(rune('a' + r.IntN(3)))
		}
	}
	return strings.Join(toks, ".")
}

// randChannel returns a concrete channel; rarely one with an empty token or a literal "*".
func randChannel(r *rand.Rand) string {
	n := 1 + r.IntN(5)
	toks := make([]string, n)
	for i := range toks {
		switch r.IntN(60) {
		case 0:
			toks[i] = ""
		case 1:
			toks[i] = "*"
		default:
			toks[i] = string(rune('a' + r.IntN(3)))
		}
	}
	return strings.Join(toks, ".")
}

type pair struct {
	filter string
	v      int
}

// TestMatchAgreesWithDestMatch is the property test: after random inserts and removes, Match
// returns exactly the subscribers of the stored pairs whose filter dest.Match accepts.
func TestMatchAgreesWithDestMatch(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for round := range 20 {
		s := New[int]()
		live := map[pair]bool{}
		for step := range 2000 {
			p := pair{randFilter(r), r.IntN(8)}
			if r.IntN(3) == 0 {
				requireEqual(t, s.Remove(p.filter, p.v), live[p], fmt.Sprintf("round %d step %d Remove(%q,%d)", round, step, p.filter, p.v))
				delete(live, p)
			} else {
				s.Insert(p.filter, p.v)
				live[p] = true
			}
			if step%50 != 0 {
				continue
			}
			requireEqual(t, s.Count(), len(live), "Count")
			for range 20 {
				ch := randChannel(r)
				var want []int
				for p := range live {
					if dest.Match(p.filter, ch) {
						want = append(want, p.v)
					}
				}
				requireMatch(t, s, ch, want...)
			}
		}
		for p := range live {
			requireEqual(t, s.Remove(p.filter, p.v), true, "final Remove")
		}
		requireEqual(t, s.root.empty(), true, "root empty at end of round")
	}
}

func TestConcurrent(t *testing.T) {
	s := New[int]()
	const workers = 8
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(w), 7))
			mine := map[string]bool{}
			for range 3000 {
				switch r.IntN(3) {
				case 0:
					f := randFilter(r)
					s.Insert(f, w)
					mine[f] = true
				case 1:
					f := randFilter(r)
					if got := s.Remove(f, w); got != mine[f] {
						t.Errorf("worker %d Remove(%q) = %v, want %v", w, f, got, mine[f])
					}
					delete(mine, f)
				default:
					s.Match(randChannel(r), func(int) {})
				}
			}
			for f := range mine {
				s.Remove(f, w)
			}
		})
	}
	wg.Wait()
	requireEqual(t, s.Count(), 0, "Count")
	requireEqual(t, s.root.empty(), true, "root empty")
}

// ---- benchmarks ----

const benchSubs = 100_000

// exactFilters returns n distinct concrete channels shaped like tenant.service.event.id.
func exactFilters(n int) []string {
	fs := make([]string, n)
	for i := range fs {
		fs[i] = "t" + strconv.Itoa(i%50) + ".svc" + strconv.Itoa(i%1000) + ".evt.e" + strconv.Itoa(i)
	}
	return fs
}

func buildIndex(wildcardEvery int) (*Sublist[int], []string) {
	s := New[int]()
	chans := exactFilters(benchSubs)
	for i, f := range chans {
		if wildcardEvery > 0 && i%wildcardEvery == 0 {
			// Replace with a wildcard filter of the same shape.
			toks := strings.Split(f, ".")
			switch (i / wildcardEvery) % 3 {
			case 0:
				toks[3] = "*"
			case 1:
				toks = append(toks[:2], ">")
			default:
				toks[1] = "*"
			}
			s.Insert(strings.Join(toks, "."), i)
			continue
		}
		s.Insert(f, i)
	}
	return s, chans
}

var benchSink int

func BenchmarkMatch(b *testing.B) {
	for _, bc := range []struct {
		name          string
		wildcardEvery int
	}{
		{"exact-100k", 0},
		{"mixed-100k-10pct-wildcard", 10},
	} {
		s, chans := buildIndex(bc.wildcardEvery)
		r := rand.New(rand.NewPCG(3, 4))
		order := r.Perm(len(chans))
		fn := func(v int) { benchSink += v }
		hot := make([]string, 64)
		for i := range hot {
			hot[i] = chans[order[i]]
		}
		b.Run(bc.name+"/miss", func(b *testing.B) {
			// 100k distinct channels in random order against a 1024-entry cache: nearly
			// every call walks the trie.
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				s.Match(chans[order[i%len(order)]], fn)
				i++
			}
		})
		b.Run(bc.name+"/hit", func(b *testing.B) {
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				s.Match(hot[i%len(hot)], fn)
				i++
			}
		})
		b.Run(bc.name+"/hit-parallel", func(b *testing.B) {
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				i := 0
				local := 0
				f := func(v int) { local += v }
				for pb.Next() {
					s.Match(hot[i%len(hot)], f)
					i++
				}
			})
		})
	}
	// Fan-out: one channel matched by many filters.
	b.Run("fanout-1000-subscribers/hit", func(b *testing.B) {
		s, _ := buildIndex(0)
		for i := range 1000 {
			s.Insert("news.>", i)
		}
		b.ReportAllocs()
		fn := func(v int) { benchSink += v }
		for b.Loop() {
			s.Match("news.sport.eu", fn)
		}
	})
}

// BenchmarkScanBaseline is what the trie replaces: dest.Match against every filter.
func BenchmarkScanBaseline(b *testing.B) {
	fs := exactFilters(benchSubs)
	b.ReportAllocs()
	for b.Loop() {
		n := 0
		for _, f := range fs {
			if dest.Match(f, "t7.svc7.evt.e7") {
				n++
			}
		}
		benchSink += n
	}
}

func BenchmarkInsert(b *testing.B) {
	fs := exactFilters(benchSubs)
	b.Run("exact-into-100k", func(b *testing.B) {
		b.ReportAllocs()
		s := New[int]()
		i := 0
		for b.Loop() {
			if i%benchSubs == 0 {
				s = New[int]()
			}
			s.Insert(fs[i%benchSubs], i)
			i++
		}
	})
	b.Run("insert-remove-on-100k", func(b *testing.B) {
		s, _ := buildIndex(10)
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			f := fs[i%benchSubs]
			s.Insert(f, -1)
			s.Remove(f, -1)
			i++
		}
	})
}

// TestCachePatched checks that Insert and Remove keep every cached result exact instead of
// dropping the cache: after each random change, every entry still cached equals what
// dest.Match says of the live pairs, and a warm channel is answered from the cache.
//
// The expected result of each channel (how many live pairs of each value dest.Match says
// match it) is kept up to date as pairs come and go, so a step costs one dest.Match per
// channel rather than one per channel and live pair; every 500 steps it is recomputed from
// the live pairs as well, so the bookkeeping cannot drift from its definition.
func TestCachePatched(t *testing.T) {
	const values = 8
	r := rand.New(rand.NewPCG(3, 4))
	s := New[int]()
	live := map[pair]int{}
	channels := make([]string, 200)
	want := map[string]*[values]int{} // per channel, the live pairs matching it, by value
	for i := range channels {
		channels[i] = randChannel(r)
		want[channels[i]] = new([values]int)
	}
	count := func(p pair, delta int) {
		for ch, w := range want {
			if dest.Match(p.filter, ch) {
				w[p.v] += delta
			}
		}
	}
	for step := range 3000 {
		p := pair{randFilter(r), r.IntN(values)}
		if r.IntN(3) == 0 {
			if s.Remove(p.filter, p.v) {
				if _, ok := live[p]; ok {
					count(p, -1)
				}
				delete(live, p)
			}
		} else {
			s.Insert(p.filter, p.v)
			if _, ok := live[p]; !ok {
				count(p, +1)
			}
			live[p] = 1
		}
		if step%500 == 0 {
			for ch, w := range want {
				var full [values]int
				for p := range live {
					if dest.Match(p.filter, ch) {
						full[p.v]++
					}
				}
				requireEqual(t, *w, full, "step "+strconv.Itoa(step)+": expected result of "+ch)
			}
		}
		if step%10 == 0 {
			for _, ch := range channels {
				s.Match(ch, func(int) {})
			}
		}
		s.mu.RLock()
		entries := len(s.cache)
		for ch, e := range s.cache {
			var got [values]int
			for _, v := range e.subs {
				got[v]++
			}
			if w := want[ch]; w == nil || got != *w {
				s.mu.RUnlock()
				t.Fatalf("step %d: cached %q = %v (count by value), want %v", step, ch, got, w)
			}
		}
		s.mu.RUnlock()
		if step > 0 && step%10 == 0 && entries == 0 {
			t.Fatalf("step %d: the cache was dropped", step)
		}
	}
	// A change leaves the other channels' entries in place: the next Match is a hit.
	s.Match("a.b", func(int) {})
	s.Insert("c.c.c.c.c.c", 99)
	allocs := testing.AllocsPerRun(10, func() { s.Match("a.b", func(int) {}) })
	requireEqual(t, allocs, 0, "allocs per Match of a warm channel after an unrelated Insert")
}

// BenchmarkMatchAfterSubscribe measures what a subscription change costs the publishers: per
// iteration one subscription (exact, or a wildcard over some of the channels) is inserted and
// removed again, then 16 warm channels with subscribers are matched (before patching, every
// change emptied the cache and each Match missed: a trie walk and a new result slice).
func BenchmarkMatchAfterSubscribe(b *testing.B) {
	for _, filter := range []string{"t3.svc3.evt.new", "t3.*.evt.>"} {
		b.Run(map[bool]string{false: "exact", true: "wildcard"}[strings.Contains(filter, "*")], func(b *testing.B) {
			s, chans := buildIndex(10)
			hot := make([]string, 16)
			for i := range hot {
				hot[i] = chans[i*37+1] // i*37+1 is never a multiple of 10: an exact filter's channel
				s.Match(hot[i], func(int) {})
			}
			n := 0
			fn := func(int) { n++ }
			b.ReportAllocs()
			for b.Loop() {
				s.Insert(filter, -1)
				s.Remove(filter, -1)
				for _, ch := range hot {
					s.Match(ch, fn)
				}
			}
			benchSink += n
		})
	}
}
