// Package session runs one STOMP connection: the CONNECT→CONNECTED handshake and version
// negotiation, heart-beats, limits, and the per-connection read and write loops.
//
// The session is the "dumb transport" of DESIGN §1. It decodes frames, enforces limits,
// stamps itself (the authenticated session) on every frame and hands it to a Handler (the
// inbound router). It contains no routing logic. It knows nothing of the router package: the
// router sees a *Session through its own Client port.
//
// # Goroutines and concurrency
//
// Each connection has exactly two goroutines: the read loop (parse and route inline, in the
// goroutine that calls Serve) and the write loop. Outbound frames are appended to a
// mutex-guarded list of byte chunks and the writer is kicked through a 1-slot channel; the
// writer drains everything queued with one writev (net.Buffers), so bursts coalesce into few
// syscalls. Every exported method of *Session is safe for concurrent use.
//
// # Heart-beats (STOMP 1.2, "Heart-beating")
//
// The negotiated server→client interval is max(sx, cy) and the client→server interval
// max(cx, sy), each 0 when either side offers 0. The writer sends an EOL when it has written
// nothing for the server interval. The reader fails with CloseHeartbeatTimeout when nothing
// arrives for grace × the client interval; a client that offers no heart-beats still gets the
// connection TTL (default 60 s, as ActiveMQ Artemis's connection-ttl).
package session
