package pull

import (
	"cmp"
	"context"
	"errors"
	"slices"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// GiveBackRetry is the pause before a give-back whose NAKs nobody answered is sent again.
const GiveBackRetry = 50 * time.Millisecond

// lookupTimeout bounds one consumer info request of GiveBack (just after a step-down a
// request can go unanswered; cluster.LookupTimeout).
const lookupTimeout = 250 * time.Millisecond

// ackNak is JetStream's NAK acknowledgement body (nats-server AckNak).
var ackNak = []byte("-NAK")

// GiveBack NAKs msgs, messages of cons this node pulled and will not settle, in stream
// order, so that JetStream redelivers them in that order ahead of newer ones, and returns
// once the consumer's leader processed them all, or ctx's error (msgs is sorted in place).
//
// It sends them only once cons's leader answers an info request (a leader election may be
// under way after a step-down: a NAK sent without a leader is lost). The first and the last
// NAK are requests sent with nc: a new leader's interest in the consumer's acknowledgement
// subjects reaches this node's server some time after it answers info requests (interest
// travels between servers asynchronously), and a NAK published before it arrived is
// dropped without a word, its message coming back only after the ack wait, behind newer
// ones (2 of 4,407 in a rolling restart, issue 27). Once the first is answered the interest
// is here, and the NAKs between (one subscription at the leader takes them all) are not
// dropped; the leader answers the last once it processed every NAK before it (one ack
// queue per consumer). A request nobody answers sends them all again after
// GiveBackRetry. Not safe for concurrent use on the same messages.
func GiveBack(ctx context.Context, nc *nats.Conn, cons jetstream.Consumer, msgs []jetstream.Msg) error {
	if len(msgs) == 0 {
		return nil
	}
	slices.SortFunc(msgs, func(a, b jetstream.Msg) int { return cmp.Compare(streamSeq(a), streamSeq(b)) })
	nak := func(m jetstream.Msg) error {
		_, err := nc.RequestWithContext(ctx, m.Reply(), ackNak)
		return err
	}
	last := len(msgs) - 1
	for {
		if err := leaderAnswers(ctx, cons); err != nil {
			return err
		}
		err := nak(msgs[0])
		if err == nil && last > 0 {
			for _, m := range msgs[1:last] {
				_ = m.Nak()
			}
			err = nak(msgs[last])
		}
		if !errors.Is(err, nats.ErrNoResponders) {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(GiveBackRetry):
		}
	}
}

// NakInOrder NAKs msgs in stream order without waiting for any answer (a consumer whose
// leader is known to be settled; msgs is sorted in place).
func NakInOrder(msgs []jetstream.Msg) {
	slices.SortFunc(msgs, func(a, b jetstream.Msg) int { return cmp.Compare(streamSeq(a), streamSeq(b)) })
	for _, m := range msgs {
		_ = m.Nak()
	}
}

// leaderAnswers returns once cons's leader answers an info request, each request bounded
// by lookupTimeout, or ctx's error.
func leaderAnswers(ctx context.Context, cons jetstream.Consumer) error {
	for {
		ictx, cancel := context.WithTimeout(ctx, lookupTimeout)
		_, err := cons.Info(ictx)
		cancel()
		if err == nil || ctx.Err() != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(GiveBackRetry):
		}
	}
}

// streamSeq is m's stream sequence (0 when its metadata cannot be read).
func streamSeq(m jetstream.Msg) uint64 {
	if meta, err := m.Metadata(); err == nil {
		return meta.Sequence.Stream
	}
	return 0
}
