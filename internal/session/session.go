package session

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"runtime/debug"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/titan-broker/titan/internal/flow"
	"github.com/titan-broker/titan/internal/frame"
	"github.com/titan-broker/titan/internal/lockorder"
)

// Handler is the inbound router as the transport sees it.
type Handler interface {
	// Connect is called from the read goroutine once CONNECT (or STOMP) has been negotiated
	// and before CONNECTED is written. A non-nil error rejects the connection: it is sent as
	// an ERROR frame and the connection closes. The Link receives every later frame.
	Connect(s *Session, f *frame.Frame) (Link, *frame.ProtocolError)
}

// Link is the router's side of one connected session.
type Link interface {
	// Handle routes one frame. It runs on the session's read goroutine; f and everything it
	// references are valid only until Handle returns (clone what you keep).
	Handle(f *frame.Frame)
	// Closed is called once, from the read goroutine, after the connection closed.
	Closed(reason CloseReason)
}

// Session is one client connection. Its exported methods are safe for concurrent use.
type Session struct {
	id     string
	conn   net.Conn
	opts   *Options
	h      Handler
	parser *frame.Parser
	idle   idleReader // what parser reads from on plain TCP (see reader)

	version     atomic.Uint32
	readTimeout time.Duration // set before the read loop's steady state; read goroutine only
	framing     bool          // frame deadlines apply (CONNECT is done); read goroutine only
	frameTimer  *time.Timer   // fires frameExpired; made when the first frame spans reads; read goroutine only
	frameDue    atomic.Int64  // when the frame in progress must be complete (UnixNano); 0: none
	sendEvery   time.Duration // negotiated server heart-beat interval; set before writer uses it

	mu           lockorder.Mutex[lockorder.SessionRank] // guards the fields below
	chunks       [][]byte                               // queued outbound data, guarded by mu
	pooled       []*frame.Buf                           // pooled heads among chunks, released once written; guarded by mu
	queuedBytes  int64                                  // bytes in chunks, guarded by mu
	closing      bool                                   // no more writes accepted; writer closes after flush; guarded by mu
	closeReason  CloseReason
	reasonSet    bool
	writerActive bool          // a writer goroutine runs: it does while chunks is not empty; guarded by mu
	lastWrite    time.Duration // when the writer last wrote, as time since created; guarded by mu
	hbDue        time.Duration // when heartBeats next runs heartBeat (since hbEpoch); guarded by its shard's mu
	hbIndex      int32         // s's index in its heartBeats shard's heap, -1 when not in it; guarded by that shard's mu
	hbShard      uint8         // s's heartBeats shard (hbs); set by New, then read-only
	spare        [][]byte      // the writer's other chunks array, swapped with chunks; guarded by mu
	spareBufs    []*frame.Buf
	wantDrain    bool   // a limited write was refused; call onDrain once below half the limit; guarded by mu
	onDrain      func() // set once before Serve's steady state

	flow flow.Outbound // watermarks over queuedBytes (flow.go), guarded by mu

	progress chan struct{} // 1-slot signal: the writer wrote something (read-side back-pressure); made by waitForWriter, guarded by mu
	done     chan struct{} // closed when the connection is closed; made by Done on first use (most connections never need it), guarded by mu
	finished bool          // guarded by mu: Close has closed the socket and logged it (Done is then closed)
	doneMade atomic.Bool   // done is made (and no longer changes)
	closed   bool          // Close ran; guarded by mu
	hbReady  atomic.Bool   // the heart-beat parameters are final

	outBytes atomic.Int64 // bytes queued but not yet written (for snapshots)
	created  time.Time

	principal atomic.Pointer[string] // the authenticated user, set at CONNECT (see Principal)
}

// New wraps conn. Call Serve to run it.
func New(conn net.Conn, h Handler, opts *Options) *Session {
	var b [8]byte
	_, _ = rand.Read(b[:])
	s := &Session{
		id:      "titan-" + hex.EncodeToString(b[:]),
		conn:    conn,
		opts:    opts,
		h:       h,
		created: time.Now(),
		hbIndex: -1,
		hbShard: uint8(hbNext.Add(1) % hbShards),
	}
	s.parser = frame.NewParser(s.reader(), opts.PreAuthLimits) // Limits once CONNECTED (handshake)
	s.flow = *flow.NewOutbound(opts.MaxOutboundBytes, opts.ResumeOutboundBytes, opts.SlowConsumerTimeout, s.slowConsumer)
	return s
}

