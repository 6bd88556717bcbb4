package sublist

import (
	"strings"
	"sync"

	"github.com/titan-broker/titan/internal/dest"
)

// Cache bounds. When a miss would store entry number cacheMaxEntries, the miss first sweeps
// the cache down to cacheSweepEntries (arbitrary entries), so
// the sweep costs O(cacheMaxEntries) once every cacheMaxEntries-cacheSweepEntries misses.
const (
	cacheMaxEntries   = 1024
	cacheSweepEntries = 512
)

// setMinEntries is the subscriber count above which a node adds a map index to its slice, so
// Insert and Remove stay O(1) on a filter with many subscribers while the common node with
// one or a few subscribers costs only a slice.
const setMinEntries = 16

// Sublist is an index from channel filters to subscribers of type T: a trie over the
// channel's dot-separated tokens, with a literal child map and a '*' and a '>' child at each
// level (after nats-server's server/sublist.go, credited in prose; this is not a copy). It
// answers "which subscribers match this concrete channel" in time proportional to the
// channel's token count and the number of matching wildcard branches, not the number of
// subscriptions.
//
// Filters and channels follow dest's grammar (see the package doc). The index holds a set of
// (filter, v) pairs: inserting the same pair twice stores it once. A subscriber inserted under
// two different filters that both match a channel is reported twice.
//
// Match results are cached per channel, at most about 1024 entries. An Insert or Remove that
// changes the index patches the cached results it affects instead of dropping the cache
// (after nats-server's addToCache/removeFromCache): a filter without wildcards touches the
// one entry keyed by that channel, a wildcard filter every entry whose channel it matches.
// A generation counter, bumped by every change, keeps a Match that raced a change from
// storing a result computed before it.
//
// A Sublist is safe for concurrent use. The zero value is not usable; call New.
type Sublist[T comparable] struct {
	mu sync.RWMutex
	// Guarded by mu:
	root  level[T]
	count int    // distinct (filter, v) pairs
	gen   uint64 // bumped by every Insert/Remove that changes the index
	cache map[string]cacheEntry[T]
}

// cacheEntry is one cached Match result, kept exact by Insert and Remove. subs is never
// modified after it is stored (it is clipped, so even an append would copy): a patch stores
// a new slice, so a Match iterating the old one outside the lock is not disturbed.
type cacheEntry[T comparable] struct {
	subs []T
}

// level is one token position of the trie.
type level[T comparable] struct {
	nodes map[string]*node[T] // literal tokens; nil until the first one
	pwc   *node[T]            // "*" child
	fwc   *node[T]            // ">" child
	hwc   *node[T]            // "#" child (zero or more tokens)
}

func (l *level[T]) empty() bool {
	return len(l.nodes) == 0 && l.pwc == nil && l.fwc == nil && l.hwc == nil
}

// node is the end of one filter prefix: the subscribers whose filter ends here, and the level
// of the next token.
type node[T comparable] struct {
	next *level[T] // nil until a longer filter passes through
	subs []T
	idx  map[T]int // position in subs; nil while len(subs) <= setMinEntries
}

func (n *node[T]) empty() bool { return len(n.subs) == 0 && (n.next == nil || n.next.empty()) }

func (n *node[T]) find(v T) int {
	if n.idx != nil {
		if i, ok := n.idx[v]; ok {
			return i
		}
		return -1
	}
	for i, s := range n.subs {
		if s == v {
			return i
		}
	}
	return -1
}

// add appends v, which is not yet present.
func (n *node[T]) add(v T) {
	n.subs = append(n.subs, v)
	if n.idx != nil {
		n.idx[v] = len(n.subs) - 1
	} else if len(n.subs) > setMinEntries {
		n.idx = make(map[T]int, len(n.subs))
		for i, s := range n.subs {
			n.idx[s] = i
		}
	}
}

