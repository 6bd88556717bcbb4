package client

import (
	"crypto/tls"
	"strconv"
	"time"
)

// Option configures Dial.
type Option func(*options)

type options struct {
	login, passcode string
	hasLogin        bool
	tls             *tls.Config
	vhost           string
	hbSend, hbRecv  time.Duration
	hbGrace         float64
	connectTimeout  time.Duration
	maxBodyBytes    int
	reconnect       *ReconnectPolicy
	onConnLost      func(error)
	onReconnect     func()
}

func defaultOptions() options {
	return options{
		hbSend: 10 * time.Second, hbRecv: 10 * time.Second, hbGrace: 2,
		connectTimeout: 10 * time.Second, maxBodyBytes: 64 << 20,
	}
}

// WithLogin sends login and passcode in CONNECT (STOMP 1.2, "CONNECT or STOMP Frame").
func WithLogin(login, passcode string) Option {
	return func(o *options) { o.login, o.passcode, o.hasLogin = login, passcode, true }
}

// WithTLS connects over TLS with cfg (nil cfg: the system roots, server name from the
// address). cfg is cloned; the caller may reuse it.
func WithTLS(cfg *tls.Config) Option {
	return func(o *options) {
		if cfg == nil {
			cfg = &tls.Config{}
		}
		o.tls = cfg.Clone()
	}
}

// WithHost sets CONNECT's host header (the virtual host); default: the host of the address.
func WithHost(vhost string) Option { return func(o *options) { o.vhost = vhost } }

// WithHeartBeat offers heart-beats (STOMP 1.2, "Heart-beating"): send is how often the
// client can send one when otherwise silent, recv how often it wants one from the broker.
// Zero turns a direction off. Default 10s each. The negotiated intervals are the larger of
// both sides' values; the connection is treated as lost when nothing arrives for twice the
// incoming interval.
func WithHeartBeat(send, recv time.Duration) Option {
	return func(o *options) { o.hbSend, o.hbRecv = max(send, 0), max(recv, 0) }
}

// WithConnectTimeout bounds dialling, the TLS handshake and the CONNECT/CONNECTED exchange
// of each connection attempt when the Dial ctx has no earlier deadline (default 10s).
func WithConnectTimeout(d time.Duration) Option {
	return func(o *options) {
		if d > 0 {
			o.connectTimeout = d
		}
	}
}

// WithMaxBodyBytes bounds the body of a frame the client accepts from the broker, in bytes
// (default 64 MiB). A larger frame ends the connection.
func WithMaxBodyBytes(n int) Option {
	return func(o *options) {
		if n > 0 {
			o.maxBodyBytes = n
		}
	}
}

// ReconnectPolicy bounds reconnecting after a lost connection.
type ReconnectPolicy struct {
	// MaxAttempts is how many dials are tried per loss before the client gives up and closes
	// (default 10; negative: no limit).
	MaxAttempts int
	// InitialBackoff is the wait before the first attempt (default 100ms); it doubles after
	// each failed attempt up to MaxBackoff.
	InitialBackoff time.Duration
	// MaxBackoff caps the wait between attempts (default 5s; at least InitialBackoff).
	MaxBackoff time.Duration
}

// WithReconnect re-dials a lost connection under p and re-subscribes every live
// subscription. Without it a lost connection closes the Client (Err and Done report why).
func WithReconnect(p ReconnectPolicy) Option {
	return func(o *options) {
		if p.MaxAttempts == 0 {
			p.MaxAttempts = 10
		}
		if p.InitialBackoff <= 0 {
			p.InitialBackoff = 100 * time.Millisecond
		}
		if p.MaxBackoff <= 0 {
			p.MaxBackoff = 5 * time.Second
		}
		p.MaxBackoff = max(p.MaxBackoff, p.InitialBackoff)
		o.reconnect = &p
	}
}

// WithConnectionListener calls lost (with the cause) each time the connection ends and
// restored each time a reconnect succeeded and re-subscribed. Either may be nil. They run
// on the client's internal goroutines and must not block.
func WithConnectionListener(lost func(error), restored func()) Option {
	return func(o *options) { o.onConnLost, o.onReconnect = lost, restored }
}

// SendOption configures one Send or Request.
type SendOption func(*sendOptions)

type sendOptions struct {
	headers   [][2]string
	noReceipt bool
}

// WithHeader adds a header to the SEND frame (repeatable; the first of a name wins at the
// broker). Protocol headers the client sets itself (destination, group, receipt,
// content-length) must not be given.
func WithHeader(name, value string) SendOption {
	return func(o *sendOptions) { o.headers = append(o.headers, [2]string{name, value}) }
}

// WithContentType sets the content-type header (a MIME type).
func WithContentType(t string) SendOption { return WithHeader("content-type", t) }

// WithCorrelationID sets the correlation-id header.
func WithCorrelationID(id string) SendOption { return WithHeader("correlation-id", id) }

// WithReplyTo sets the reply-to header (a destination, often /temp-queue/<name>).
func WithReplyTo(destination string) SendOption { return WithHeader("reply-to", destination) }

// WithPersistent sets the persistent header; false lets a queue keep the message in memory
// only (faster, lost on a crash).
func WithPersistent(p bool) SendOption { return WithHeader("persistent", strconv.FormatBool(p)) }

// WithoutReceipt sends without asking for a RECEIPT: Send returns once the frame is written
// to the socket, with no proof the broker accepted it.
func WithoutReceipt() SendOption { return func(o *sendOptions) { o.noReceipt = true } }

// AckMode is a subscription's acknowledgement mode (STOMP 1.2, "SUBSCRIBE ack Header").
type AckMode string

const (
	// AckAuto: the broker considers a message acknowledged once sent. Message.Ack is a no-op.
	AckAuto AckMode = "auto"
	// AckClient: Message.Ack acknowledges the message and every earlier one of the
	// subscription (cumulative).
	AckClient AckMode = "client"
	// AckClientIndividual: Message.Ack acknowledges exactly that message.
	AckClientIndividual AckMode = "client-individual"
)

// SubscribeOption configures one Subscribe.
type SubscribeOption func(*subOptions)

type subOptions struct {
	ack     AckMode
	headers [][2]string
	buffer  int
}

// WithAck sets the ack mode (default AckAuto).
func WithAck(m AckMode) SubscribeOption { return func(o *subOptions) { o.ack = m } }

// WithPrefetch sets prefetch-count: how many unacknowledged messages the broker sends this
// subscription before waiting for acks (Titan's default 1000).
func WithPrefetch(n int) SubscribeOption {
	return WithSubscribeHeader("prefetch-count", strconv.Itoa(n))
}

// WithStartPosition sets an events-store subscription's start-position (new, first, last, a
// sequence, time:<RFC 3339>, delta:<duration>).
func WithStartPosition(p string) SubscribeOption { return WithSubscribeHeader("start-position", p) }

// WithDurableName names an events-store durable subscription, which resumes after its last
// acknowledged sequence.
func WithDurableName(name string) SubscribeOption {
	return WithSubscribeHeader("durable-name", name)
}

// WithSubscribeHeader adds a header to the SUBSCRIBE frame (repeatable).
func WithSubscribeHeader(name, value string) SubscribeOption {
	return func(o *subOptions) { o.headers = append(o.headers, [2]string{name, value}) }
}

// WithBuffer sets how many delivered messages wait for the handler before the connection's
// reader waits too (default 1000, at least 1).
func WithBuffer(n int) SubscribeOption {
	return func(o *subOptions) {
		if n > 0 {
			o.buffer = n
		}
	}
}
