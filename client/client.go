package client

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/titan-broker/titan/internal/frame"
)

// Client is a connection to a Titan broker (or any STOMP 1.2 broker), re-dialled on loss
// when WithReconnect is given. Create one with Dial; it is safe for concurrent use.
type Client struct {
	addr string
	o    options
	ids  atomic.Uint64

	mu      sync.Mutex
	cn      *conn                    // guarded by mu; the live connection, nil while reconnecting
	ready   chan struct{}            // guarded by mu; closed when cn is set again
	subs    map[string]*Subscription // guarded by mu; live subscriptions by id
	closing bool                     // guarded by mu
	err     error                    // guarded by mu; why the client ended

	done chan struct{} // closed when the client has ended (Close or a failed reconnect)
	wg   sync.WaitGroup

	rpcSubMu sync.Mutex
	rpcSub   *Subscription // guarded by rpcSubMu; the reply temp-queue subscription

	rpcMu   sync.Mutex
	pending map[string]chan *Message // guarded by rpcMu; requests by correlation-id
}

// Dial connects to addr ("host:port") and completes the STOMP CONNECT within ctx (and the
// connect timeout). Errors: a *ConnectError naming the address, the step that failed (dial,
// tls handshake, CONNECT) and the cause, with a hint (nothing listening, plain STOMP
// against a TLS port, an untrusted certificate, refused credentials).
func Dial(ctx context.Context, addr string, opts ...Option) (*Client, error) {
	o := defaultOptions()
	for _, opt := range opts {
		opt(&o)
	}
	cn, err := dialConn(ctx, addr, &o)
	if err != nil {
		return nil, err
	}
	c := &Client{addr: addr, o: o, subs: map[string]*Subscription{}, done: make(chan struct{}),
		ready: make(chan struct{}), pending: map[string]chan *Message{}}
	c.cn = cn
	close(c.ready)
	c.startConn(cn)
	return c, nil
}

// Addr returns the address the client dials.
func (c *Client) Addr() string { return c.addr }

// Server returns the CONNECTED frame's server header of the current connection ("" while
// reconnecting).
func (c *Client) Server() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cn == nil {
		return ""
	}
	return c.cn.server
}

// Done is closed when the client has ended: Close was called, or the connection was lost
// and could not be restored. Err then says why.
func (c *Client) Done() <-chan struct{} { return c.done }

// Err returns why the client ended: nil while it runs, ErrClosed after Close, or an error
// wrapping ErrClosed and the last connection failure.
func (c *Client) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

func (c *Client) nextID(prefix string) string {
	return prefix + strconv.FormatUint(c.ids.Add(1), 10)
}