// log returns the connection's logger: Options.Logger with the session id and remote
// address added to every record. It is made per call (connections log rarely) so that no
// connection holds one.
func (s *Session) log() *slog.Logger {
	h := slog.DiscardHandler
	if l := s.opts.Logger; l != nil {
		h = l.Handler()
	}
	return slog.New(connHandler{h, s})
}

// connHandler adds the connection's session id and remote address to every record it
// handles. Unlike slog.Logger.With, which formats them up front (hundreds of bytes held by
// every connection, though most log once or twice), it costs two words per connection.
type connHandler struct {
	h slog.Handler
	s *Session
}

func (c connHandler) Enabled(ctx context.Context, l slog.Level) bool { return c.h.Enabled(ctx, l) }

func (c connHandler) Handle(ctx context.Context, r slog.Record) error {
	r = r.Clone() // the record's attributes may share an array with the caller's
	r.AddAttrs(slog.String("session", c.s.id), slog.String("remote", c.s.conn.RemoteAddr().String()))
	return c.h.Handle(ctx, r)
}

func (c connHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return connHandler{c.h.WithAttrs(as), c.s}
}

func (c connHandler) WithGroup(name string) slog.Handler {
	return connHandler{c.h.WithGroup(name), c.s}
}

// ID returns the session id sent in CONNECTED ("titan-<16 hex>").
func (s *Session) ID() string { return s.id }

// Version returns the negotiated protocol version (frame.V12 before negotiation ends).
func (s *Session) Version() frame.Version {
	if v := frame.Version(s.version.Load()); v != 0 {
		return v
	}
	return frame.V12
}

// RemoteAddr returns the peer's address.
func (s *Session) RemoteAddr() string { return s.conn.RemoteAddr().String() }

// QueuedBytes returns the bytes queued for writing and not yet written.
func (s *Session) QueuedBytes() int64 { return s.outBytes.Load() }

// Created returns when the connection was accepted.
func (s *Session) Created() time.Time { return s.created }

// Done is closed when the connection has closed.
// The router asks for it on every SEND: once made it is read without the lock.
func (s *Session) Done() <-chan struct{} {
	if s.doneMade.Load() {
		return s.done // never changes once doneMade is set
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.done == nil {
		if s.finished {
			return closedChan
		}
		s.done = make(chan struct{})
		s.doneMade.Store(true)
	}
	return s.done
}

// closedChan is Done's answer for a connection that closed before anyone asked.
var closedChan = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

type deadlineReader struct{ s *Session }

func (d deadlineReader) Read(p []byte) (int, error) {
	d.s.armFrame()
	if t := d.s.readTimeout; t > 0 {
		_ = d.s.conn.SetReadDeadline(time.Now().Add(t))
	}
	n, err := d.s.conn.Read(p)
	if t := d.s.opts.Traffic; t != nil && n > 0 {
		t.In.Add(uint64(n))
	}
	return n, err
}

// Serve runs the connection until it closes. It runs the read loop on the calling goroutine;
// a write goroutine runs only while there is output to write (see writeLoop). It never
// panics: a panic inside routing is recovered, logged with its stack, and closes only this
// connection.
func (s *Session) Serve() {
	var link Link
	reason := CloseReadError
	defer func() {
		if r := recover(); r != nil {
			s.log().Error("session panic", "panic", r, "stack", string(debug.Stack()))
			reason = CloseProtocol
		}
		s.Close(reason)
		s.parser.Close() // a large frame in progress gives back its share of Limits.LargeFrames
		if link != nil {
			link.Closed(s.reason())
		}
	}()
	// The CONNECT frame must be complete within ConnectTimeout of the accept, however
	// slowly its bytes trickle in.
	s.readTimeout = 0
	_ = s.conn.SetReadDeadline(time.Now().Add(s.opts.ConnectTimeout))
	link, reason = s.handshake()
	if link == nil {
		return
	}
	s.framing = true
	for {
		f, err := s.parser.ReadFrame()
		if err != nil {
			reason = s.readFailure(err)
			return
		}
		if s.frameDue.Load() != 0 {
			s.frameDue.Store(0) // complete: the frame deadline is off until the next one starts
		}
		switch {
		case f.Command == frame.CmdConnect || f.Command == frame.CmdStomp:
			s.Fail(&frame.ProtocolError{Reason: "already connected", ReceiptID: f.Value(frame.HdrReceipt), Fatal: true,
				Detail: f.Command.String() + " on a connection that is already connected; a connection negotiates once, with its first frame"})
		case !f.Command.IsClient():
			s.Fail(&frame.ProtocolError{Reason: "unexpected " + f.Command.String() + " frame from a client", ReceiptID: f.Value(frame.HdrReceipt), Fatal: true,
				Detail: f.Command.String() + " is a frame the server sends; " + clientCommands})
		default:
			if pe := frame.CheckBody(f); pe != nil {
				s.Fail(pe)
			} else {
				link.Handle(f)
			}
		}
		s.waitForWriter()
		if s.isClosing() {
			reason = s.reason()
			s.waitDone()
			return
		}
	}
}

func (s *Session) readFailure(err error) CloseReason {
	if s.isClosing() {
		return s.reason()
	}
	if pe, ok := frame.IsProtocolError(err); ok {
		s.Fail(pe)
		s.waitDone()
		return CloseProtocol
	}
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, net.ErrClosed) {
		return CloseClientEOF
	}
	if errors.Is(err, os.ErrDeadlineExceeded) {
		if !s.framing {
			return CloseConnectTimeout // no complete CONNECT within ConnectTimeout
		}
		return CloseHeartbeatTimeout
	}
	return CloseReadError
}

