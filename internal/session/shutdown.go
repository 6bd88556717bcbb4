package session

import "github.com/titan-broker/titan/internal/frame"

// Shutdown tells the client the broker is stopping (an ERROR frame with message "server
// shutting down", as STOMP requires before the server closes) and closes the connection
// once it is written, with CloseShutdown: a normal shutdown is neither logged nor counted
// as a protocol error.
func (s *Session) Shutdown() {
	hdrs := []frame.Header{{Key: frame.HdrMessage, Value: "server shutting down"}, {Key: frame.HdrContentLength, Value: "0"}}
	s.writeFrame(&frame.Frame{Command: frame.CmdError, Headers: hdrs})
	s.CloseAfterFlush(CloseShutdown)
}