// current returns the live connection, waiting (bounded by ctx) while reconnecting.
func (c *Client) current(ctx context.Context) (*conn, error) {
	for {
		c.mu.Lock()
		cn, ready, err := c.cn, c.ready, c.err
		c.mu.Unlock()
		if err != nil {
			return nil, err
		}
		if cn != nil && !cn.isDone() {
			return cn, nil
		}
		if cn != nil {
			// Lost, and the client has not dealt with it yet: wait until it has.
			select {
			case <-cn.handled:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
			continue
		}
		select {
		case <-ready:
		case <-c.done:
		case <-ctx.Done():
			return nil, fmt.Errorf("waiting for the connection to %s: %w", c.addr, ctx.Err())
		}
	}
}

// Receipt is the broker's RECEIPT for a SEND.
type Receipt struct {
	// Headers are the RECEIPT's headers; Titan adds correlation-id for a command or query
	// sent without one.
	Headers []Header
}

// Header returns the first receipt header named name, or "".
func (r *Receipt) Header(name string) string {
	for _, h := range r.Headers {
		if h.Name == name {
			return h.Value
		}
	}
	return ""
}

// Send sends body to destination in group ("" or "default": the default group) and, unless
// WithoutReceipt is given, waits for the broker's RECEIPT: for queues and events-store the
// message is then stored and fsync'd. body is not retained after Send returns.
//
// Errors: ctx's error when it ends first (the message may still be accepted); a *ServerError
// when the broker refuses the frame (invalid destination, a body over its limit, ...);
// ErrConnectionLost (wrapped) when the connection ends before the RECEIPT, wrapping the
// *ServerError too when an ERROR that did not name this frame's receipt ended it (test with
// errors.Is / errors.As); ErrClosed after Close or a failed reconnect. While reconnecting, Send waits for the new connection (bounded by ctx).
func (c *Client) Send(ctx context.Context, group, destination string, body []byte, opts ...SendOption) (*Receipt, error) {
	var so sendOptions
	for _, opt := range opts {
		opt(&so)
	}
	f := &frame.Frame{Command: frame.CmdSend, Body: body, Headers: make([]frame.Header, 0, 4+len(so.headers))}
	f.Add(frame.HdrDestination, destination)
	if group != "" && group != "default" {
		f.Add(frame.HdrGroup, group)
	}
	for _, h := range so.headers {
		f.Add(h[0], h[1])
	}
	return c.sendFrame(ctx, f, !so.noReceipt)
}

// sendFrame writes f on the current connection and, when withReceipt, waits for its RECEIPT.
func (c *Client) sendFrame(ctx context.Context, f *frame.Frame, withReceipt bool) (*Receipt, error) {
	cn, err := c.current(ctx)
	if err != nil {
		return nil, err
	}
	if !withReceipt {
		if err := cn.write(f); err != nil {
			return nil, cn.writeFailure(ctx, err)
		}
		return &Receipt{}, nil
	}
	rf, err := cn.request(ctx, f, c.nextID("r-"))
	if err != nil {
		return nil, err
	}
	r := &Receipt{}
	for _, h := range rf.Headers {
		r.Headers = append(r.Headers, Header{Name: h.Key, Value: h.Value})
	}
	return r, nil
}

// Handler receives the messages of one subscription, one at a time, on the subscription's
// own goroutine. It may call any Client method (Send, Request, Ack ...). A handler that
// blocks holds up its subscription, and once the subscription's buffer is full, the whole
// connection's reading.
type Handler func(m *Message)

// Subscription is a live SUBSCRIBE. Safe for concurrent use.
type Subscription struct {
	c           *Client
	id          string
	group, dest string
	opts        subOptions
	handler     Handler
	on          *conn // guarded by c.mu; the connection the SUBSCRIBE was last sent on

	mu     sync.Mutex
	queue  []*Message    // guarded by mu; delivered, not yet handled
	ended  bool          // guarded by mu
	kick   chan struct{} // capacity 1: queue grew or the subscription ended
	room   chan struct{} // capacity 1: queue shrank
	exited chan struct{} // closed when the handler goroutine has returned
}

// ID returns the subscription's id header.
func (s *Subscription) ID() string { return s.id }

// Destination returns the destination subscribed to.
func (s *Subscription) Destination() string { return s.dest }

// Group returns the group subscribed in ("default" for the default group).
func (s *Subscription) Group() string {
	if s.group == "" {
		return "default"
	}
	return s.group
}

// Subscribe subscribes to destination in group and calls handler for every MESSAGE, in
// order, on a goroutine of the subscription. It waits for the broker's RECEIPT of the
// SUBSCRIBE (bounded by the connect timeout), so a returned subscription is registered at
// the broker. After a reconnect the subscription is sent again with the same id.
//
// Errors: a *ServerError when the broker refuses (invalid destination, access refused, too
// many subscriptions), ErrConnectionLost, ErrClosed.
func (c *Client) Subscribe(group, destination string, handler Handler, opts ...SubscribeOption) (*Subscription, error) {
	if handler == nil {
		return nil, errors.New("client: Subscribe needs a handler")
	}
	so := subOptions{ack: AckAuto, buffer: 1000}
	for _, opt := range opts {
		opt(&so)
	}
	switch so.ack {
	case AckAuto, AckClient, AckClientIndividual:
	default:
		return nil, fmt.Errorf("client: ack mode %q is not auto, client or client-individual", so.ack)
	}
	if group == "default" {
		group = ""
	}
	s := &Subscription{c: c, id: c.nextID("sub-"), group: group, dest: destination, opts: so, handler: handler,
		kick: make(chan struct{}, 1), room: make(chan struct{}, 1), exited: make(chan struct{})}
	c.mu.Lock()
	if c.err != nil {
		c.mu.Unlock()
		return nil, c.err
	}
	c.subs[s.id] = s
	c.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), c.o.connectTimeout)
	defer cancel()
	cn, err := c.current(ctx)
	if err == nil {
		err = s.subscribeOn(ctx, cn)
	}
	if err != nil {
		c.mu.Lock()
		delete(c.subs, s.id)
		c.mu.Unlock()
		return nil, err
	}
	c.wg.Add(1)
	go s.run()
	return s, nil
}