// waitForWriter stops reading while the connection's queued output (RECEIPTs and ERRORs
// included, which are never refused) is over MaxOutboundBytes: a client that sends without
// reading its answers is slowed to the pace it reads at, and is closed as a slow consumer
// by the write timeout if it stops reading altogether.
func (s *Session) waitForWriter() {
	for {
		s.mu.Lock()
		over := s.queuedBytes > s.opts.MaxOutboundBytes && !s.closing
		if over && s.progress == nil {
			s.progress = make(chan struct{}, 1) // made on first use: most connections never wait
		}
		progress := s.progress
		s.mu.Unlock()
		if !over {
			return
		}
		select {
		case <-progress:
		case <-s.Done():
			return
		}
	}
}

// waitDone waits (bounded) for the writer to flush a final ERROR or RECEIPT and close.
func (s *Session) waitDone() {
	t := time.NewTimer(s.opts.WriteTimeout + time.Second)
	defer t.Stop()
	select {
	case <-s.Done():
	case <-t.C:
	}
}

func (s *Session) handshake() (Link, CloseReason) {
	f, err := s.parser.ReadFrame()
	if err != nil {
		return nil, s.readFailure(err)
	}
	if f.Command != frame.CmdConnect && f.Command != frame.CmdStomp {
		s.Fail(&frame.ProtocolError{Reason: "expected CONNECT frame", ReceiptID: f.Value(frame.HdrReceipt), Fatal: true,
			Detail: "the first frame on a connection must be CONNECT or STOMP, not " + f.Command.String()})
		s.waitDone()
		return nil, CloseProtocol
	}
	if pe := frame.CheckBody(f); pe != nil {
		s.Fail(pe)
		s.waitDone()
		return nil, CloseProtocol
	}
	v, ok := s.negotiate(f.Value(frame.HdrAcceptVersion), f.Command)
	if !ok {
		s.writeFrame(&frame.Frame{Command: frame.CmdError, Headers: []frame.Header{
			{Key: frame.HdrVersion, Value: s.versionList()},
			{Key: "content-type", Value: "text/plain"},
			{Key: frame.HdrMessage, Value: "unsupported protocol version"},
		}, Body: []byte("accept-version " + frame.Echo(f.Value(frame.HdrAcceptVersion)) + " names no version this server speaks" +
			" (an absent accept-version means 1.0). Supported protocol versions are " + s.versionList() + "\n")})
		s.CloseAfterFlush(CloseProtocol)
		s.waitDone()
		return nil, CloseProtocol
	}
	s.version.Store(uint32(v))
	s.parser.SetVersion(v)
	var cx, cy time.Duration
	if v >= frame.V11 {
		if hb, present := f.Get(frame.HdrHeartBeat); present {
			if cx, cy, ok = parseHeartBeat(hb); !ok {
				s.Fail(&frame.ProtocolError{Reason: "invalid heart-beat header", Fatal: true,
					Detail: "heart-beat " + frame.Echo(hb) + " is not two comma-separated non-negative integers of milliseconds, as in heart-beat:10000,10000"})
				s.waitDone()
				return nil, CloseProtocol
			}
		}
	}
	if !s.authenticate(f) {
		return nil, CloseAccessRefused
	}
	link, perr := s.h.Connect(s, f)
	if perr != nil {
		perr.Fatal = true
		s.Fail(perr)
		s.waitDone()
		return nil, CloseProtocol
	}
	sx, sy := s.opts.HeartBeatSend, s.opts.HeartBeatRecv
	// Offer the client what it asks for, down to the floor, instead of fixed intervals.
	if sx > 0 && cy > 0 {
		sx = max(cy, s.opts.HeartBeatMin)
	}
	if sy > 0 && cx > 0 {
		sy = max(cx, s.opts.HeartBeatMin)
	}
	if v == frame.V10 {
		sx, sy = 0, 0
	}
	// STOMP 1.2, "Heart-beating": each direction runs at the larger of what one side can do
	// and what the other wants; 0 on either side disables it.
	if sx > 0 && cy > 0 {
		s.sendEvery = max(sx, cy)
	}
	// Liveness (issue 30): a connection that negotiated client heart-beats is closed once
	// silent for HeartBeatGrace times the interval; one that negotiated none is never closed
	// for silence (RabbitMQ and ActiveMQ 5 keep it; TCP keepalive finds dead peers) unless
	// the operator set a ConnectionTTL (Artemis's connection-ttl).
	s.readTimeout = 0
	if cx > 0 && sy > 0 {
		g := max(s.opts.HeartBeatGrace, 1)
		s.readTimeout = time.Duration(float64(max(cx, sy)) * g)
		// A client that promises heart-beats only every few weeks is still held to the TTL
		// (or maxSilence when that is longer), so silent peers never pile up.
		s.readTimeout = min(s.readTimeout, max(s.opts.ConnectionTTL, maxSilence))
	} else if s.opts.ConnectionTTL > 0 {
		s.readTimeout = s.opts.ConnectionTTL
	}
	if s.readTimeout == 0 {
		_ = s.conn.SetReadDeadline(time.Time{}) // clear the handshake deadline
	}
	hdrs := []frame.Header{
		{Key: frame.HdrVersion, Value: v.String()},
		{Key: frame.HdrServer, Value: s.opts.ServerName},
		{Key: frame.HdrSession, Value: s.id},
	}
	if v >= frame.V11 {
		hdrs = append(hdrs, frame.Header{Key: frame.HdrHeartBeat, Value: strconv.FormatInt(sx.Milliseconds(), 10) + "," + strconv.FormatInt(sy.Milliseconds(), 10)})
	}
	s.parser.SetLimits(s.opts.Limits) // logged in: the listener's limits and the large-frame budget
	s.writeFrame(&frame.Frame{Command: frame.CmdConnected, Headers: hdrs})
	s.hbReady.Store(true)
	if s.sendEvery > 0 {
		s.mu.Lock()
		if !s.closing {
			scheduleHeartBeat(s, s.sendEvery/2)
		}
		s.mu.Unlock()
	}
	s.log().Info("connection opened", "version", v.String(), "send_heartbeat", s.sendEvery, "read_timeout", s.readTimeout)
	s.parser.ReleaseScratch() // f is done with; many connections stay idle after CONNECT
	return link, 0
}