// del removes the subscriber at position i by moving the last one into its place.
func (n *node[T]) del(i int) {
	last := len(n.subs) - 1
	v := n.subs[i]
	if i != last {
		n.subs[i] = n.subs[last]
		if n.idx != nil {
			n.idx[n.subs[i]] = i
		}
	}
	var zero T
	n.subs[last] = zero // drop the reference for the GC
	n.subs = n.subs[:last]
	if n.idx != nil {
		delete(n.idx, v)
		if len(n.subs) <= setMinEntries/2 {
			n.idx = nil
		}
	}
	if len(n.subs) == 0 {
		n.subs = nil
	}
}

// New returns an empty Sublist.
func New[T comparable]() *Sublist[T] {
	return &Sublist[T]{cache: make(map[string]cacheEntry[T])}
}

// child returns the node for token tok on level l, nil if there is none.
func (l *level[T]) child(tok string) *node[T] {
	switch tok {
	case "*":
		return l.pwc
	case ">":
		return l.fwc
	case "#":
		return l.hwc
	}
	return l.nodes[tok]
}

// Insert adds subscriber v under filter, a dot-separated channel that may hold the wildcard
// tokens "*", ">" and "#" (a Destination.Channel from dest.ParseFilter). Inserting a (filter, v)
// pair that is already present does nothing. filter is copied; the caller may reuse its
// memory. Filters that dest.ParseFilter would reject are stored with dest.Match's meaning: a
// '>' that is not the last token makes the filter match nothing, empty tokens are literal.
//
// Insert takes the write lock; when it changes the index it patches the cached results of
// the channels filter matches.
func (s *Sublist[T]) Insert(filter string, v T) {
	s.mu.Lock()
	defer s.mu.Unlock()
	l := &s.root
	var n *node[T]
	for rest, more := filter, true; more; {
		var tok string
		tok, rest, more = strings.Cut(rest, ".")
		n = l.child(tok)
		if n == nil {
			n = &node[T]{}
			switch tok {
			case "*":
				l.pwc = n
			case ">":
				l.fwc = n
			case "#":
				l.hwc = n
			default:
				if l.nodes == nil {
					l.nodes = make(map[string]*node[T])
				}
				l.nodes[strings.Clone(tok)] = n
			}
		}
		if more {
			if n.next == nil {
				n.next = &level[T]{}
			}
			l = n.next
		}
	}
	if n.find(v) >= 0 {
		return
	}
	n.add(v)
	s.count++
	s.gen++
	s.patchLocked(filter, func(subs []T) []T { return append(subs[:len(subs):len(subs)], v) })
}

// patchLocked replaces the cached result of every channel filter matches by edit(result):
// the entry keyed by filter when it has no wildcard, else every matching entry. edit must
// return a new slice (never write into its argument). s.mu held for writing.
func (s *Sublist[T]) patchLocked(filter string, edit func([]T) []T) {
	if !hasWildcard(filter) {
		if e, ok := s.cache[filter]; ok {
			e.subs = clip(edit(e.subs))
			s.cache[filter] = e
		}
		return
	}
	for ch, e := range s.cache {
		if filterMatches(filter, ch) {
			e.subs = clip(edit(e.subs))
			s.cache[ch] = e
		}
	}
}

func clip[T any](s []T) []T {
	if len(s) == 0 {
		return nil
	}
	return s[:len(s):len(s)]
}

// without returns a copy of subs with one occurrence of v removed (a subscriber inserted
// under two matching filters appears once per filter).
func without[T comparable](subs []T, v T) []T {
	for i, s := range subs {
		if s == v {
			out := make([]T, 0, len(subs)-1)
			out = append(out, subs[:i]...)
			return append(out, subs[i+1:]...)
		}
	}
	return subs
}

// hasWildcard reports whether filter has a "*", ">" or "#" token.
func hasWildcard(filter string) bool {
	for rest, more := filter, true; more; {
		var tok string
		tok, rest, more = strings.Cut(rest, ".")
		if tok == "*" || tok == ">" || tok == "#" {
			return true
		}
	}
	return false
}