// subscribeOn sends the SUBSCRIBE on cn, unless it was already sent there (a reconnect's
// re-subscription can race with Subscribe), and waits for its RECEIPT.
func (s *Subscription) subscribeOn(ctx context.Context, cn *conn) error {
	s.c.mu.Lock()
	if s.on == cn || s.c.subs[s.id] != s { // already sent there, or unsubscribed meanwhile
		s.c.mu.Unlock()
		return nil
	}
	s.on = cn
	s.c.mu.Unlock()
	f := &frame.Frame{Command: frame.CmdSubscribe, Headers: []frame.Header{
		{Key: frame.HdrDestination, Value: s.dest}, {Key: frame.HdrID, Value: s.id}, {Key: frame.HdrAck, Value: string(s.opts.ack)},
	}}
	if s.group != "" {
		f.Add(frame.HdrGroup, s.group)
	}
	for _, h := range s.opts.headers {
		f.Add(h[0], h[1])
	}
	_, err := cn.request(ctx, f, s.c.nextID("r-"))
	return err
}

// deliver queues m for the handler, waiting while the buffer is full (until the connection
// or the subscription ends).
func (s *Subscription) deliver(m *Message, cn *conn) {
	for {
		s.mu.Lock()
		if s.ended {
			s.mu.Unlock()
			return
		}
		if len(s.queue) < s.opts.buffer {
			s.queue = append(s.queue, m)
			s.mu.Unlock()
			select {
			case s.kick <- struct{}{}:
			default:
			}
			return
		}
		s.mu.Unlock()
		select {
		case <-s.room:
		case <-cn.done:
			return
		case <-s.exited:
			return
		}
	}
}

func (s *Subscription) run() {
	defer s.c.wg.Done()
	defer close(s.exited)
	for {
		s.mu.Lock()
		if s.ended {
			s.mu.Unlock()
			return
		}
		var m *Message
		if len(s.queue) > 0 {
			m = s.queue[0]
			s.queue[0] = nil
			s.queue = s.queue[1:]
		}
		s.mu.Unlock()
		if m == nil {
			<-s.kick
			continue
		}
		select {
		case s.room <- struct{}{}:
		default:
		}
		s.handler(m)
	}
}

func (s *Subscription) end() {
	s.mu.Lock()
	s.ended = true
	s.queue = nil
	s.mu.Unlock()
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

// Unsubscribe ends the subscription: it stops the handler goroutine after the message it is
// handling, dropping undelivered buffered messages (the broker redelivers unacknowledged
// queue messages), and, when connected, sends UNSUBSCRIBE with a receipt and waits for the
// RECEIPT, as Subscribe does for SUBSCRIBE. So once it returns nil the broker has removed the
// subscription: it gives the subscription no more messages, and the monitor API no longer
// shows it (a durable one shows offline). The wait is bounded by the connect timeout
// (WithConnectTimeout); the connection ending meanwhile counts as done, since the broker
// drops a connection's subscriptions with it. It does not wait for the handler, so it may
// be called from the subscription's own handler.
// Errors: ErrUnsubscribed on a second call; a write error; the broker's *ServerError; a
// timeout when no RECEIPT came.
func (s *Subscription) Unsubscribe() error {
	c := s.c
	c.mu.Lock()
	_, live := c.subs[s.id]
	delete(c.subs, s.id)
	cn := s.on // the connection the SUBSCRIBE went to (a reconnect may not be current yet)
	c.mu.Unlock()
	if !live {
		return ErrUnsubscribed
	}
	s.end()
	if cn == nil || cn.isDone() {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), c.o.connectTimeout)
	defer cancel()
	_, err := cn.request(ctx, &frame.Frame{Command: frame.CmdUnsubscribe, Headers: []frame.Header{{Key: frame.HdrID, Value: s.id}}}, c.nextID("r-"))
	if err != nil && cn.isDone() {
		return nil // the connection ended first: the broker drops its subscriptions with it
	}
	return err
}

