package dispatch

import (
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"
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
	return 0, fmt.Errorf("dispatch: unknown address-full-policy %q (want BLOCK, FAIL or DROP)", s)
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

// QueueSettings are the limits and behaviour of one queue. Queues created by traffic take
// them from the matching address setting; queues created explicitly keep their creator's.
type QueueSettings struct {
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

// admission is what the address-full policy consults on a queue; every method but countDrop
// runs with the queue's mutex held.
type admission interface {
	deletedLocked() bool
	fullLocked(size int) bool
	fullErrLocked() error
	policyLocked() QueueSettings
	spaceLocked() chan struct{}
	countDrop()
	blockedCount() *atomic.Int32
}

// waitCancel ends a PolicyBlock wait early: cancel when the producer's connection closes,
// stop when the engine closes. Nil channels never fire.
type waitCancel struct {
	cancel <-chan struct{}
	stop   <-chan struct{}
}

// admit applies the address-full policy (DESIGN §4) to a message of size bytes. mu, the
// queue's mutex, is held on entry. It returns with mu still held, and (false, nil), when the
// message may be enqueued; otherwise mu is released and it reports a PolicyDrop discard
// (dropped) or the refusal: ErrQueueDeleted, ErrQueueFull, ErrQueuePaused, ErrCanceled. Under
// PolicyBlock it waits, with mu released, for room (a close of the queue's space channel) up
// to the block timeout, or until w cancels it: the producer's connection is not read
// meanwhile.
func admit(q admission, mu *sync.Mutex, size int, w waitCancel) (dropped bool, err error) {
	var deadline time.Time
	for {
		if q.deletedLocked() {
			mu.Unlock()
			return false, ErrQueueDeleted
		}
		if !q.fullLocked(size) {
			return false, nil
		}
		s := q.policyLocked()
		switch s.FullPolicy {
		case PolicyDrop:
			mu.Unlock()
			q.countDrop()
			return true, nil
		case PolicyFail:
			err := q.fullErrLocked()
			mu.Unlock()
			return false, err
		}
		if deadline.IsZero() {
			bt := s.BlockTimeout
			if bt <= 0 {
				bt = DefaultBlockTimeout
			}
			deadline = time.Now().Add(bt)
		}
		wait := time.Until(deadline)
		if wait <= 0 {
			err := q.fullErrLocked()
			mu.Unlock()
			return false, err
		}
		ch := q.spaceLocked()
		q.blockedCount().Add(1)
		mu.Unlock()
		t := time.NewTimer(wait)
		canceled := false
		select {
		case <-ch:
		case <-t.C:
		case <-w.cancel:
			canceled = true
		case <-w.stop:
			canceled = true
		}
		t.Stop()
		q.blockedCount().Add(-1)
		if canceled {
			return false, ErrCanceled
		}
		mu.Lock()
	}
}
