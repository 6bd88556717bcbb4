package selector

import "unicode/utf8"

// likeElem is one element of a compiled LIKE pattern: a literal rune, _ (one character)
// or % (any run of characters).
type likeElem struct {
	r    rune
	kind uint8 // likeRune, likeOne, likeAny
}

const (
	likeRune uint8 = iota
	likeOne
	likeAny
)

// like is a compiled LIKE pattern. Matching is by characters (runes), not bytes, so _ is
// one character whatever its encoding; it allocates nothing.
type like struct {
	elems []likeElem
}

// compileLike compiles pattern with escape character esc (-1 for none). It reports false
// when the pattern ends with an unused escape character.
func compileLike(pattern string, esc rune) (*like, bool) {
	l := &like{}
	escaped := false
	for _, r := range pattern {
		switch {
		case escaped:
			l.elems = append(l.elems, likeElem{r: r, kind: likeRune})
			escaped = false
		case r == esc:
			escaped = true
		case r == '%':
			if n := len(l.elems); n > 0 && l.elems[n-1].kind == likeAny {
				continue // %% is %
			}
			l.elems = append(l.elems, likeElem{kind: likeAny})
		case r == '_':
			l.elems = append(l.elems, likeElem{kind: likeOne})
		default:
			l.elems = append(l.elems, likeElem{r: r, kind: likeRune})
		}
	}
	return l, !escaped
}

// match reports whether s matches the pattern as a whole. It is the classic wildcard
// matcher with one backtracking point (the latest %), O(len(s)·len(pattern)) at worst.
func (l *like) match(s string) bool {
	pi, si := 0, 0
	star, starS := -1, 0
	for si < len(s) {
		if pi < len(l.elems) {
			e := l.elems[pi]
			switch e.kind {
			case likeAny:
				star, starS = pi, si
				pi++
				continue
			case likeOne:
				_, n := utf8.DecodeRuneInString(s[si:])
				si += n
				pi++
				continue
			default:
				r, n := utf8.DecodeRuneInString(s[si:])
				if r == e.r {
					si += n
					pi++
					continue
				}
			}
		}
		if star < 0 {
			return false
		}
		// Let the latest % take one more character and retry after it.
		_, n := utf8.DecodeRuneInString(s[starS:])
		starS += n
		pi, si = star+1, starS
	}
	for pi < len(l.elems) && l.elems[pi].kind == likeAny {
		pi++
	}
	return pi == len(l.elems)
}