func (s *Session) versionList() string {
	parts := make([]string, 0, len(s.opts.Versions))
	for _, v := range s.opts.Versions {
		parts = append(parts, v.String())
	}
	return strings.Join(parts, ",")
}

// negotiate picks the highest version both sides support (STOMP 1.2, "Protocol
// Negotiation"); an absent accept-version means 1.0.
func (s *Session) negotiate(accept string, cmd frame.Command) (frame.Version, bool) {
	supported := func(v frame.Version) bool {
		for _, x := range s.opts.Versions {
			if x == v {
				return true
			}
		}
		return false
	}
	if accept == "" {
		if cmd == frame.CmdStomp && supported(frame.V11) {
			return frame.V11, true
		}
		return frame.V10, supported(frame.V10)
	}
	var best frame.Version
	for _, p := range strings.Split(accept, ",") {
		if v, ok := frame.ParseVersion(p); ok && supported(v) && v > best {
			best = v
		}
	}
	return best, best != 0
}

func parseHeartBeat(v string) (cx, cy time.Duration, ok bool) {
	a, b, found := strings.Cut(v, ",")
	if !found {
		return 0, 0, false
	}
	x, err1 := strconv.ParseUint(strings.TrimSpace(a), 10, 31)
	y, err2 := strconv.ParseUint(strings.TrimSpace(b), 10, 31)
	if err1 != nil || err2 != nil {
		return 0, 0, false
	}
	return time.Duration(x) * time.Millisecond, time.Duration(y) * time.Millisecond, true
}

