package session

import (
	"time"

	"github.com/titan-broker/titan/internal/frame"
)

// The frame completion deadline (issue 30): once a frame's first byte has been read, the
// whole frame must arrive within Options.FrameTimeout, however its bytes trickle in. It is a
// timer, not a read deadline, so that it works alike on every transport (a WebSocket read
// deadline tears the connection down before an ERROR could be written) and leaves the
// heart-beat read deadline as it is. Only frames that span reads arm it: a frame read whole
// costs nothing.

// ReasonFrameTimeout is the message header of the ERROR sent to a connection whose frame was
// not complete within Options.FrameTimeout.
const ReasonFrameTimeout = "frame timeout"

// armFrame runs before every read of the stream, on the read goroutine: when the parser
// holds bytes of an incomplete frame and no deadline runs for it, the frame has started and
// its deadline is armed (the read that delivered its first byte returned just now).
func (s *Session) armFrame() {
	d := s.opts.FrameTimeout
	if !s.framing || d <= 0 || s.parser.Buffered() == 0 || s.frameDue.Load() != 0 {
		return
	}
	s.frameDue.Store(time.Now().Add(d).UnixNano())
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return
	}
	if s.frameTimer == nil {
		s.frameTimer = time.AfterFunc(d, s.frameExpired)
	} else {
		s.frameTimer.Reset(d)
	}
}

// frameExpired is the frame timer's callback: when the frame it was armed for is still
// incomplete (frameDue set and passed), the connection gets ERROR "frame timeout" and is
// closed with CloseFrameTimeout once that is written (bounded by WriteTimeout). The read
// goroutine, blocked in its read, wakes when the socket closes.
func (s *Session) frameExpired() {
	due := s.frameDue.Load()
	if due == 0 || time.Now().UnixNano() < due {
		return // completed meanwhile, or re-armed for a later frame (its own firing comes)
	}
	s.mu.Lock()
	if s.closing {
		s.mu.Unlock()
		return
	}
	s.setReasonLocked(CloseFrameTimeout) // before Fail, whose close reason would be protocol_error
	s.mu.Unlock()
	s.log().Warn("frame timeout: closing", "timeout", s.opts.FrameTimeout.String())
	s.Fail(&frame.ProtocolError{Reason: ReasonFrameTimeout, Fatal: true,
		Detail: "a frame was started but not completed within " + s.opts.FrameTimeout.String() +
			" (protocol-options frame-timeout); send each frame whole"})
}
