package e2e

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// rawConn is a bare TCP STOMP client for frames no client library sends. It reads frames
// itself (a deliberately independent decoder: it does not use internal/frame).
type rawConn struct {
	t    *testing.T
	conn net.Conn
	r    *bufio.Reader
}

type rawFrame struct {
	command string
	headers [][2]string
	body    []byte
}

// get returns the first value of header key (STOMP: the first repeated header wins).
func (f *rawFrame) get(key string) (string, bool) {
	for _, h := range f.headers {
		if h[0] == key {
			return h[1], true
		}
	}
	return "", false
}

func (f *rawFrame) String() string {
	var b strings.Builder
	b.WriteString(f.command)
	for _, h := range f.headers {
		fmt.Fprintf(&b, " %s:%q", h[0], h[1])
	}
	if len(f.body) > 0 {
		fmt.Fprintf(&b, " body=%q", truncate(string(f.body), 200))
	}
	return b.String()
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + fmt.Sprintf("…(%d bytes)", len(s))
}

func dialRaw(t *testing.T, b *broker) *rawConn {
	t.Helper()
	c, err := net.DialTimeout("tcp", b.stompAddr, 5*time.Second)
	requireNoError(t, err, "dialing %s", b.stompAddr)
	t.Cleanup(func() { _ = c.Close() })
	return &rawConn{t: t, conn: c, r: bufio.NewReaderSize(c, 64<<10)}
}

// write sends raw bytes; a failure is returned, not fatal (a broker that closes early can
// make a large write fail, which some tests expect).
func (c *rawConn) write(raw string) error {
	_ = c.conn.SetWriteDeadline(time.Now().Add(10 * time.Second))
	_, err := io.WriteString(c.conn, raw)
	return err
}

// connect sends CONNECT with extra headers ("k:v" lines) and returns the CONNECTED frame.
func (c *rawConn) connect(extra ...string) *rawFrame {
	c.t.Helper()
	raw := "CONNECT\naccept-version:1.2\nhost:localhost\n"
	for _, h := range extra {
		raw += h + "\n"
	}
	requireNoError(c.t, c.write(raw+"\n\x00"), "writing CONNECT")
	f, err := c.readFrame(10 * time.Second)
	requireNoError(c.t, err, "reading the answer to CONNECT")
	if f.command != "CONNECTED" {
		c.t.Fatalf("CONNECT answered by %s, want CONNECTED", f)
	}
	return f
}

var errHeartbeat = errors.New("heart-beat")

// readFrame returns the next frame, skipping heart-beat EOLs, within timeout.
func (c *rawConn) readFrame(timeout time.Duration) (*rawFrame, error) {
	_ = c.conn.SetReadDeadline(time.Now().Add(timeout))
	for {
		f, err := c.readOne()
		if err == errHeartbeat {
			continue
		}
		return f, err
	}
}

func (c *rawConn) readOne() (*rawFrame, error) {
	line, err := c.r.ReadString('\n')
	if err != nil {
		return nil, err
	}
	line = strings.TrimSuffix(strings.TrimSuffix(line, "\n"), "\r")
	if line == "" {
		return nil, errHeartbeat
	}
	f := &rawFrame{command: line}
	length := -1
	for {
		h, err := c.r.ReadString('\n')
		if err != nil {
			return f, fmt.Errorf("reading %s headers: %w", f.command, err)
		}
		h = strings.TrimSuffix(strings.TrimSuffix(h, "\n"), "\r")
		if h == "" {
			break
		}
		k, v, ok := strings.Cut(h, ":")
		if !ok {
			return f, fmt.Errorf("malformed header line %q in %s", h, f.command)
		}
		if f.command != "CONNECTED" {
			k, v = unescape(k), unescape(v)
		}
		if k == "content-length" && length < 0 {
			if length, err = strconv.Atoi(v); err != nil {
				return f, fmt.Errorf("bad content-length %q", v)
			}
		}
		f.headers = append(f.headers, [2]string{k, v})
	}
	if length >= 0 {
		f.body = make([]byte, length+1)
		if _, err := io.ReadFull(c.r, f.body); err != nil {
			return f, fmt.Errorf("reading %s body: %w", f.command, err)
		}
		if f.body[length] != 0 {
			return f, fmt.Errorf("%s body not terminated by NUL", f.command)
		}
		f.body = f.body[:length]
		return f, nil
	}
	body, err := c.r.ReadBytes(0)
	if err != nil {
		return f, fmt.Errorf("reading %s body: %w", f.command, err)
	}
	f.body = body[:len(body)-1]
	return f, nil
}

func unescape(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	return strings.NewReplacer(`\\`, `\`, `\n`, "\n", `\r`, "\r", `\c`, ":").Replace(s)
}

// expectClosed waits up to timeout for the broker to close the connection. Heart-beat EOLs
// are ignored; any frame is an error. It returns how long the close took.
func (c *rawConn) expectClosed(timeout time.Duration) (time.Duration, error) {
	start := time.Now()
	_ = c.conn.SetReadDeadline(start.Add(timeout))
	for {
		f, err := c.readOne()
		switch {
		case err == errHeartbeat:
			continue
		case err == nil:
			return time.Since(start), fmt.Errorf("got %s, want the connection closed", f)
		case isClosedErr(err):
			return time.Since(start), nil
		case errors.Is(err, os.ErrDeadlineExceeded):
			return time.Since(start), fmt.Errorf("connection still open after %v", timeout)
		default:
			return time.Since(start), err
		}
	}
}

func isClosedErr(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, net.ErrClosed)
}
