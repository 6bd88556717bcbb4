package client

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/titan-broker/titan/internal/frame"
)

// conn is one STOMP connection. A Client replaces it on reconnect; Messages keep a pointer to
// the conn that delivered them so a late Ack is recognised as stale.
type conn struct {
	addr    string
	nc      net.Conn
	p       *frame.Parser // read goroutine only
	server  string        // CONNECTED server header
	session string

	sendEvery time.Duration // negotiated outgoing heart-beat (0: none)
	recvEvery time.Duration // negotiated incoming heart-beat (0: none)
	grace     float64

	lastRead  atomic.Int64 // unix ns of the last byte read
	lastWrite atomic.Int64 // unix ns of the last frame or heart-beat written

	wmu  sync.Mutex
	buf  []byte // guarded by wmu
	werr error  // guarded by wmu; sticky

	rmu      sync.Mutex
	receipts map[string]chan receiptResult // guarded by rmu; pending receipt ids

	doneOnce sync.Once
	done     chan struct{}
	// handled is closed once the Client has dealt with the connection's end (replaced it,
	// started reconnecting, or shut down); calls that found it dead wait on it.
	handled chan struct{}
	errMu   sync.Mutex
	err     error // guarded by errMu; why the connection ended
}

// readCounter stamps every successful read, so heart-beat EOLs (which the parser skips)
// still count as life.
type readCounter struct {
	r io.Reader
	c *conn
}

func (rc readCounter) Read(p []byte) (int, error) {
	n, err := rc.r.Read(p)
	if n > 0 {
		rc.c.lastRead.Store(time.Now().UnixNano())
	}
	return n, err
}

// dialConn dials addr, runs the TLS handshake when configured and exchanges
// CONNECT/CONNECTED. Every failure is a *ConnectError naming the address and step.
func dialConn(ctx context.Context, addr string, o *options) (*conn, error) {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, o.connectTimeout)
		defer cancel()
	}
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, &ConnectError{Addr: addr, Step: "address", Err: err, Hint: "use host:port"}
	}
	var d net.Dialer
	nc, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, &ConnectError{Addr: addr, Step: "dial", Err: unwrapOp(err), Hint: dialHint(err)}
	}
	if o.tls != nil {
		cfg := o.tls.Clone()
		if cfg.ServerName == "" {
			cfg.ServerName = host
		}
		tc := tls.Client(nc, cfg)
		if err := tc.HandshakeContext(ctx); err != nil {
			nc.Close()
			return nil, &ConnectError{Addr: addr, Step: "tls handshake", Err: err, Hint: tlsHint(err)}
		}
		nc = tc
	}
	c := &conn{addr: addr, nc: nc, receipts: map[string]chan receiptResult{}, done: make(chan struct{}), handled: make(chan struct{}), grace: o.hbGrace}
	c.p = frame.NewParser(readCounter{nc, c}, frame.Limits{MaxBodyBytes: o.maxBodyBytes})
	if dl, ok := ctx.Deadline(); ok {
		_ = nc.SetDeadline(dl)
	}
	stop := context.AfterFunc(ctx, func() { _ = nc.SetDeadline(time.Now()) })
	defer stop()
	vhost := o.vhost
	if vhost == "" {
		vhost = host
	}
	cf := &frame.Frame{Command: frame.CmdConnect, Headers: []frame.Header{
		{Key: frame.HdrAcceptVersion, Value: "1.2"},
		{Key: frame.HdrHost, Value: vhost},
		{Key: frame.HdrHeartBeat, Value: strconv.FormatInt(o.hbSend.Milliseconds(), 10) + "," + strconv.FormatInt(o.hbRecv.Milliseconds(), 10)},
	}}
	if o.hasLogin {
		cf.Add(frame.HdrLogin, o.login)
		cf.Add(frame.HdrPasscode, o.passcode)
	}
	if err := c.write(cf); err != nil {
		nc.Close()
		return nil, &ConnectError{Addr: addr, Step: "CONNECT", Err: unwrapOp(err), Hint: plainHint(o, err)}
	}
	f, err := c.p.ReadFrame()
	if err != nil {
		nc.Close()
		if ctx.Err() != nil {
			err = fmt.Errorf("no CONNECTED frame: %w", ctx.Err())
		}
		return nil, &ConnectError{Addr: addr, Step: "CONNECT", Err: unwrapOp(err), Hint: plainHint(o, err)}
	}
	switch f.Command {
	case frame.CmdConnected:
	case frame.CmdError:
		se := serverError(f)
		nc.Close()
		return nil, &ConnectError{Addr: addr, Step: "CONNECT", Err: se, Hint: connectRefusedHint(se)}
	default:
		nc.Close()
		return nil, &ConnectError{Addr: addr, Step: "CONNECT", Err: fmt.Errorf("unexpected %s frame instead of CONNECTED", f.Command), Hint: "is this a STOMP port?"}
	}
	if v := f.Value(frame.HdrVersion); v != "1.2" {
		nc.Close()
		return nil, &ConnectError{Addr: addr, Step: "CONNECT", Err: fmt.Errorf("broker chose STOMP version %q, this client speaks 1.2", v)}
	}
	c.server, c.session = f.Value(frame.HdrServer), f.Value(frame.HdrSession)
	sx, sy := parseHeartBeat(f.Value(frame.HdrHeartBeat))
	if o.hbSend > 0 && sy > 0 {
		c.sendEvery = max(o.hbSend, sy)
	}
	if o.hbRecv > 0 && sx > 0 {
		c.recvEvery = max(o.hbRecv, sx)
	}
	_ = nc.SetDeadline(time.Time{})
	now := time.Now().UnixNano()
	c.lastRead.Store(now)
	c.lastWrite.Store(now)
	return c, nil
}