// WriteFrame queues a control frame (RECEIPT, ERROR, …) encoded at the negotiated version.
// It is always queued unless the connection is closing; it reports whether it was queued.
func (s *Session) WriteFrame(f *frame.Frame) bool { return s.writeFrame(f) }

func (s *Session) writeFrame(f *frame.Frame) bool {
	b, _ := frame.AppendFrame(make([]byte, 0, 64+len(f.Body)), f, s.Version())
	return s.enqueue(false, b)
}

// WriteMessage queues one MESSAGE frame made of a per-delivery prefix and a shared tail (see
// message.Message.Shared). The tail is not copied and must stay unmodified. It returns false,
// queuing nothing, when the connection is closing or its queued bytes are over
// MaxOutboundBytes; the caller then holds, drops or redelivers the message.
func (s *Session) WriteMessage(prefix *frame.Buf, shared []byte) bool {
	return s.enqueueBuf(prefix, shared)
}

func (s *Session) enqueue(limited bool, bufs ...[]byte) bool {
	return s.enqueueLocked(limited, nil, bufs...)
}

// enqueueBuf queues a MESSAGE whose head is a pooled buffer, released after the write.
func (s *Session) enqueueBuf(prefix *frame.Buf, shared []byte) bool {
	return s.enqueueLocked(true, prefix, prefix.B, shared)
}

// enqueueLocked queues bufs (and remembers pooled to release after writing). It takes s.mu
// itself; the name marks that everything it changes is guarded by s.mu.
func (s *Session) enqueueLocked(limited bool, pooled *frame.Buf, bufs ...[]byte) bool {
	ok, _ := s.enqueueFlow(limited, pooled, bufs...)
	return ok
}

// enqueueFlow is enqueueLocked that also returns the connection's congestion (see
// flow.Outbound.Congested) after the write.
func (s *Session) enqueueFlow(limited bool, pooled *frame.Buf, bufs ...[]byte) (bool, <-chan struct{}) {
	n := 0
	for _, b := range bufs {
		n += len(b)
	}
	s.mu.Lock()
	if s.closing {
		s.mu.Unlock()
		return false, nil
	}
	if limited && s.queuedBytes > 0 && s.queuedBytes+int64(n) > s.opts.MaxOutboundBytes {
		s.wantDrain = true
		s.mu.Unlock()
		return false, nil
	}
	s.chunks = append(s.chunks, bufs...)
	if pooled != nil {
		s.pooled = append(s.pooled, pooled)
	}
	s.queuedBytes += int64(n)
	s.flow.Grow(int64(n))
	congested := s.flow.Congested()
	start := !s.writerActive
	s.writerActive = true
	s.mu.Unlock()
	s.outBytes.Add(int64(n))
	if start {
		go s.writeLoop()
	}
	return true, congested
}

// OnDrain sets fn to be called (from the writer goroutine) when the outbound queue falls to
// half of MaxOutboundBytes after a WriteMessage was refused. Set it before the connection
// carries MESSAGE frames (in Handler.Connect); fn must not block.
func (s *Session) OnDrain(fn func()) { s.onDrain = fn }

// Disconnect closes the connection after everything queued (a RECEIPT for DISCONNECT
// included) is written.
func (s *Session) Disconnect() { s.CloseAfterFlush(CloseClientDisconnect) }

