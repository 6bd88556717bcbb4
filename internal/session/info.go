package session

import (
	"sync/atomic"
	"time"
)

// HeartBeat returns the negotiated heart-beat timing once CONNECTED was sent: send is the
// interval at which Titan writes heart-beats (0: none), recv how long Titan waits for data
// from the client before closing it (the client's interval times the grace, or the
// connection TTL; 0: no limit). ok is false while the handshake is still running. Safe for
// concurrent use (the values are final before hbReady is set).
func (s *Session) HeartBeat() (send, recv time.Duration, ok bool) {
	if !s.hbReady.Load() {
		return 0, 0, false
	}
	return s.sendEvery, s.readTimeout, true
}

// Traffic counts bytes on the wire, summed over connections: In read from clients, Out
// written to them (frames, heart-beats; after TLS/WebSocket framing is removed). Safe for
// concurrent use.
type Traffic struct {
	In, Out atomic.Uint64
}