func parseHeartBeat(v string) (x, y time.Duration) {
	a, b, ok := strings.Cut(v, ",")
	if !ok {
		return 0, 0
	}
	xi, _ := strconv.Atoi(strings.TrimSpace(a))
	yi, _ := strconv.Atoi(strings.TrimSpace(b))
	return time.Duration(max(xi, 0)) * time.Millisecond, time.Duration(max(yi, 0)) * time.Millisecond
}

// unwrapOp strips the *net.OpError and *os.SyscallError layers ("dial tcp ...: connect:")
// whose text repeats what the caller's message already says.
func unwrapOp(err error) error {
	var oe *net.OpError
	if errors.As(err, &oe) && oe.Err != nil {
		err = oe.Err
	}
	var se *os.SyscallError
	if errors.As(err, &se) && se.Err != nil {
		err = se.Err
	}
	return err
}

func dialHint(err error) string {
	var dns *net.DNSError
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		return "nothing listens there: is the broker running, and is this its STOMP port?"
	case errors.As(err, &dns):
		return "check the host name"
	case errors.Is(err, context.DeadlineExceeded) || errors.Is(err, syscall.ETIMEDOUT):
		return "no answer: check the address and any firewall"
	}
	return ""
}

func tlsHint(err error) string {
	var rh tls.RecordHeaderError
	var ua x509.UnknownAuthorityError
	var he x509.HostnameError
	switch {
	case errors.As(err, &rh):
		return "the server does not speak TLS on this port: drop TLS or use the broker's TLS listener"
	case errors.As(err, &ua):
		return "the server's certificate is not signed by a trusted CA: pass the CA that signed it"
	case errors.As(err, &he):
		return "the server's certificate does not name this host: connect by a name it lists"
	case isEOFOrReset(err):
		return "the server closed the connection during the handshake: it may not speak TLS, or it refused the client certificate"
	}
	return ""
}

// plainHint explains an end of stream during a plain CONNECT: the classic symptom of
// talking plain STOMP to a TLS port.
func plainHint(o *options, err error) string {
	if o.tls == nil && isEOFOrReset(err) {
		return "the server closed the connection before answering CONNECT: if this port expects TLS, use TLS"
	}
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, syscall.ETIMEDOUT) || isTimeout(err) {
		return "no CONNECTED in time: is this a STOMP port? If it expects TLS, use TLS"
	}
	return ""
}

func connectRefusedHint(se *ServerError) string {
	m := strings.ToLower(se.Message)
	if strings.Contains(m, "auth") || strings.Contains(m, "login") || strings.Contains(m, "passcode") || strings.Contains(m, "credential") {
		return "check the login and passcode"
	}
	return ""
}

func isEOFOrReset(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

func serverError(f *frame.Frame) *ServerError {
	return &ServerError{Message: f.Value(frame.HdrMessage), Body: string(f.Body), ReceiptID: f.Value(frame.HdrReceiptID)}
}

// write encodes f (adding content-length to a SEND) and writes it. Safe for concurrent use;
// the first write error is sticky.
func (c *conn) write(f *frame.Frame) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if c.werr != nil {
		return c.werr
	}
	if f.Command == frame.CmdSend {
		if _, ok := f.Get(frame.HdrContentLength); !ok {
			f.Add(frame.HdrContentLength, strconv.Itoa(len(f.Body)))
		}
	}
	b, _ := frame.AppendFrame(c.buf[:0], f, frame.V12)
	if cap(b) <= 64<<10 {
		c.buf = b
	} else {
		c.buf = nil // do not keep a huge body's buffer
	}
	if _, err := c.nc.Write(b); err != nil {
		c.werr = err
		return err
	}
	c.lastWrite.Store(time.Now().UnixNano())
	return nil
}