// clientCommands ends the detail of an ERROR for a frame a client may not send.
const clientCommands = "a client sends CONNECT, STOMP, SEND, SUBSCRIBE, UNSUBSCRIBE, ACK, NACK, BEGIN, COMMIT, ABORT or DISCONNECT"

// Fail sends an ERROR frame for pe (message header, receipt-id when set, detail as body,
// passed through frame.SanitizeDetail whichever stage wrote it) and,
// when pe.Fatal, closes the connection once the frame is written (STOMP 1.2, "ERROR": the
// server MUST close the connection after sending ERROR).
func (s *Session) Fail(pe *frame.ProtocolError) {
	s.log().Info("protocol error", "reason", pe.Reason, "detail", pe.Detail, "err", pe.Err)
	s.writeError(pe.Reason, pe.ReceiptID, pe.Detail)
	if pe.Fatal {
		s.CloseAfterFlush(CloseProtocol)
	}
}

// writeError queues an ERROR frame: message header reason, receipt-id when receiptID is
// set, and detail (passed through frame.SanitizeDetail) as its text/plain body when not
// empty. Every ERROR that explains a close is written by it (Fail, the slow-consumer and
// operator closes).
func (s *Session) writeError(reason, receiptID, detail string) {
	hdrs := []frame.Header{{Key: frame.HdrMessage, Value: reason}}
	if receiptID != "" {
		hdrs = append(hdrs, frame.Header{Key: frame.HdrReceiptID, Value: receiptID})
	}
	var body []byte
	if detail != "" {
		body = []byte(frame.SanitizeDetail(detail) + "\n")
		hdrs = append(hdrs, frame.Header{Key: frame.HdrContentType, Value: "text/plain"})
	}
	hdrs = append(hdrs, frame.Header{Key: frame.HdrContentLength, Value: strconv.Itoa(len(body))})
	s.writeFrame(&frame.Frame{Command: frame.CmdError, Headers: hdrs, Body: body})
}

// CloseAfterFlush stops accepting writes and closes the connection once everything queued so
// far is written (bounded by WriteTimeout).
func (s *Session) CloseAfterFlush(reason CloseReason) {
	s.mu.Lock()
	if !s.closing {
		s.closing = true
		s.setReasonLocked(reason)
	}
	s.flow.Close() // no more writes: producers waiting on this connection continue
	active := s.writerActive
	s.mu.Unlock()
	if !active {
		s.Close(reason) // nothing queued: the writer closes after its last write otherwise
	}
}

// Close closes the connection at once, dropping anything not yet written. Idempotent.
func (s *Session) Close(reason CloseReason) {
	s.mu.Lock()
	s.closing = true
	s.setReasonLocked(reason)
	s.flow.Close()
	cancelHeartBeat(s)
	if s.frameTimer != nil {
		s.frameTimer.Stop()
	}
	first := !s.closed
	var done chan struct{}
	s.closed = true
	s.mu.Unlock()
	if first {
		_ = s.conn.Close()
		s.log().Info("connection closed", "reason", s.reason().String())
		// Done is closed last: whoever waits on it sees the socket closed and the close
		// logged. A Done made meanwhile is closed here too.
		s.mu.Lock()
		s.finished = true
		done = s.done
		s.mu.Unlock()
		if done != nil {
			close(done)
		}
	}
}

// setReasonLocked records the first close reason. s.mu must be held. A connection whose
// reason is CloseSlowConsumer is counted in Options.FlowStats here, and only here, so that
// titan_slow_consumers_closed_total and titan_connections_closed_total{reason="slow_consumer"}
// count the same closes (the flow-control timeout, a client-ack subscriber that stalls its
// producers, and a socket write that timed out alike; issue 30).
func (s *Session) setReasonLocked(r CloseReason) {
	if !s.reasonSet {
		s.closeReason, s.reasonSet = r, true
		if st := s.opts.FlowStats; st != nil && r == CloseSlowConsumer {
			st.SlowConsumers.Add(1)
		}
	}
}

func (s *Session) reason() CloseReason {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closeReason
}

func (s *Session) isClosing() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closing
}

