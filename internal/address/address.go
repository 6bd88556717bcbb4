// Package address holds address settings (DESIGN §4, Artemis "address-settings"): the limits
// and behaviour of one dispatcher queue (capacity, max-pending-bytes, address-full policy,
// ring size, redelivery, dead-letter, retention) and their built-in defaults. It is pure
// data with no runtime state, so configuration can speak of it without importing the
// messaging core.
package address

import (
	"fmt"
	"strings"
	"time"

	"github.com/titan-broker/titan/internal/dest"
)

// FullPolicy is what a queue does with a SEND when it is full (DESIGN §4, Artemis
// "address-full-policy").
type FullPolicy uint8

// Address-full policies.
const (
	// PolicyBlock stops reading the producer's connection until there is room, up to the
	// block timeout, then fails like PolicyFail.
	PolicyBlock FullPolicy = iota
	// PolicyFail refuses the SEND with an ERROR (receipt-id echoed) and closes the
	// connection, as STOMP requires after ERROR.
	PolicyFail
	// PolicyDrop discards the message and counts it.
	PolicyDrop
)

// ParseFullPolicy maps "BLOCK", "FAIL", "DROP" (any case) to a FullPolicy.
func ParseFullPolicy(s string) (FullPolicy, error) {
	switch strings.ToUpper(strings.TrimSpace(s)) {
	case "", "BLOCK":
		return PolicyBlock, nil
	case "FAIL":
		return PolicyFail, nil
	case "DROP":
		return PolicyDrop, nil
	}
	return 0, fmt.Errorf("address: unknown address-full-policy %q (want BLOCK, FAIL or DROP)", s)
}

// String returns the config spelling.
func (p FullPolicy) String() string {
	switch p {
	case PolicyFail:
		return "FAIL"
	case PolicyDrop:
		return "DROP"
	}
	return "BLOCK"
}

// MarshalText implements encoding.TextMarshaler.
func (p FullPolicy) MarshalText() ([]byte, error) { return []byte(p.String()), nil }

// Defaults for queues created by traffic (DESIGN §4).
const (
	// DefaultEventsCapacity is the hand-off capacity of an events queue in messages
	// (reference 000's DispatcherQueue.DEFAULT_CAPACITY).
	DefaultEventsCapacity = 11
	// DefaultMaxPendingBytes bounds a queues-pattern queue (Titan's flow-control default).
	DefaultMaxPendingBytes = 64 << 20
	// DefaultBlockTimeout bounds how long PolicyBlock stalls a producer.
	DefaultBlockTimeout = 30 * time.Second
	// DefaultMaxDeliveries dead-letters a queue message after this many deliveries unless an
	// address setting says otherwise (ActiveMQ Artemis's max-delivery-attempts default).
	DefaultMaxDeliveries = 10
	// DefaultPrefetch is the unacknowledged-delivery limit of a subscription that sets no
	// prefetch-count.
	DefaultPrefetch = 1000
)

// Settings are the limits and behaviour of one queue. Queues created by traffic take
// them from the matching address setting; queues created explicitly keep their creator's.
type Settings struct {
	// Capacity bounds the messages held (0: no count limit).
	Capacity int
	// MaxPendingBytes bounds the bytes held (0: no byte limit).
	MaxPendingBytes int64
	// FullPolicy decides what happens to a SEND when the queue is full.
	FullPolicy FullPolicy
	// BlockTimeout bounds PolicyBlock's stall (0: DefaultBlockTimeout).
	BlockTimeout time.Duration
	// RingSize > 0 makes a ring queue of that many messages (reference 002); <= 0: none.
	RingSize int
	// MaxDeliveries dead-letters a message after this many deliveries (0: unlimited).
	MaxDeliveries int
	// DeadLetter is the destination dead letters go to ("": /queue/DLQ.<channel>).
	DeadLetter string
	// RedeliveryDelay delays redelivery after NACK (0: at once).
	RedeliveryDelay time.Duration
	// RetentionMaxMessages, RetentionMaxBytes and RetentionMaxAge bound an events-store log:
	// older messages beyond any of them are trimmed (0: no bound).
	RetentionMaxMessages int64
	RetentionMaxBytes    int64
	RetentionMaxAge      time.Duration
	// Match is the address-setting match these settings came from ("" when explicit or
	// built-in defaults).
	Match string
}

// UnmarshalText implements encoding.TextUnmarshaler (see ParseFullPolicy).
func (p *FullPolicy) UnmarshalText(b []byte) error {
	v, err := ParseFullPolicy(string(b))
	if err != nil {
		return err
	}
	*p = v
	return nil
}

// BlockTimeoutInForce is how long PolicyBlock stalls a producer: BlockTimeout, or
// DefaultBlockTimeout when BlockTimeout is 0 (or negative).
func (s Settings) BlockTimeoutInForce() time.Duration {
	if s.BlockTimeout <= 0 {
		return DefaultBlockTimeout
	}
	return s.BlockTimeout
}

// Defaults returns the built-in settings of a traffic-created queue for id (DESIGN §4): an
// events hand-off buffer of DefaultEventsCapacity messages, a queues-pattern queue bounded
// by DefaultMaxPendingBytes that dead-letters after DefaultMaxDeliveries, and a byte bound
// for everything else. The policy is BLOCK throughout.
func Defaults(id dest.Identity) Settings {
	if id.Pattern.Valid() {
		return defaults[id.Pattern]
	}
	return Settings{MaxPendingBytes: DefaultMaxPendingBytes, FullPolicy: PolicyBlock}
}

// defaults are the built-in settings by pattern (see Defaults).
var defaults = [dest.MaxPattern + 1]Settings{
	dest.PatternEvents:      {Capacity: DefaultEventsCapacity, FullPolicy: PolicyBlock},
	dest.PatternQueues:      {MaxPendingBytes: DefaultMaxPendingBytes, FullPolicy: PolicyBlock, MaxDeliveries: DefaultMaxDeliveries},
	dest.PatternEventsStore: {MaxPendingBytes: DefaultMaxPendingBytes, FullPolicy: PolicyBlock},
	dest.PatternCommands:    {MaxPendingBytes: DefaultMaxPendingBytes, FullPolicy: PolicyBlock},
	dest.PatternQueries:     {MaxPendingBytes: DefaultMaxPendingBytes, FullPolicy: PolicyBlock},
	dest.PatternTempQueue:   {MaxPendingBytes: DefaultMaxPendingBytes, FullPolicy: PolicyBlock},
}
