package session

import (
	"testing"
	"time"

	"github.com/titan-broker/titan/internal/frame"
)

// writerRunning reports whether s has a writer goroutine.
func writerRunning(s *Session) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.writerActive
}

// waitIdle waits until s's writer goroutine has returned.
func waitIdle(t *testing.T, s *Session) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for writerRunning(s) {
		if time.Now().After(deadline) {
			t.Fatal("the writer goroutine still runs with nothing queued")
		}
		time.Sleep(time.Millisecond)
	}
}

// TestIdleConnectionHasNoWriter: the writer goroutine runs only while output is queued, and
// a connection whose writer returned still answers: a frame split across TCP writes with
// pauses between them (the read buffer is taken from the pool mid-frame), and heart-beat
// EOLs in between, are read as before.
func TestIdleConnectionHasNoWriter(t *testing.T) {
	c, p, _, s := serve(t, DefaultOptions())
	_, _ = c.Write([]byte("CONNECT\naccept-version:1.2\n\n\x00"))
	if f := read(t, c, p); f.Command != frame.CmdConnected {
		t.Fatalf("%s", f)
	}
	for i, part := range []string{"\n", "\r\n", "SEND\ndestination:/q", "ueue/a\nreceipt:r1\n", "\nbody", "\x00"} {
		waitIdle(t, s)
		if _, err := c.Write([]byte(part)); err != nil {
			t.Fatalf("part %d: %v", i, err)
		}
	}
	if f := read(t, c, p); f.Command != frame.CmdReceipt || f.Value("receipt-id") != "r1" {
		t.Fatalf("%s", f)
	}
	waitIdle(t, s)
	_, _ = c.Write([]byte("SEND\ndestination:/queue/a\nreceipt:r2\n\n\x00"))
	if f := read(t, c, p); f.Command != frame.CmdReceipt || f.Value("receipt-id") != "r2" {
		t.Fatalf("%s", f)
	}
}
