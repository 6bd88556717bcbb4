package brokertest

import (
	"net"
	"os"
	"testing"
	"time"

	"github.com/titan-broker/titan/internal/frame"
)

// TestSetupsRunTheirStoreAndTransport checks that each cell of the matrix is what it says: a
// Pebble setup's broker writes its data directory, a WebSocket setup's clients speak over a
// WebSocket (a raw TCP CONNECT to its listener gets no CONNECTED), and a message round-trips.
func TestSetupsRunTheirStoreAndTransport(t *testing.T) {
	ForEachSetup(t, func(t *testing.T, s Setup) {
		cfg := s.Config(t)
		addr := Run(t, cfg).Addrs()[0]
		if s.Store == "pebble" {
			entries, err := os.ReadDir(cfg.Store.DataDir)
			if err != nil || len(entries) == 0 {
				t.Fatalf("Pebble data directory %s: %d entries, %v", cfg.Store.DataDir, len(entries), err)
			}
		} else if cfg.Store.Type != "memory" {
			t.Fatalf("store %q, want memory", cfg.Store.Type)
		}
		c := s.Connect(t, addr)
		_, tcp := c.Conn.(*net.TCPConn)
		if tcp != (s.Transport == "tcp") {
			t.Fatalf("client connection %T for transport %s", c.Conn, s.Transport)
		}
		if s.Transport == "websocket" {
			raw := Dial(t, addr)
			raw.Send("CONNECT\naccept-version:1.2\nhost:test\n\n\x00")
			if f, err := raw.Read(5 * time.Second); err == nil && f.Command == frame.CmdConnected {
				t.Fatal("the WebSocket listener answered a raw TCP CONNECT")
			}
		}
		c.SendFrame("SUBSCRIBE", "", "destination:/queue/setup", "id:1", "receipt:s")
		c.Expect(frame.CmdReceipt, "receipt-id:s")
		c.SendFrame("SEND", "x", "destination:/queue/setup")
		if m := c.Expect(frame.CmdMessage, "subscription:1"); string(m.Body) != "x" {
			t.Fatalf("body %q", m.Body)
		}
	})
}