// startConn starts cn's reader and heart-beat goroutines.
func (c *Client) startConn(cn *conn) {
	c.wg.Add(2)
	go c.readLoop(cn)
	go c.heartBeatLoop(cn)
}

func (c *Client) readLoop(cn *conn) {
	defer c.wg.Done()
	for {
		f, err := cn.p.ReadFrame()
		if err != nil {
			cn.finish(describeReadErr(c.addr, err))
			c.connLost(cn)
			return
		}
		switch f.Command {
		case frame.CmdMessage:
			f = f.Clone()
			c.mu.Lock()
			s := c.subs[f.Value(frame.HdrSubscription)]
			c.mu.Unlock()
			if s != nil {
				s.deliver(newMessage(f, s, cn), cn)
			}
		case frame.CmdReceipt:
			id := f.Value(frame.HdrReceiptID)
			cn.completeReceipt(id, receiptResult{f: f.Clone()})
		case frame.CmdError:
			se := serverError(f)
			cn.setCause(se)
			if se.ReceiptID != "" {
				cn.completeReceipt(se.ReceiptID, receiptResult{err: se})
			}
			// The broker closes the connection after an ERROR; keep reading until it does
			// so nothing it sent before is lost.
		}
	}
}

func (c *Client) heartBeatLoop(cn *conn) {
	defer c.wg.Done()
	if cn.sendEvery == 0 && cn.recvEvery == 0 {
		<-cn.done
		return
	}
	tick := min(nonZero(cn.sendEvery), nonZero(cn.recvEvery)) / 2
	t := time.NewTicker(tick)
	defer t.Stop()
	for {
		select {
		case <-cn.done:
			return
		case now := <-t.C:
			if cn.sendEvery > 0 && now.Sub(time.Unix(0, cn.lastWrite.Load())) >= cn.sendEvery-tick {
				if err := cn.heartBeat(); err != nil {
					cn.finish(fmt.Errorf("writing a heart-beat to %s: %w", c.addr, unwrapOp(err)))
					return
				}
			}
			if cn.recvEvery > 0 {
				limit := time.Duration(float64(cn.recvEvery) * cn.grace)
				if silent := now.Sub(time.Unix(0, cn.lastRead.Load())); silent > limit {
					cn.finish(fmt.Errorf("no heart-beat from %s for %v (negotiated %v)", c.addr, silent.Round(time.Millisecond), cn.recvEvery))
					return
				}
			}
		}
	}
}

// describeReadErr says what a read failure means for the operator, not just "EOF".
func describeReadErr(addr string, err error) error {
	err = unwrapOp(err)
	switch {
	case errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF):
		return fmt.Errorf("the broker at %s closed the connection (%w)", addr, err)
	case errors.Is(err, syscall.ECONNRESET):
		return fmt.Errorf("the connection to %s was reset (the broker went away or refused a frame: %w)", addr, err)
	case errors.Is(err, net.ErrClosed):
		return fmt.Errorf("the connection to %s was closed by this client (%w)", addr, err)
	}
	return fmt.Errorf("reading from %s: %w", addr, err)
}

func nonZero(d time.Duration) time.Duration {
	if d == 0 {
		return time.Hour
	}
	return d
}

