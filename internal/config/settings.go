package config

import (
	"sort"
	"strings"
	"time"

	"github.com/titan-broker/titan/internal/address"
	"github.com/titan-broker/titan/internal/dest"
)

// MatchAddress reports whether an address-setting match covers the dot channel: `#` matches
// zero or more words, `*` exactly one, any other word itself (ActiveMQ Artemis wildcard
// syntax, reference 002).
func MatchAddress(match, channel string) bool {
	return matchWords(strings.Split(match, "."), strings.Split(channel, "."))
}

func matchWords(m, c []string) bool {
	for len(m) > 0 {
		switch m[0] {
		case "#":
			if len(m) == 1 {
				return true
			}
			for i := 0; i <= len(c); i++ {
				if matchWords(m[1:], c[i:]) {
					return true
				}
			}
			return false
		case "*":
			if len(c) == 0 {
				return false
			}
		default:
			if len(c) == 0 || c[0] != m[0] {
				return false
			}
		}
		m, c = m[1:], c[1:]
	}
	return len(c) == 0
}

// specificity orders matches as Artemis does: more literal words first, then more `*`, then
// fewer `#`.
func specificity(match string) int {
	s := 0
	for _, w := range strings.Split(match, ".") {
		switch w {
		case "#":
			s--
		case "*":
			s += 100
		default:
			s += 10000
		}
	}
	return s
}

// Resolver computes the settings of traffic-created queues from address settings. It is
// immutable and safe for concurrent use.
type Resolver struct {
	settings        []AddressSetting // sorted least specific first
	maxPendingBytes int64
}

// NewResolver builds a resolver over c's address settings and flow-control defaults.
func NewResolver(c *Config) *Resolver {
	s := append([]AddressSetting(nil), c.AddressSettings...)
	sort.SliceStable(s, func(i, j int) bool { return specificity(s[i].Match) < specificity(s[j].Match) })
	return &Resolver{settings: s, maxPendingBytes: c.FlowControl.Queue.MaxPendingBytes}
}

// DropWhenFull reports whether the events destination id has slow-consumer-policy DROP (the
// most specific matching address setting that sets it decides). Implements
// event.DropPolicy.
func (r *Resolver) DropWhenFull(id dest.Identity) bool {
	drop := false
	for _, a := range r.settings {
		if a.SlowConsumerPolicy != "" && MatchAddress(a.Match, id.Channel) {
			drop, _ = ParseSlowConsumerPolicy(a.SlowConsumerPolicy)
		}
	}
	return drop
}

// HasDropPolicy reports whether any address setting sets slow-consumer-policy DROP.
func (r *Resolver) HasDropPolicy() bool {
	for _, a := range r.settings {
		if d, _ := ParseSlowConsumerPolicy(a.SlowConsumerPolicy); d {
			return true
		}
	}
	return false
}

// Settings returns the effective settings for a queue of id created by traffic: built-in
// defaults, then every matching address setting from least to most specific, each overriding
// the fields it sets. Match names the most specific setting that applied ("" for none).
func (r *Resolver) Settings(id dest.Identity) address.Settings {
	qs := address.Defaults(id)
	if id.Pattern != dest.PatternEvents {
		qs.MaxPendingBytes = r.maxPendingBytes
	}
	for _, a := range r.settings {
		if !MatchAddress(a.Match, id.Channel) {
			continue
		}
		qs.Match = a.Match
		if a.DefaultRingSize != nil && id.Pattern == dest.PatternQueues {
			qs.RingSize = *a.DefaultRingSize
		}
		if a.DefaultMaxPendingMessages != nil {
			qs.Capacity = *a.DefaultMaxPendingMessages
		}
		if a.MaxPendingBytes != nil {
			qs.MaxPendingBytes = *a.MaxPendingBytes
		}
		if a.AddressFullPolicy != "" {
			qs.FullPolicy, _ = address.ParseFullPolicy(a.AddressFullPolicy)
		}
		if a.BlockTimeout != nil {
			qs.BlockTimeout = time.Duration(*a.BlockTimeout) * time.Millisecond
		}
		if a.MaxDeliveries != nil {
			qs.MaxDeliveries = *a.MaxDeliveries
		}
		if a.DeadLetter != "" {
			qs.DeadLetter = a.DeadLetter
		}
		if a.RetentionMaxMessages != nil {
			qs.RetentionMaxMessages = *a.RetentionMaxMessages
		}
		if a.RetentionMaxBytes != nil {
			qs.RetentionMaxBytes = *a.RetentionMaxBytes
		}
		if a.RetentionMaxAge != "" {
			qs.RetentionMaxAge, _ = time.ParseDuration(a.RetentionMaxAge)
		}
		if a.RedeliveryDelay != nil {
			qs.RedeliveryDelay = time.Duration(*a.RedeliveryDelay) * time.Millisecond
		}
	}
	return qs
}