// filterMatches reports whether filter matches the concrete channel by the trie's rule,
// which is dest.Match's: "*" is one token, ">" the rest (one token or more) and only as the
// last token, "#" zero or more tokens anywhere; other tokens are literal.
func filterMatches(filter, channel string) bool { return dest.Match(filter, channel) }

// tokenEnd returns the offset of the '.' ending the token that starts at i in s, or len(s).
func tokenEnd(s string, i int) int {
	if j := strings.IndexByte(s[i:], '.'); j >= 0 {
		return i + j
	}
	return len(s)
}

// Remove deletes the pair (filter, v) inserted by Insert and reports whether it was present.
// Nodes and levels left without subscribers or children are pruned, so an index that has
// every filter removed again holds no memory beyond the root.
//
// Remove takes the write lock; when it changes the index it patches the cached results of
// the channels filter matches.
func (s *Sublist[T]) Remove(filter string, v T) bool {
	s.mu.Lock()
	defer s.mu.Unlock()

	// Walk down, remembering each (level, token) so empty nodes can be pruned bottom-up.
	type step struct {
		l   *level[T]
		tok string
	}
	var pathArr [16]step
	path := pathArr[:0]
	l := &s.root
	var n *node[T]
	for rest, more := filter, true; more; {
		var tok string
		tok, rest, more = strings.Cut(rest, ".")
		n = l.child(tok)
		if n == nil {
			return false
		}
		path = append(path, step{l, tok})
		if more {
			if n.next == nil {
				return false
			}
			l = n.next
		}
	}
	i := n.find(v)
	if i < 0 {
		return false
	}
	n.del(i)
	s.count--
	s.gen++
	s.patchLocked(filter, func(subs []T) []T { return without(subs, v) })

	for k := len(path) - 1; k >= 0; k-- {
		st := path[k]
		c := st.l.child(st.tok)
		if !c.empty() {
			break
		}
		switch st.tok {
		case "*":
			st.l.pwc = nil
		case ">":
			st.l.fwc = nil
		case "#":
			st.l.hwc = nil
		default:
			delete(st.l.nodes, st.tok)
			if len(st.l.nodes) == 0 {
				st.l.nodes = nil
			}
		}
		if k > 0 {
			// The parent's next level may now be empty: drop it so the parent can be pruned.
			if parent := path[k-1].l.child(path[k-1].tok); parent.next.empty() {
				parent.next = nil
			}
		}
	}
	return true
}

// Match calls fn once for each subscriber whose filter matches the concrete channel (a
// Destination.Channel from dest.Parse): exact filters and wildcard filters alike, with the
// rule of dest.Match. A subscriber is reported once per matching (filter, v) pair, in no
// particular order. channel is only read; Match keeps a private copy when it caches a result.
//
// fn runs after the lock is released, over a snapshot taken when Match began, so it may call
// Insert, Remove or Match on the same Sublist; a change it makes is seen by the next Match.
//
// Match takes the read lock. A cache hit does not allocate; a miss walks the trie, allocates
// the result slice and briefly takes the write lock to store it.
func (s *Sublist[T]) Match(channel string, fn func(T)) {
	s.mu.RLock()
	e, hit := s.cache[channel]
	if hit {
		s.mu.RUnlock()
		for _, v := range e.subs {
			fn(v)
		}
		return
	}
	gen := s.gen
	var subs []T
	subs = s.root.match(channel, subs)
	s.mu.RUnlock()

	subs = subs[:len(subs):len(subs)]
	s.mu.Lock()
	if s.gen == gen { // no change since the walk: subs is still exact
		s.storeLocked(channel, subs)
	}
	s.mu.Unlock()

	for _, v := range subs {
		fn(v)
	}
}

