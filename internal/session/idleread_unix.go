//go:build unix

package session

import (
	"io"
	"net"
	"os"
	"syscall"
	"time"
)

// reader returns what the parser reads from: an idleReader when the connection has a file
// descriptor (plain TCP), else the deadlineReader.
func (s *Session) reader() io.Reader {
	if sc, ok := s.conn.(syscall.Conn); ok {
		if raw, err := sc.SyscallConn(); err == nil {
			return newIdleReader(s, raw)
		}
	}
	return deadlineReader{s}
}

// idleReader is the deadlineReader of a connection with a file descriptor (plain TCP): it
// reads through the raw connection so that the parser takes its read buffer from the pool
// only once input is ready, and holds none while the connection is idle (frame.IdleReader).
// It is used by the read goroutine only.
type idleReader struct {
	deadlineReader
	raw    syscall.RawConn
	readFn func(fd uintptr) bool // the RawConn.Read callback, made once
	get    func() []byte         // the current ReadIdle call's
	put    func()
	n      int
	rerr   error
}

func newIdleReader(s *Session, raw syscall.RawConn) *idleReader {
	d := &idleReader{deadlineReader: deadlineReader{s}, raw: raw}
	d.readFn = d.read
	return d
}

// read is the RawConn.Read callback: one non-blocking read into get's buffer; on EAGAIN the
// buffer goes back (put) and false makes the poller wait for readiness.
func (d *idleReader) read(fd uintptr) bool {
	for {
		d.n, d.rerr = syscall.Read(int(fd), d.get())
		switch d.rerr {
		case syscall.EINTR:
			continue
		case syscall.EAGAIN:
			d.put()
			return false
		}
		return true
	}
}

// ReadIdle implements frame.IdleReader with the runtime's poller (read deadlines apply, and
// Close wakes it with net.ErrClosed).
func (d *idleReader) ReadIdle(get func() []byte, put func()) (int, error) {
	s := d.s
	if t := s.readTimeout; t > 0 {
		_ = s.conn.SetReadDeadline(time.Now().Add(t))
	}
	d.get, d.put, d.n, d.rerr = get, put, 0, nil
	err := d.raw.Read(d.readFn)
	d.get, d.put = nil, nil
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
