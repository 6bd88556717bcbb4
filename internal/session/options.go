package session

import (
	"log/slog"
	"time"

	"github.com/titan-broker/titan/internal/flow"
	"github.com/titan-broker/titan/internal/frame"
)

// Options configure every session of one listener. The zero value is not useful; start from
// DefaultOptions. Options are read-only once a session starts.
type Options struct {
	// Traffic, when set, counts the bytes read from and written to every connection
	// using these options (broker-wide totals for metrics).
	Traffic *Traffic
	// Limits bound what the parser accepts (see frame.Limits).
	Limits frame.Limits
	// Versions are the protocol versions offered, in any order (default 1.0, 1.1, 1.2).
	Versions []frame.Version
	// ServerName is the CONNECTED server header (default "Titan/<version>").
	ServerName string
	// HeartBeatSend is the interval at which the server offers to send heart-beats (sx) to a
	// client that asks for none (default 10 s); 0 disables sending. A client that asks for
	// heart-beats every cy is offered cy, down to HeartBeatMin.
	HeartBeatSend time.Duration
	// HeartBeatRecv is the interval at which the server asks for heart-beats (sy) from a
	// client that offers none (default 10 s); 0 means it wants none. A client that offers
	// heart-beats every cx is asked for cx, down to HeartBeatMin.
	HeartBeatRecv time.Duration
	// HeartBeatMin is the floor of the heart-beat intervals the server agrees to, either way
	// (default 1 s): a client asking for beats every 100 ms gets them every HeartBeatMin.
	HeartBeatMin time.Duration
	// HeartBeatGrace multiplies the negotiated client interval before a silent connection is
	// closed (default 2.0, so a connection silent for more than twice the interval closes;
	// values below 1 are raised to 1).
	HeartBeatGrace float64
	// ConnectionTTL, when positive, is how long a connection without negotiated client
	// heart-beats may stay silent before it is closed (ActiveMQ Artemis's connection-ttl).
	// Zero or negative (the default) never closes such a connection for silence, as
	// RabbitMQ and ActiveMQ 5 do: dead peers are found by TCP keepalive instead (issue 30).
	ConnectionTTL time.Duration
	// ConnectTimeout bounds the wait for the CONNECT frame after accept (default 10 s): the
	// whole frame must have arrived by then, however slowly its bytes trickle in.
	ConnectTimeout time.Duration
	// FrameTimeout bounds how long a frame may take to arrive once its first byte was read
	// (default 60 s; zero or negative: no bound). A frame still incomplete at the bound gets
	// ERROR "frame timeout" and the connection closes with CloseFrameTimeout. CONNECT is
	// bounded by ConnectTimeout instead.
	FrameTimeout time.Duration
	// WriteTimeout bounds one socket write; a peer that accepts nothing for this long is
	// closed as a slow consumer (default 30 s).
	WriteTimeout time.Duration
	// MaxOutboundBytes bounds the bytes queued for one connection's writer. MESSAGE frames
	// beyond it are refused (WriteMessage returns false) so that the caller can hold or drop
	// them; control frames (RECEIPT, ERROR, CONNECTED) are always queued (default 16 MiB).
	MaxOutboundBytes int64
	// ResumeOutboundBytes is the low watermark of the outbound queue: once it went over
	// MaxOutboundBytes (the high watermark; only events deliveries and control frames pass
	// it), producers paused on this connection resume when the queue falls to this many
	// bytes (default MaxOutboundBytes/2; DESIGN §9).
	ResumeOutboundBytes int64
	// SlowConsumerTimeout is how long the outbound queue may stay over MaxOutboundBytes
	// without shrinking before the connection gets ERROR "slow consumer" and is closed
	// (default 30 s; 0 disables it, leaving WriteTimeout).
	SlowConsumerTimeout time.Duration
	// FlowStats, when set, counts slow-consumer closes.
	FlowStats *flow.Stats
	// Logger receives connection events; nil discards them.
	Logger *slog.Logger
	// Authenticator, when set, authenticates every CONNECT (see Authenticator); nil accepts
	// every connection without a principal.
	Authenticator Authenticator
	// LoginThrottle, when set, backs off failed logins per source address and per user
	// (see LoginThrottle); nil: no back-off beyond AuthFailureDelay.
	LoginThrottle LoginThrottle
	// PreAuthLimits bound the frames of a connection that has not logged in yet: its
	// CONNECT (default PreAuthLimits(), CONNECT-sized: 16 KiB of headers, no body to speak
	// of, no share of Limits.LargeFrames). Limits apply once CONNECTED is sent.
	PreAuthLimits frame.Limits
	// AuthFailureDelay is the constant wait before a refused CONNECT gets its ERROR
	// (default DefaultAuthFailureDelay; it slows password guessing down and hides timing).
	AuthFailureDelay time.Duration
}

// DefaultFrameTimeout is Options.FrameTimeout's default.
const DefaultFrameTimeout = 60 * time.Second

// DefaultOptions returns the options Titan ships with.
func DefaultOptions() Options {
	return Options{
		Limits:           frame.DefaultLimits(),
		Versions:         []frame.Version{frame.V10, frame.V11, frame.V12},
		ServerName:       "Titan/0.1.0",
		HeartBeatSend:    10 * time.Second,
		HeartBeatRecv:    10 * time.Second,
		HeartBeatMin:     time.Second,
		HeartBeatGrace:   2.0,
		ConnectTimeout:   10 * time.Second,
		FrameTimeout:     DefaultFrameTimeout,
		WriteTimeout:     30 * time.Second,
		MaxOutboundBytes: 16 << 20,
		AuthFailureDelay: DefaultAuthFailureDelay,
		PreAuthLimits:    PreAuthLimits(),

		SlowConsumerTimeout: 30 * time.Second, // ResumeOutboundBytes 0: half of MaxOutboundBytes
	}
}

// PreAuthLimits returns the default Options.PreAuthLimits: what a CONNECT frame needs (lines
// of 8 KiB for a bearer token as passcode, 32 headers, 16 KiB in all, a body of 1 KiB at most
// — CONNECT has none, frame.CheckBody refuses one) and no share of the broker-wide
// large-frame budget, so that connections that have not logged in cannot take the memory
// logged-in clients share (issue 29).
func PreAuthLimits() frame.Limits {
	return frame.Limits{MaxHeaderLineBytes: 8 << 10, MaxHeaders: 32, MaxHeaderBytes: 16 << 10, MaxBodyBytes: 1 << 10}
}