// storeLocked caches subs for channel, sweeping the cache first when it is full. s.mu must be
// held for writing.
func (s *Sublist[T]) storeLocked(channel string, subs []T) {
	if e, ok := s.cache[channel]; ok {
		// Reuse the stored key: only the value changes.
		e.subs = subs
		s.cache[channel] = e
		return
	}
	if len(s.cache) >= cacheMaxEntries {
		for k := range s.cache {
			if len(s.cache) <= cacheSweepEntries {
				break
			}
			delete(s.cache, k)
		}
	}
	s.cache[strings.Clone(channel)] = cacheEntry[T]{subs: subs}
}

// walk is one trie walk for Match: it collects the nodes whose filter matches the channel.
// A '#' node lets the walk reach the same level at the same channel position, and the same
// node, along several paths; seen (made at the first '#') makes each (level, position) be
// walked once and each node be reported once, so a subscriber is still reported once per
// (filter, v) pair and the walk stays polynomial.
type walk[T comparable] struct {
	nodes []*node[T]
	seen  map[visit[T]]struct{}
}

// visit is a walk's memo key: a level entered at a channel position (n nil), or a node
// reported (l nil).
type visit[T comparable] struct {
	l   *level[T]
	n   *node[T]
	pos int
}

// first reports whether k is new to the walk and records it; always true before any '#'.
func (w *walk[T]) first(k visit[T]) bool {
	if w.seen == nil {
		return true
	}
	if _, ok := w.seen[k]; ok {
		return false
	}
	w.seen[k] = struct{}{}
	return true
}

// match walks level l over channel[pos:] (at least one token: pos <= len(channel)).
func (w *walk[T]) match(l *level[T], channel string, pos int) {
	if !w.first(visit[T]{l: l, pos: pos}) {
		return
	}
	end := tokenEnd(channel, pos)
	if l.fwc != nil {
		// '>' matches this token and everything after it.
		w.report(l.fwc)
	}
	if l.hwc != nil {
		w.hash(l.hwc, channel, pos)
	}
	if l.pwc != nil {
		w.rest(l.pwc, channel, end+1)
	}
	if n := l.nodes[channel[pos:end]]; n != nil {
		w.rest(n, channel, end+1)
	}
}

// rest continues at n after it took a token: n's filter ends here when the channel does,
// else its next level goes on at pos.
func (w *walk[T]) rest(n *node[T], channel string, pos int) {
	if pos > len(channel) {
		w.end(n)
		return
	}
	if n.next != nil {
		w.match(n.next, channel, pos)
	}
}

// end reports n, whose filter prefix has used up the channel, and the '#' filters under it
// (each '#' taking no token).
func (w *walk[T]) end(n *node[T]) {
	w.report(n)
	if n.next != nil && n.next.hwc != nil {
		w.end(n.next.hwc)
	}
}

// hash walks the '#' node h at channel[pos:]: h takes zero, one, … or all remaining tokens.
func (w *walk[T]) hash(h *node[T], channel string, pos int) {
	if w.seen == nil {
		w.seen = make(map[visit[T]]struct{})
	}
	for p := pos; p <= len(channel); p = tokenEnd(channel, p) + 1 {
		if h.next != nil {
			w.match(h.next, channel, p) // h took the tokens before p
		}
	}
	w.end(h) // h took them all
}

func (w *walk[T]) report(n *node[T]) {
	if len(n.subs) > 0 && w.first(visit[T]{n: n}) {
		w.nodes = append(w.nodes, n)
	}
}

// match appends to out the subscribers of every filter under l that matches channel.
func (l *level[T]) match(channel string, out []T) []T {
	var w walk[T]
	w.match(l, channel, 0)
	for _, n := range w.nodes {
		out = append(out, n.subs...)
	}
	return out
}

// Count returns the number of distinct (filter, v) pairs in the index. It takes the read
// lock.
func (s *Sublist[T]) Count() int {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.count
}
