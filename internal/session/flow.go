package session

import (
	"strconv"

	"github.com/titan-broker/titan/internal/frame"
)

// Flow control on the subscriber's side (DESIGN §9, docs/design.md "Flow control").

// ReasonSlowConsumer is the ERROR message header sent to a connection closed as a slow
// consumer.
const ReasonSlowConsumer = "slow consumer"

// WriteEvent queues one events MESSAGE (see WriteMessage). With force it is queued even over
// MaxOutboundBytes — events are not refused for a full connection; the slow-consumer timer
// and delivery's own bound (delivery.EventPolicy.MaxBytes) deal with a subscriber that
// does not read — and refused only when the connection is closing. Without force it is
// refused over the limit like WriteMessage (slow-consumer-policy DROP). congested is not nil
// when the connection is over its high watermark after the write (closed once the queue
// falls to ResumeOutboundBytes or the connection closes); no producer waits for it.
func (s *Session) WriteEvent(prefix *frame.Buf, shared []byte, force bool) (ok bool, congested <-chan struct{}) {
	return s.enqueueFlow(!force, prefix, prefix.B, shared)
}

// Congested returns nil when the outbound queue is under its high watermark, else a channel
// closed when it falls to the low watermark or the connection closes.
func (s *Session) Congested() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.flow.Congested()
}

// slowConsumer runs when the outbound queue stayed over the high watermark without
// shrinking for SlowConsumerTimeout: the frames not yet handed to the socket are discarded,
// ERROR "slow consumer" takes their place and the connection closes once it is written
// (bounded by WriteTimeout). Producers waiting on this connection continue at once.
func (s *Session) slowConsumer() {
	s.mu.Lock()
	if s.closing || !s.flow.CheckSlow() {
		s.mu.Unlock()
		return
	}
	var n int64
	for _, b := range s.chunks {
		n += int64(len(b))
	}
	clear(s.chunks)
	s.chunks = s.chunks[:0]
	for i, b := range s.pooled {
		frame.PutBuf(b)
		s.pooled[i] = nil
	}
	s.pooled = s.pooled[:0]
	s.queuedBytes -= n
	s.flow.Shrink(n)
	// The reason is recorded (and counted, setReasonLocked) before the producers are
	// released (flow.Close): whoever sees them continue sees the slow consumer counted.
	s.setReasonLocked(CloseSlowConsumer)
	s.flow.Close()
	queued := s.queuedBytes
	s.mu.Unlock()
	s.outBytes.Add(-n)
	s.log().Warn("slow consumer closed", "queued_bytes", queued+n, "discarded_bytes", n,
		"timeout", s.opts.SlowConsumerTimeout.String())
	s.writeError(ReasonSlowConsumer, "", "the connection's pending output stayed over "+strconv.FormatInt(s.opts.MaxOutboundBytes, 10)+
		" bytes (max-outbound-bytes) without the client reading for "+s.opts.SlowConsumerTimeout.String()+
		" (flow-control slow-consumer-timeout)")
	s.CloseAfterFlush(CloseSlowConsumer)
}
