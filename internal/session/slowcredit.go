package session

// CloseSlowConsumer implements delivery.SlowCloser: events delivery found this connection
// a slow consumer (messages held for a client-ack subscription at its prefetch without an
// ACK for SlowConsumerTimeout, or its pending events output over its hard bound; detail
// says which). ERROR "slow consumer" (detail as its body) is queued after what the
// connection already has, and the connection closes once it is written. Idempotent; safe
// for concurrent use.
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
	s.log().Warn("slow consumer closed", "cause", detail)
	s.writeError(ReasonSlowConsumer, "", detail)
	s.CloseAfterFlush(CloseSlowConsumer)
}
