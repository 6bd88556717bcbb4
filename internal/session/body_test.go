package session

import (
	"io"
	"testing"
	"time"

	"github.com/titan-broker/titan/internal/frame"
)

// noBodyCommands are the client frames that must not carry a body (STOMP 1.2, "Frames and
// Headers": only SEND, MESSAGE and ERROR may).
var noBodyCommands = []string{"CONNECT", "STOMP", "SUBSCRIBE", "UNSUBSCRIBE", "ACK", "NACK", "BEGIN", "COMMIT", "ABORT", "DISCONNECT"}

// A client frame that must not carry a body but does gets an ERROR "body not allowed" with
// the frame's receipt, and the connection closes without the frame being handled; with or
// without content-length.
func TestBodyNotAllowed(t *testing.T) {
	for _, cmd := range noBodyCommands {
		for _, cl := range []bool{false, true} {
			name := cmd
			if cl {
				name += "/content-length"
			}
			t.Run(name, func(t *testing.T) {
				c, p, link, _ := serve(t, DefaultOptions())
				first := cmd == "CONNECT" || cmd == "STOMP"
				if !first {
					_, _ = c.Write([]byte("CONNECT\naccept-version:1.2\n\n\x00"))
					if f := read(t, c, p); f.Command != frame.CmdConnected {
						t.Fatalf("%s", f)
					}
				}
				raw := cmd + "\naccept-version:1.2\nreceipt:r-body\n"
				if cl {
					raw += "content-length:4\n"
				}
				_, _ = c.Write([]byte(raw + "\nbody\x00"))
				f := read(t, c, p)
				if f.Command != frame.CmdError || f.Value("message") != "body not allowed" || f.Value("receipt-id") != "r-body" {
					t.Fatalf("answer = %s, want ERROR message:body not allowed receipt-id:r-body", f)
				}
				_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
				if _, err := c.Read(make([]byte, 1)); err != io.EOF {
					t.Fatalf("after the ERROR: read %v, want EOF (closed)", err)
				}
				if !first {
					if r := <-link.closed; r != CloseProtocol {
						t.Fatalf("close reason %s", r)
					}
					link.mu.Lock()
					defer link.mu.Unlock()
					if len(link.frames) != 0 {
						t.Fatalf("frames handled: %v, want none", link.frames)
					}
				}
			})
		}
	}
}

// A "body" of end-of-line octets only is not a body: real clients send one after CONNECT's
// blank line, and the frames stay accepted.
func TestEOLOnlyBodyAccepted(t *testing.T) {
	for _, eols := range []string{"\n", "\r\n", "\n\n", "\r\n\r\n"} {
		c, p, link, _ := serve(t, DefaultOptions())
		_, _ = c.Write([]byte("CONNECT\naccept-version:1.2\n\n" + eols + "\x00"))
		if f := read(t, c, p); f.Command != frame.CmdConnected {
			t.Fatalf("CONNECT with body %q: %s", eols, f)
		}
		_, _ = c.Write([]byte("SUBSCRIBE\nid:1\ndestination:/q\nreceipt:r1\n\n" + eols + "\x00"))
		if f := read(t, c, p); f.Command != frame.CmdReceipt || f.Value("receipt-id") != "r1" {
			t.Fatalf("SUBSCRIBE with body %q: %s", eols, f)
		}
		// SEND keeps its body, whatever it is.
		_, _ = c.Write([]byte("SEND\ndestination:/q\nreceipt:r2\n\npayload\x00"))
		if f := read(t, c, p); f.Command != frame.CmdReceipt || f.Value("receipt-id") != "r2" {
			t.Fatalf("SEND: %s", f)
		}
		link.mu.Lock()
		if len(link.frames) != 2 {
			t.Fatalf("handled %v", link.frames)
		}
		link.mu.Unlock()
	}
}
