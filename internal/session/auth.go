package session

import (
	"crypto/tls"
	"crypto/x509"
	"net"
	"strings"
	"time"

	"github.com/titan-broker/titan/internal/frame"
)

// Credentials are what a connection presents at CONNECT (STOMP 1.2, "CONNECT or STOMP
// Frame": login and passcode headers) plus what its transport verified.
type Credentials struct {
	// Login and Passcode are the CONNECT headers ("" when absent).
	Login, Passcode string
	// Remote is the peer address.
	Remote net.Addr
	// Certificates is the verified client certificate chain, leaf first, stamped by the
	// transport (TLS with client-auth); nil when the connection has none.
	Certificates []*x509.Certificate
}

// Authenticator is the port the session calls at CONNECT, before the Handler's Connect.
// Authenticate returns the principal (the user name) or an error; any error refuses the
// connection with "ERROR message:access refused" (no hint which part was wrong) after
// Options.AuthFailureDelay, then closes it. It is called from the read goroutine of each
// connection and must be safe for concurrent use. It must log and count failures itself
// (the session logs none: it never sees why).
type Authenticator interface {
	Authenticate(c Credentials) (principal string, err error)
}

// LoginThrottle is the port the session calls around authentication (implemented by
// admission.LoginThrottle): Admit before the credentials of a login from remote naming user
// are checked — the wait to observe first, or an error to refuse the attempt unchecked —
// then Fail or Succeed with the outcome. Safe for concurrent use.
type LoginThrottle interface {
	Admit(remote, user string) (time.Duration, error)
	Fail(remote, user string)
	Succeed(remote, user string)
}

// DefaultAuthFailureDelay is Options.AuthFailureDelay's default.
const DefaultAuthFailureDelay = 500 * time.Millisecond

// ReasonAccessRefused is the message header of the ERROR a refused CONNECT gets, and of a
// refused SEND or SUBSCRIBE.
const ReasonAccessRefused = "access refused"

// stateConn is implemented by connections that carry a TLS state: *tls.Conn, and transport
// connections that stamp the state of the TLS connection they run over (WebSocket).
type stateConn interface {
	ConnectionState() tls.ConnectionState
}

// peerCertificates returns the verified client chain of the connection, leaf first.
func (s *Session) peerCertificates() []*x509.Certificate {
	sc, ok := s.conn.(stateConn)
	if !ok {
		return nil
	}
	if tc, ok := s.conn.(*tls.Conn); ok {
		_ = tc.Handshake() // done by the first Read already; a no-op then
	}
	st := sc.ConnectionState()
	if len(st.VerifiedChains) == 0 || len(st.VerifiedChains[0]) == 0 {
		return nil
	}
	return st.VerifiedChains[0]
}

// authenticate runs the Authenticator over the CONNECT frame. On success it records the
// principal; on failure it waits AuthFailureDelay, sends the ERROR and closes.
func (s *Session) authenticate(f *frame.Frame) bool {
	a := s.opts.Authenticator
	if a == nil {
		return true
	}
	login, remote := f.Value(frame.HdrLogin), s.conn.RemoteAddr().String()
	th := s.opts.LoginThrottle
	var err error
	if th != nil {
		// Back-off before the check: a guesser waits, and the broker spends no bcrypt on
		// attempts it refuses outright.
		var wait time.Duration
		if wait, err = th.Admit(remote, login); err == nil && wait > 0 {
			s.sleep(wait)
		}
	}
	if err == nil {
		var user string
		user, err = a.Authenticate(Credentials{
			Login: login, Passcode: f.Value(frame.HdrPasscode),
			Remote: s.conn.RemoteAddr(), Certificates: s.peerCertificates(),
		})
		if th != nil {
			if err == nil {
				th.Succeed(remote, login)
			} else {
				th.Fail(remote, login)
			}
		}
		if err == nil {
			user = strings.Clone(user) // an Authenticator may return a slice of the read buffer
			s.principal.Store(&user)
			return true
		}
	}
	s.sleep(s.opts.AuthFailureDelay)
	s.Fail(&frame.ProtocolError{Reason: ReasonAccessRefused, ReceiptID: f.Value(frame.HdrReceipt)})
	s.CloseAfterFlush(CloseAccessRefused)
	s.waitDone()
	return false
}

// Principal returns the authenticated user of the connection ("" before CONNECT or when no
// Authenticator is configured). Safe for concurrent use.
func (s *Session) Principal() string {
	if p := s.principal.Load(); p != nil {
		return *p
	}
	return ""
}

// sleep waits d, or until the connection closes.
func (s *Session) sleep(d time.Duration) {
	if d <= 0 {
		return
	}
	t := time.NewTimer(d)
	select {
	case <-t.C:
	case <-s.Done():
	}
	t.Stop()
}
