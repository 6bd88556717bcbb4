package delivery

import (
	"strconv"
	"time"
)

// Flow control on an events subscription's unacknowledged count (DESIGN §9): a client-ack
// events subscription at its prefetch does not lose messages; the producer feeding it
// waits for an ACK (the same pause as for a connection over its pending-bytes watermark),
// and a subscriber that leaves producers waiting for SlowAfter without acknowledging is
// closed as a slow consumer.

// SlowCloser is implemented by writers (the session) that can close their connection as a
// slow consumer: an ERROR carrying detail is written and the connection closes. It must
// not block and may be called more than once.
type SlowCloser interface {
	CloseSlowConsumer(detail string)
}

// EventCreditWait is EventCredit for a producer ready to wait: ok reports credit now; when
// there is none and the subscription is open, wait is closed as soon as an acknowledgement
// frees credit or the subscription ends. While a wait is outstanding and slowAfter > 0, a
// timer closes the subscriber's connection as a slow consumer (SlowCloser) if no credit
// came back within slowAfter; the waiting producers are then released and later calls
// report the subscription closed. ok false with wait nil means the subscription is closed
// (or was closed as a slow consumer).
func (s *Subscription) EventCreditWait(slowAfter time.Duration) (ok bool, wait <-chan struct{}) {
	c := s.Conn
	c.mu.Lock()
	defer c.mu.Unlock()
	if s.closed || c.closed || s.slow {
		return false, nil
	}
	if s.Ack == AckAuto || len(s.pending)+s.acking < s.Prefetch {
		return true, nil
	}
	if s.creditWait == nil {
		ch := make(chan struct{})
		s.creditWait = ch
		if sc, isCloser := c.w.(SlowCloser); isCloser && slowAfter > 0 {
			s.creditTimer = time.AfterFunc(slowAfter, func() {
				c.mu.Lock()
				still := s.creditWait == ch
				if still {
					// The waiting producers go on now, without this subscriber: its
					// connection closes only once the ERROR is written (or the write
					// times out, if the client reads nothing).
					s.slow = true
					s.releaseCreditLocked()
				}
				c.mu.Unlock()
				if still {
					sc.CloseSlowConsumer("subscription " + s.ID + " kept " + strconv.Itoa(s.Prefetch) +
						" messages unacknowledged (its prefetch) for " + slowAfter.String() +
						" while producers waited (flow-control slow-consumer-timeout)")
				}
			})
		}
	}
	return false, s.creditWait
}

// releaseCreditLocked wakes the producers waiting for s's credit (an acknowledgement
// freed some, or s ended) and stops its slow-consumer timer. c.mu held.
func (s *Subscription) releaseCreditLocked() {
	if s.creditWait == nil {
		return
	}
	close(s.creditWait)
	s.creditWait = nil
	if s.creditTimer != nil {
		s.creditTimer.Stop()
		s.creditTimer = nil
	}
}