// Reason returns why the connection closed (meaningful once Done is closed).
func (s *Session) Reason() CloseReason { return s.reason() }

var heartBeatEOL = []byte{'\n'}

// maxSilence caps how long a connection that negotiated very slow client heart-beats may
// stay silent (it never exceeds the connection TTL when that is longer).
const maxSilence = 10 * time.Minute

// vectorWriter is implemented by connections that send a batch of chunks as one unit (the
// WebSocket transport sends one message per batch).
type vectorWriter interface {
	WriteVectored(bufs [][]byte) (int64, error)
}

// heartBeat runs from heartBeats every sendEvery/2: it queues a heart-beat EOL when
// nothing was written for sendEvery/2 and nothing is queued (STOMP 1.2, "Heart-beating").
func (s *Session) heartBeat() {
	half := s.sendEvery / 2
	s.mu.Lock()
	if s.closing {
		s.mu.Unlock()
		return
	}
	idle := len(s.chunks) == 0 && time.Since(s.created)-s.lastWrite >= half
	scheduleHeartBeat(s, half)
	s.mu.Unlock()
	if idle {
		s.enqueue(false, heartBeatEOL)
	}
}

// writeLoop drains queued chunks with one writev per round and returns once nothing is
// queued: it is started by the enqueue that finds no writer running (writerActive), so an
// idle connection has no writer goroutine (its stack is the larger part of an idle
// connection's memory). When the connection is closing it closes it after the last write.
func (s *Session) writeLoop() {
	defer func() {
		if r := recover(); r != nil {
			s.log().Error("writer panic", "panic", r, "stack", string(debug.Stack()))
			s.mu.Lock()
			s.writerActive = false
			s.mu.Unlock()
			s.Close(CloseWriteError)
		}
	}()
	for {
		s.mu.Lock()
		if len(s.chunks) == 0 || s.isDone() {
			s.writerActive = false
			closing := s.closing
			s.mu.Unlock()
			if closing {
				s.Close(s.reason())
			}
			return
		}
		// bufs and s.chunks must never share a backing array: the one detached here comes
		// back as the spare after the write.
		bufs := s.chunks
		s.chunks = s.spare[:0]
		s.spare = nil
		release := s.pooled
		s.pooled = s.spareBufs[:0]
		s.spareBufs = nil
		s.mu.Unlock()
		n := int64(0)
		for _, b := range bufs {
			n += int64(len(b))
		}
		_ = s.conn.SetWriteDeadline(time.Now().Add(s.opts.WriteTimeout))
		var err error
		if vw, ok := s.conn.(vectorWriter); ok {
			_, err = vw.WriteVectored(bufs) // message transports: one message per batch
		} else {
			nb := net.Buffers(bufs)
			_, err = nb.WriteTo(s.conn) // writev
		}
		if t := s.opts.Traffic; t != nil && err == nil {
			t.Out.Add(uint64(n))
		}
		clear(bufs)
		for i, b := range release {
			frame.PutBuf(b) // on the socket (or the connection is gone): recycle
			release[i] = nil
		}
		s.mu.Lock()
		s.queuedBytes -= n
		s.flow.Shrink(n)
		s.lastWrite = time.Since(s.created)
		s.spare, s.spareBufs = bufs[:0], release[:0]
		drained := s.wantDrain && s.queuedBytes <= s.opts.MaxOutboundBytes/2 && !s.closing
		if drained {
			s.wantDrain = false
		}
		if err != nil {
			s.writerActive = false
		}
		progress := s.progress
		s.mu.Unlock()
		if drained && s.onDrain != nil {
			s.onDrain()
		}
		s.outBytes.Add(-n)
		if progress != nil {
			select {
			case progress <- struct{}{}:
			default:
			}
		}
		if err != nil {
			r := CloseWriteError
			if errors.Is(err, os.ErrDeadlineExceeded) {
				r = CloseSlowConsumer
			}
			s.log().Debug("write failed", "err", err)
			s.Close(r)
			return
		}
	}
}

// isDone reports whether Close ran (the connection is gone: nothing more is written). s.mu
// must be held.
func (s *Session) isDone() bool { return s.closed }

// String identifies the session in logs.
func (s *Session) String() string { return fmt.Sprintf("session %s (%s)", s.id, s.RemoteAddr()) }
