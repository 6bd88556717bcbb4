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
// Each connection has one long-lived goroutine, the read loop (parse and route inline, in the
// goroutine that calls Serve), and a write loop that runs only while output is queued.
// Outbound frames are appended to a mutex-guarded list of byte chunks; the append that finds
// no writer running starts one, later appends only add to the list, and the writer drains
// everything queued with one writev (net.Buffers) per round, so bursts coalesce into few
// syscalls, and returns once the list is empty. Heart-beats come from a timer, and on plain
// TCP the parser takes its read buffer from a pool only when input is ready, so an idle
// connection holds one parked goroutine and no I/O buffers (scripts/idle-memory measures
// it). Every exported method of *Session is safe for concurrent use.
//
// # Heart-beats (STOMP 1.2, "Heart-beating")
//
// The negotiated server→client interval is max(sx, cy) and the client→server interval
// max(cx, sy), each 0 when either side offers 0. A timer firing every half of the server
// interval queues an EOL when nothing was written for that half. The reader fails with
// CloseHeartbeatTimeout when nothing arrives for grace × the client interval. A client that
// negotiated no heart-beats is never closed for silence (RabbitMQ and ActiveMQ 5 behaviour;
// the transport's TCP keepalive finds dead peers) unless Options.ConnectionTTL is set
// (ActiveMQ Artemis's connection-ttl, off by default).
//
// # Deadlines that protect the broker
//
// CONNECT must be complete within Options.ConnectTimeout of the accept; every later frame
// within Options.FrameTimeout of its first byte (ERROR "frame timeout", CloseFrameTimeout).
package session
