package session

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/titan-broker/titan/internal/frame"
)

// fakeAuth accepts alice/secret and records what it was shown.
type fakeAuth struct {
	mu   sync.Mutex
	seen []Credentials
}

func (a *fakeAuth) Authenticate(c Credentials) (string, error) {
	a.mu.Lock()
	a.seen = append(a.seen, c)
	a.mu.Unlock()
	if c.Login == "alice" && c.Passcode == "secret" {
		return "alice", nil
	}
	return "", errors.New("no")
}

func TestConnectAuthenticates(t *testing.T) {
	a := &fakeAuth{}
	o := DefaultOptions()
	o.Authenticator = a
	c, p, _, s := serve(t, o)
	_, _ = c.Write([]byte("CONNECT\naccept-version:1.2\nlogin:alice\npasscode:secret\n\n\x00"))
	if f := read(t, c, p); f.Command != frame.CmdConnected {
		t.Fatalf("got %s, want CONNECTED", f.Command)
	}
	if s.Principal() != "alice" {
		t.Fatalf("principal %q", s.Principal())
	}
	if a.seen[0].Remote == nil {
		t.Fatal("the authenticator was not given the remote address")
	}
}

func TestConnectRefusedAfterConstantDelay(t *testing.T) {
	for _, hdrs := range []string{"login:alice\npasscode:wrong\n", "login:bob\npasscode:secret\n", ""} {
		o := DefaultOptions()
		o.Authenticator = &fakeAuth{}
		o.AuthFailureDelay = 200 * time.Millisecond
		c, p, _, s := serve(t, o)
		start := time.Now()
		_, _ = c.Write([]byte("CONNECT\naccept-version:1.2\n" + hdrs + "receipt:r1\n\n\x00"))
		f := read(t, c, p)
		if f.Command != frame.CmdError || f.Value("message") != ReasonAccessRefused || f.Value("receipt-id") != "r1" {
			t.Fatalf("%q: got %s %v", hdrs, f.Command, f.Headers)
		}
		if len(f.Body) != 0 {
			t.Fatalf("the refusal carries a hint: %q", f.Body)
		}
		if el := time.Since(start); el < o.AuthFailureDelay {
			t.Fatalf("refused after %v, before the %v delay", el, o.AuthFailureDelay)
		}
		select {
		case <-s.Done():
		case <-time.After(5 * time.Second):
			t.Fatal("connection not closed after the refusal")
		}
		if s.Reason() != CloseAccessRefused {
			t.Fatalf("close reason %v", s.Reason())
		}
	}
}
