package session

import (
	"strconv"

	"github.com/titan-broker/titan/internal/frame"
)

// CloseSlowConsumer implements delivery.SlowCloser: a client-ack subscription of this
// connection left producers waiting for an acknowledgement longer than
// SlowConsumerTimeout. ERROR "slow consumer" (detail as its body) is queued after what the
// connection already has, and the connection closes once it is written; producers waiting
// on it continue at once (its subscriptions end). Idempotent; safe for concurrent use.
func (s *Session) CloseSlowConsumer(detail string) {
	s.mu.Lock()
	closing := s.closing
	if !closing {
		s.setReasonLocked(CloseSlowConsumer) // counted there
	}
	s.mu.Unlock()
	if closing {
		return
	}
	s.log().Warn("slow consumer closed", "cause", "unacknowledged messages at the prefetch", "timeout", s.opts.SlowConsumerTimeout.String())
	body := []byte(detail + "\n")
	s.writeFrame(&frame.Frame{Command: frame.CmdError, Headers: []frame.Header{
		{Key: frame.HdrMessage, Value: ReasonSlowConsumer},
		{Key: frame.HdrContentType, Value: "text/plain"},
		{Key: frame.HdrContentLength, Value: strconv.Itoa(len(body))},
	}, Body: body})
	s.CloseAfterFlush(CloseSlowConsumer)
}
