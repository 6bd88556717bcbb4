package event

import (
	"github.com/titan-broker/titan/internal/delivery"
)

// awaitCredit delivers f.m to sub, a client-ack subscription that was at its prefetch when
// the message was fanned out: the producer waits (flow.Stats.Wait: counted as a pause) until
// an acknowledgement frees credit, then writes it. Nothing is dropped for a subscriber that
// reads and acknowledges. The wait ends without delivery — counted as dropped, not by
// policy — only when the subscription ends (for example closed as a slow consumer after
// Options.SlowConsumerTimeout without an ACK) or the producer's wait is canceled.
//
// A subscription on the producer's own connection is written to at once, over its
// prefetch: its ACK can only arrive through the connection the producer's wait would
// stop reading.
func (f *fan) awaitCredit(sub *delivery.Subscription, cancel <-chan struct{}) {
	if ownConnection(sub, cancel) {
		f.write(sub, false)
		return
	}
	for {
		ok, wait := sub.EventCreditWait(f.p.opts.SlowConsumerTimeout)
		if ok {
			f.write(sub, false)
			return
		}
		if wait == nil { // the subscription ended
			f.drop(sub, false)
			return
		}
		if !f.p.opts.Flow.Wait([]<-chan struct{}{wait}, cancel, f.p.d.Stop()) {
			f.drop(sub, false)
			return
		}
	}
}

// ownConnection reports whether sub belongs to the connection whose done channel is cancel
// (the publishing connection's; nil for a fanout-mode queue's consumer).
func ownConnection(sub *delivery.Subscription, cancel <-chan struct{}) bool {
	if cancel == nil {
		return false
	}
	d, ok := sub.Conn.Writer().(interface{ Done() <-chan struct{} })
	return ok && d.Done() == cancel
}
