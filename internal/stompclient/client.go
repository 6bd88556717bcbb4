// Package stompclient is the small STOMP 1.2 client the titan command line uses to send,
// subscribe and benchmark (titan send, subscribe, bench). It is not a general-purpose client
// library: one connection, frames in and out, no reconnects.
package stompclient

import (
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/titan-broker/titan/internal/frame"
)

// ErrServer is returned (wrapped, with the ERROR's message header) when the broker answers
// with an ERROR frame.
var ErrServer = errors.New("stompclient: broker sent ERROR")

// Conn is one STOMP connection. Writes are safe for concurrent use; Read must be called
// from one goroutine.
type Conn struct {
	nc net.Conn
	p  *frame.Parser

	wmu sync.Mutex // serialises writes
	buf []byte     // guarded by wmu
}

// Dial connects to addr ("host:port") and completes a STOMP 1.2 CONNECT within timeout.
// Errors: the dial's, ErrServer when the broker refuses.
func Dial(addr string, timeout time.Duration) (*Conn, error) {
	nc, err := net.DialTimeout("tcp", addr, timeout)
	if err != nil {
		return nil, fmt.Errorf("cannot reach the STOMP port %s: %w (is titan serve running? use --stomp host:port)", addr, err)
	}
	c := &Conn{nc: nc, p: frame.NewParser(nc, frame.Limits{MaxBodyBytes: 64 << 20})}
	host, _, _ := net.SplitHostPort(addr)
	if err := c.Write(&frame.Frame{Command: frame.CmdConnect, Headers: []frame.Header{
		{Key: frame.HdrAcceptVersion, Value: "1.2"}, {Key: frame.HdrHost, Value: host}, {Key: frame.HdrHeartBeat, Value: "0,0"},
	}}); err != nil {
		nc.Close()
		return nil, err
	}
	f, err := c.Read(timeout)
	if err != nil {
		nc.Close()
		return nil, err
	}
	if f.Command != frame.CmdConnected {
		nc.Close()
		return nil, fmt.Errorf("%w: %s", ErrServer, f.Value(frame.HdrMessage))
	}
	return c, nil
}

// Write sends f. A body without content-length gets one.
func (c *Conn) Write(f *frame.Frame) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	b := c.buf[:0]
	if f.Command == frame.CmdSend {
		if _, ok := f.Get(frame.HdrContentLength); !ok {
			f.Add(frame.HdrContentLength, strconv.Itoa(len(f.Body)))
		}
	}
	b, _ = frame.AppendFrame(b, f, frame.V12)
	c.buf = b
	_, err := c.nc.Write(b)
	return err
}

// Read returns the next frame (owned by the caller) within timeout (0: no timeout). An ERROR
// frame is returned as a frame; use Check to turn it into an error.
func (c *Conn) Read(timeout time.Duration) (*frame.Frame, error) {
	if timeout > 0 {
		_ = c.nc.SetReadDeadline(time.Now().Add(timeout))
	} else {
		_ = c.nc.SetReadDeadline(time.Time{})
	}
	f, err := c.p.ReadFrame()
	if err != nil {
		return nil, err
	}
	return f.Clone(), nil
}

// Check returns ErrServer (with the message header) for an ERROR frame, nil otherwise.
func Check(f *frame.Frame) error {
	if f.Command == frame.CmdError {
		msg := f.Value(frame.HdrMessage)
		if len(f.Body) > 0 {
			msg += ": " + string(f.Body)
		}
		return fmt.Errorf("%w: %s", ErrServer, msg)
	}
	return nil
}

// Close sends DISCONNECT and closes the connection.
func (c *Conn) Close() error {
	_ = c.Write(&frame.Frame{Command: frame.CmdDisconnect})
	return c.nc.Close()
}
