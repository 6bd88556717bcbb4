package cluster

import (
	"strings"

	"github.com/titan-broker/titan/internal/dest"
)

// Subject kinds: the third token of every subject (t.<group>.<kind>.…). A bare
// destination is a different identity from its prefixed form, so it has kinds of its own.
const (
	kindEvents     = "ev"
	kindEventsBare = "evb"
	kindQueue      = "q"
	kindQueueBare  = "qb"
	// kindSchedule holds scheduled (delay) queue messages until JetStream's scheduler
	// appends them to their queue's subject.
	kindSchedule = "qs"
	// kindStore and kindStoreBare are events-store logs.
	kindStore     = "es"
	kindStoreBare = "esb"
)

// kindOf returns the subject kind of a pattern's identity.
func kindOf(p dest.Pattern, bare bool) string {
	switch {
	case p == dest.PatternEventsStore && bare:
		return kindStoreBare
	case p == dest.PatternEventsStore:
		return kindStore
	case p == dest.PatternQueues && bare:
		return kindQueueBare
	case p == dest.PatternQueues:
		return kindQueue
	case bare:
		return kindEventsBare
	}
	return kindEvents
}

// Subject returns the NATS subject of id: t.<group>.<kind>.<tok1>.<tok2>…, one subject
// token per channel segment, each encoded by encodeToken. For an events SUBSCRIBE filter,
// wildcard tokens "*" and ">" stay wildcards: Titan's grammar is NATS's (one token, one or
// more trailing tokens), so a filter matches exactly the subjects its channels map to.
func Subject(id dest.Identity) string { return subjectOf(id, kindOf(id.Pattern, id.Bare)) }

// subjectOf is Subject with the kind token given (ring queues and events-store retention
// classes have kinds of their own: semantics.go).
func subjectOf(id dest.Identity, kind string) string {
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
		appendToken(&b, tok)
	}
	return b.String()
}

// appendToken writes tok with every byte outside [A-Za-z0-9_-] percent-encoded (%XX), so a
// literal "*", ">", "%", space or UTF-8 byte inside a segment never becomes NATS syntax
// and the mapping stays reversible. Titan channels have no empty segment (dest.Parse).
func appendToken(b *strings.Builder, tok string) {
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

// streamName is the WorkQueue stream of a group's queues.
func streamName(group string) string { return "TITAN_" + group + "_Q" }

// queueSubjects are the subjects of a group's queue stream.
func queueSubjects(group string) []string {
	return []string{"t." + group + "." + kindQueue + ".>", "t." + group + "." + kindQueueBare + ".>", "t." + group + "." + kindSchedule + ".>"}
}

// storeStreamName is the Limits stream of a group's events-store logs.
func storeStreamName(group string) string { return "TITAN_" + group + "_ES" }

// storeSubjects are the subjects of a group's events-store stream.
func storeSubjects(group string) []string {
	return []string{"t." + group + "." + kindStore + ".>", "t." + group + "." + kindStoreBare + ".>"}
}
