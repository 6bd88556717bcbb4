package cluster

import (
	"slices"
	"strings"

	"github.com/titan-broker/titan/internal/dest"
)

// Subject kinds: the third token of every subject (t.<group>.<kind>.…). A bare
// destination is a different identity from its prefixed form, so it has kinds of its own.
const (
	// KindEvents and KindEventsBare are events subjects.
	KindEvents     = "ev"
	KindEventsBare = "evb"
	// KindQueue and KindQueueBare are queue subjects.
	KindQueue     = "q"
	KindQueueBare = "qb"
	// KindSchedule holds scheduled (delay) queue messages until JetStream's scheduler
	// appends them to their queue's subject.
	KindSchedule = "qs"
	// KindStore and KindStoreBare are events-store logs.
	KindStore     = "es"
	KindStoreBare = "esb"
)

// kindOf returns the subject kind of a pattern's identity.
func kindOf(p dest.Pattern, bare bool) string {
	switch {
	case p == dest.PatternEventsStore && bare:
		return KindStoreBare
	case p == dest.PatternEventsStore:
		return KindStore
	case p == dest.PatternQueues && bare:
		return KindQueueBare
	case p == dest.PatternQueues:
		return KindQueue
	case bare:
		return KindEventsBare
	}
	return KindEvents
}

// Subject returns the NATS subject of id: t.<group>.<kind>.<tok1>.<tok2>…, one subject
// token per channel segment, each encoded by AppendToken. For an events SUBSCRIBE filter,
// wildcard tokens "*" and ">" stay wildcards: Titan's grammar is NATS's (one token, one or
// more trailing tokens), so a filter matches exactly the subjects its channels map to.
func Subject(id dest.Identity) string { return SubjectOf(id, kindOf(id.Pattern, id.Bare)) }

// FilterSubject returns the NATS subject a node subscribes to for an events SUBSCRIBE
// filter id, and exact, whether NATS's match on it is the filter's own. NATS has no
// zero-or-more wildcard, so a filter with a '#' token (RabbitMQ's and Artemis's: zero or
// more tokens anywhere; dest.Match) subscribes to a wider subject — the tokens before the
// first '#' but the last of them, then ">" (every channel of at least that many tokens with
// that prefix) — and exact is false: the caller must check each message's channel against
// the filter with dest.Match. Without a '#' it is Subject(id) and exact is true.
func FilterSubject(id dest.Identity) (subject string, exact bool) {
	toks := strings.Split(id.Channel, ".")
	k := slices.Index(toks, "#")
	if k < 0 {
		return Subject(id), true
	}
	wide := id
	if k == 0 {
		wide.Channel = ">"
	} else {
		wide.Channel = strings.Join(append(toks[:k-1:k-1], ">"), ".")
	}
	return Subject(wide), false
}

// SubjectOf is Subject with the kind token given (ring queues and events-store retention
// classes have kinds of their own: placement.go).
func SubjectOf(id dest.Identity, kind string) string {
	var b strings.Builder
	b.Grow(8 + len(id.Group) + len(id.Channel)*2)
	b.WriteString("t.")
	b.WriteString(id.Group)
	b.WriteByte('.')
	b.WriteString(kind)
	for tok := range strings.SplitSeq(id.Channel, ".") {
		b.WriteByte('.')
		if tok == "*" || tok == ">" {
			b.WriteString(tok)
			continue
		}
		AppendToken(&b, tok)
	}
	return b.String()
}

// AppendToken writes tok with every byte outside [A-Za-z0-9_-] percent-encoded (%XX), so a
// literal "*", ">", "%", space or UTF-8 byte inside a segment never becomes NATS syntax
// and the mapping stays reversible. Titan channels have no empty segment (dest.Parse).
func AppendToken(b *strings.Builder, tok string) {
	const hex = "0123456789ABCDEF"
	for i := 0; i < len(tok); i++ {
		c := tok[i]
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-' {
			b.WriteByte(c)
			continue
		}
		b.WriteByte('%')
		b.WriteByte(hex[c>>4])
		b.WriteByte(hex[c&15])
	}
}

// StreamName is the WorkQueue stream of a group's queues with one partition (with more,
// partition k's is StreamName_P<k>: PlaceQueue).
func StreamName(group string) string { return "TITAN_" + group + "_Q" }

// QueueSubjects are the subjects of a group's queue stream with one partition.
func QueueSubjects(group string) []string {
	return []string{"t." + group + "." + KindQueue + ".>", "t." + group + "." + KindQueueBare + ".>", "t." + group + "." + KindSchedule + ".>"}
}

// StoreStreamName is the Limits stream of a group's events-store logs with one partition
// (with more, partition k's is StoreStreamName_P<k>: PlaceLog).
func StoreStreamName(group string) string { return "TITAN_" + group + "_ES" }

// IdentityOfSubject is Subject's inverse for a queue subject (t.<group>.q.<tokens> or
// t.<group>.qb.<tokens>, and a ring queue's t.<group>.r<N>.<tokens> or rb<N>, each also
// with a partition's _<k> suffix: q_3, rb10_3): it undoes AppendToken's percent-encoding.
func IdentityOfSubject(subject string) (dest.Identity, bool) {
	parts := strings.SplitN(subject, ".", 4)
	if len(parts) != 4 || parts[0] != "t" {
		return dest.Identity{}, false
	}
	id := dest.Identity{Group: parts[1], Pattern: dest.PatternQueues}
	switch splitKind(parts[2]) { // a partition's kind is its class's with _<k> (partition.go)
	case KindQueue:
	case KindQueueBare:
		id.Bare = true
	default:
		switch k := splitKind(parts[2]); {
		case len(k) > 2 && k[:2] == "rb" && digits(k[2:]):
			id.Bare = true
		case len(k) > 1 && k[0] == 'r' && digits(k[1:]):
		default:
			return dest.Identity{}, false
		}
	}
	toks := strings.Split(parts[3], ".")
	for i, tok := range toks {
		dec, ok := DecodeToken(tok)
		if !ok {
			return dest.Identity{}, false
		}
		toks[i] = dec
	}
	id.Channel = strings.Join(toks, ".")
	return id, true
}

// DecodeToken undoes AppendToken.
func DecodeToken(tok string) (string, bool) {
	if !strings.Contains(tok, "%") {
		return tok, true
	}
	var b strings.Builder
	for i := 0; i < len(tok); i++ {
		if tok[i] != '%' {
			b.WriteByte(tok[i])
			continue
		}
		if i+2 >= len(tok) {
			return "", false
		}
		hi, lo := unhex(tok[i+1]), unhex(tok[i+2])
		if hi < 0 || lo < 0 {
			return "", false
		}
		b.WriteByte(byte(hi<<4 | lo))
		i += 2
	}
	return b.String(), true
}

func unhex(c byte) int {
	switch {
	case c >= '0' && c <= '9':
		return int(c - '0')
	case c >= 'A' && c <= 'F':
		return int(c-'A') + 10
	case c >= 'a' && c <= 'f':
		return int(c-'a') + 10
	}
	return -1
}

func digits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return s != ""
}