// connLost runs once per connection, on its reader goroutine, after it ended. A connection
// is installed as current only while it is alive (under mu), so its reader always finds it
// installed here, or never.
func (c *Client) connLost(cn *conn) {
	defer close(cn.handled)
	c.mu.Lock()
	if c.cn != cn {
		c.mu.Unlock()
		return
	}
	c.cn = nil
	c.ready = make(chan struct{})
	closing := c.closing
	c.mu.Unlock()
	if closing {
		return
	}
	cause := cn.cause()
	if c.o.onConnLost != nil {
		c.o.onConnLost(cause)
	}
	c.failRequests(cn)
	if c.o.reconnect == nil {
		c.shutdown(fmt.Errorf("%w: connection to %s lost: %v", ErrClosed, c.addr, cause))
		return
	}
	c.wg.Add(1)
	go c.reconnectLoop(cause)
}

func (c *Client) reconnectLoop(cause error) {
	defer c.wg.Done()
	p := c.o.reconnect
	backoff := p.InitialBackoff
	last := cause
	for attempt := 1; p.MaxAttempts < 0 || attempt <= p.MaxAttempts; attempt++ {
		t := time.NewTimer(backoff)
		select {
		case <-c.done:
			t.Stop()
			return
		case <-t.C:
		}
		backoff = min(backoff*2, p.MaxBackoff)
		ctx, cancel := context.WithTimeout(context.Background(), c.o.connectTimeout)
		go func() {
			select {
			case <-c.done:
				cancel()
			case <-ctx.Done():
			}
		}()
		cn, err := dialConn(ctx, c.addr, &c.o)
		if err == nil {
			c.startConn(cn)
			err = c.resubscribe(ctx, cn)
			if err != nil {
				cn.finish(err)
			}
		}
		cancel()
		if err != nil {
			last = err
			continue
		}
		c.mu.Lock()
		if c.closing {
			c.mu.Unlock()
			cn.finish(ErrClosed)
			return
		}
		if cn.isDone() {
			c.mu.Unlock()
			last = cn.cause()
			continue
		}
		c.cn = cn
		close(c.ready)
		c.mu.Unlock()
		if c.o.onReconnect != nil {
			c.o.onReconnect()
		}
		return
	}
	c.shutdown(fmt.Errorf("%w: connection to %s lost and %d reconnect attempts failed; last: %v", ErrClosed, c.addr, p.MaxAttempts, last))
}

// resubscribe sends every live subscription again on cn.
func (c *Client) resubscribe(ctx context.Context, cn *conn) error {
	c.mu.Lock()
	subs := make([]*Subscription, 0, len(c.subs))
	for _, s := range c.subs {
		subs = append(subs, s)
	}
	c.mu.Unlock()
	for _, s := range subs {
		if err := s.subscribeOn(ctx, cn); err != nil {
			return fmt.Errorf("re-subscribing %s: %w", s.dest, err)
		}
	}
	return nil
}

// shutdown ends the client with err (first call wins) and ends every subscription.
func (c *Client) shutdown(err error) {
	c.mu.Lock()
	if c.err != nil {
		c.mu.Unlock()
		return
	}
	c.err = err
	c.closing = true
	cn := c.cn
	subs := c.subs
	c.subs = map[string]*Subscription{}
	c.mu.Unlock()
	for _, s := range subs {
		s.end()
	}
	close(c.done)
	if cn != nil {
		cn.finish(err)
	}
}

// Close sends DISCONNECT (waiting up to 2s for its RECEIPT, so every frame sent before is
// processed by the broker), closes the connection and waits for the client's goroutines,
// including running handlers, to return. Calling Close from a handler deadlocks. Close
// returns nil; later calls on the client return ErrClosed.
func (c *Client) Close() error {
	c.mu.Lock()
	if c.err != nil {
		c.mu.Unlock()
		c.wg.Wait()
		return nil
	}
	c.closing = true
	cn := c.cn
	c.mu.Unlock()
	if cn != nil && !cn.isDone() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		_, _ = cn.request(ctx, &frame.Frame{Command: frame.CmdDisconnect}, c.nextID("r-")) // best effort: closing anyway
		cancel()
	}
	c.shutdown(ErrClosed)
	c.wg.Wait()
	return nil
}
