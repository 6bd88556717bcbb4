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
			return idleReader{deadlineReader{s}, raw}
		}
	}
	return deadlineReader{s}
}

// idleReader is the deadlineReader of a connection with a file descriptor (plain TCP): it
// reads through the raw connection so that the parser takes its read buffer from the pool
// only once input is ready, and holds none while the connection is idle (frame.IdleReader).
type idleReader struct {
	deadlineReader
	raw syscall.RawConn
}

// ReadIdle implements frame.IdleReader with the runtime's poller: a non-blocking read into
// get's buffer; on EAGAIN the buffer goes back (put) and RawConn.Read waits for readiness
// (read deadlines apply, and Close wakes it with net.ErrClosed).
func (d idleReader) ReadIdle(get func() []byte, put func()) (int, error) {
	s := d.s
	if t := s.readTimeout; t > 0 {
		_ = s.conn.SetReadDeadline(time.Now().Add(t))
	}
	var n int
	var rerr error
	err := d.raw.Read(func(fd uintptr) bool {
		for {
			n, rerr = syscall.Read(int(fd), get())
			switch rerr {
			case syscall.EINTR:
				continue
			case syscall.EAGAIN:
				put()
				return false
			}
			return true
		}
	})
	if err != nil {
		return 0, err // deadline exceeded or connection closed, wrapped in a *net.OpError
	}
	if rerr != nil {
		return 0, &net.OpError{Op: "read", Net: s.conn.LocalAddr().Network(), Source: s.conn.LocalAddr(), Addr: s.conn.RemoteAddr(), Err: os.NewSyscallError("read", rerr)}
	}
	if n == 0 {
		return 0, io.EOF
	}
	if t := s.opts.Traffic; t != nil {
		t.In.Add(uint64(n))
	}
	return n, nil
}