// heartBeat writes one EOL.
func (c *conn) heartBeat() error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if c.werr != nil {
		return c.werr
	}
	if _, err := c.nc.Write([]byte{'\n'}); err != nil {
		c.werr = err
		return err
	}
	c.lastWrite.Store(time.Now().UnixNano())
	return nil
}

// receiptResult answers one receipt: the RECEIPT frame (owned), or the error.
type receiptResult struct {
	f   *frame.Frame
	err error
}

// expectReceipt registers a pending receipt id; the channel gets the RECEIPT, a
// *ServerError for an ERROR naming it, or the connection's end.
func (c *conn) expectReceipt(id string) chan receiptResult {
	ch := make(chan receiptResult, 1)
	c.rmu.Lock()
	if c.isDone() {
		c.rmu.Unlock()
		ch <- receiptResult{err: c.lossError()}
		return ch
	}
	c.receipts[id] = ch
	c.rmu.Unlock()
	return ch
}

// request writes f with a receipt header (id) and waits for its RECEIPT frame until ctx
// ends. Errors: a failed write (through writeFailure); the broker's *ServerError for an
// ERROR naming the receipt; the connection's end; when ctx ended first, "no RECEIPT for
// <command> <destination>" wrapping ctx's error. Safe for concurrent use.
func (c *conn) request(ctx context.Context, f *frame.Frame, id string) (*frame.Frame, error) {
	f.Add(frame.HdrReceipt, id)
	ch := c.expectReceipt(id)
	if err := c.write(f); err != nil {
		c.forgetReceipt(id)
		return nil, c.writeFailure(ctx, err)
	}
	select {
	case res := <-ch:
		return res.f, res.err
	case <-ctx.Done():
		c.forgetReceipt(id)
		what := string(f.Command)
		if d, ok := f.Get(frame.HdrDestination); ok {
			what += " " + d
		}
		return nil, fmt.Errorf("no RECEIPT for %s from %s: %w", what, c.addr, ctx.Err())
	}
}

func (c *conn) forgetReceipt(id string) {
	c.rmu.Lock()
	delete(c.receipts, id)
	c.rmu.Unlock()
}

func (c *conn) completeReceipt(id string, r receiptResult) {
	c.rmu.Lock()
	ch, ok := c.receipts[id]
	delete(c.receipts, id)
	c.rmu.Unlock()
	if ok {
		ch <- r
	}
}

func (c *conn) isDone() bool {
	select {
	case <-c.done:
		return true
	default:
		return false
	}
}

// finish ends the connection once with cause err; an ERROR frame seen first stays the cause.
func (c *conn) finish(err error) {
	c.doneOnce.Do(func() {
		c.errMu.Lock()
		if c.err == nil {
			c.err = err
		}
		c.errMu.Unlock()
		_ = c.nc.Close()
		c.rmu.Lock()
		close(c.done)
		pending := c.receipts
		c.receipts = nil
		c.rmu.Unlock()
		loss := c.lossError()
		for _, ch := range pending {
			ch <- receiptResult{err: loss}
		}
	})
}

// setCause records why the connection is about to end (an ERROR frame), before finish.
func (c *conn) setCause(err error) {
	c.errMu.Lock()
	if c.err == nil {
		c.err = err
	}
	c.errMu.Unlock()
}

// cause returns why the connection ended (nil while it runs).
func (c *conn) cause() error {
	c.errMu.Lock()
	defer c.errMu.Unlock()
	return c.err
}

// lossError is what a call waiting on the connection gets when it ends: ErrConnectionLost
// wrapping the cause, which is the broker's *ServerError when an ERROR ended it (so both
// errors.Is(err, ErrConnectionLost) and errors.As(err, **ServerError) hold).
func (c *conn) lossError() error {
	cause := c.cause()
	if cause == nil {
		return ErrConnectionLost
	}
	return fmt.Errorf("%w: %w", ErrConnectionLost, cause)
}

// writeFailure turns a failed write into the most useful error: when the broker closed the
// connection because of an ERROR (a body over its limit, say), the ERROR is read before the
// reset, so wait briefly for the reader to record it.
func (c *conn) writeFailure(ctx context.Context, err error) error {
	t := time.NewTimer(2 * time.Second)
	defer t.Stop()
	select {
	case <-c.done:
	case <-ctx.Done():
	case <-t.C:
	}
	var se *ServerError
	if cause := c.cause(); errors.As(cause, &se) {
		return fmt.Errorf("%w: %w", ErrConnectionLost, se)
	}
	return fmt.Errorf("%w: writing to %s: %v", ErrConnectionLost, c.addr, unwrapOp(err))
}
