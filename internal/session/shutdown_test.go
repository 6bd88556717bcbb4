package session

import (
	"bytes"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/titan-broker/titan/internal/frame"
)

type syncLog struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *syncLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *syncLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestShutdownIsNotAProtocolError: a broker shutdown tells the client with an ERROR, closes
// with CloseShutdown, and logs the connection's open and close at INFO with the reason,
// never as a protocol error.
func TestShutdownIsNotAProtocolError(t *testing.T) {
	var logs syncLog
	o := DefaultOptions()
	o.Logger = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
	c, p, link, s := serve(t, o)
	_, _ = c.Write([]byte("CONNECT\naccept-version:1.2\n\n\x00"))
	if f := read(t, c, p); f.Command != frame.CmdConnected {
		t.Fatalf("%s", f)
	}
	s.Shutdown()
	f := read(t, c, p)
	if f.Command != frame.CmdError || f.Value("message") != "server shutting down" {
		t.Fatalf("want ERROR server shutting down, got %s", f)
	}
	if r := <-link.closed; r != CloseShutdown {
		t.Fatalf("close reason %s, want shutdown", r)
	}
	<-s.Done()
	out := logs.String()
	if strings.Contains(out, "protocol error") {
		t.Fatalf("shutdown logged as a protocol error:\n%s", out)
	}
	for _, want := range []string{"level=INFO msg=\"connection opened\"", "level=INFO msg=\"connection closed\"", "reason=shutdown"} {
		if !strings.Contains(out, want) {
			t.Fatalf("log lacks %q:\n%s", want, out)
		}
	}
}
