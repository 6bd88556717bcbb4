//go:build unix

package session

import (
	"io"
	"net"
	"os"
	"syscall"
	"time"

	"github.com/titan-broker/titan/internal/frame"
)

// reader returns what the parser reads from: an idleReader when the connection has a file
// descriptor (plain TCP), else the deadlineReader.
func (s *Session) reader() io.Reader {
	if sc, ok := s.conn.(syscall.Conn); ok {
		if raw, err := sc.SyscallConn(); err == nil {
			s.idle = idleReader{deadlineReader: deadlineReader{s}, raw: raw}
			s.idle.readFn = s.idle.read
			return &s.idle
		}
	}
	return deadlineReader{s}
}

// idleReader is the deadlineReader of a connection with a file descriptor (plain TCP): it
// reads through the raw connection so that the parser takes its read buffer from the pool
// only once input is ready, and holds none while the connection is idle (frame.IdleReader).
// It is used by the read goroutine only, and is part of the Session (no allocation of its
// own).
type idleReader struct {
	deadlineReader
	raw    syscall.RawConn
	readFn func(fd uintptr) bool // the RawConn.Read callback, made once
	buf    frame.IdleBuffer      // the current ReadIdle call's
	n      int
	rerr   error
}

// read is the RawConn.Read callback: one non-blocking read into get's buffer; on EAGAIN the
// buffer goes back (Put) and false makes the poller wait for readiness.
func (d *idleReader) read(fd uintptr) bool {
	for {
		d.n, d.rerr = syscall.Read(int(fd), d.buf.Take())
		switch d.rerr {
		case syscall.EINTR:
			continue
		case syscall.EAGAIN:
			d.buf.Put()
			return false
		}
		return true
	}
}

// ReadIdle implements frame.IdleReader with the runtime's poller (read deadlines apply, and
// Close wakes it with net.ErrClosed).
func (d *idleReader) ReadIdle(b frame.IdleBuffer) (int, error) {
	s := d.s
	if t := s.readTimeout; t > 0 {
		_ = s.conn.SetReadDeadline(time.Now().Add(t))
	}
	d.buf, d.n, d.rerr = b, 0, nil
	err := d.raw.Read(d.readFn)
	d.buf = nil
	if err != nil {
		return 0, err // deadline exceeded or connection closed, wrapped in a *net.OpError
	}
	if d.rerr != nil {
		return 0, &net.OpError{Op: "read", Net: s.conn.LocalAddr().Network(), Source: s.conn.LocalAddr(), Addr: s.conn.RemoteAddr(), Err: os.NewSyscallError("read", d.rerr)}
	}
	if d.n <= 0 {
		return 0, io.EOF
	}
	if t := s.opts.Traffic; t != nil {
		t.In.Add(uint64(d.n))
	}
	return d.n, nil
}
