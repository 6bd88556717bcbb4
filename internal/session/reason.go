package session

// CloseReason says why a connection closed. It is logged and counted.
type CloseReason uint8

// Close reasons.
const (
	CloseClientEOF        CloseReason = iota // the peer closed its side
	CloseClientDisconnect                    // DISCONNECT frame
	CloseProtocol                            // protocol error (ERROR frame sent)
	CloseHeartbeatTimeout                    // silent for longer than the heart-beat or TTL allows
	CloseSlowConsumer                        // outbound bytes over the limit
	CloseWriteError                          // socket write failed
	CloseReadError                           // socket read failed
	CloseShutdown                            // broker shutting down
	CloseAdmin                               // closed by an operator or by policy (FAIL)
	CloseAccessRefused                       // authentication at CONNECT failed
	CloseFrameTimeout                        // a started frame was not complete within Options.FrameTimeout
	CloseConnectionLimit                     // refused at accept: the total or per-address connection limit
	CloseConnectTimeout                      // no complete CONNECT within Options.ConnectTimeout of the accept
	numCloseReasons
)

var closeReasonNames = [numCloseReasons]string{
	"client_eof", "client_disconnect", "protocol_error", "heartbeat_timeout",
	"slow_consumer", "write_error", "read_error", "shutdown", "admin", "access_refused",
	"frame_timeout", "connection_limit", "connect_timeout",
}

// String returns a snake_case label suitable for logs and metrics.
func (r CloseReason) String() string {
	if r < numCloseReasons {
		return closeReasonNames[r]
	}
	return "unknown"
}

// AllCloseReasons lists every reason, for metrics initialisation.
func AllCloseReasons() []CloseReason {
	out := make([]CloseReason, numCloseReasons)
	for i := range out {
		out[i] = CloseReason(i)
	}
	return out
}
