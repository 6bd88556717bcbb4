package broker_test

import (
	"net"
	"testing"
	"time"

	"github.com/titan-broker/titan/internal/brokertest"
	"github.com/titan-broker/titan/internal/frame"
)

// TestFinalAnswersExactlyOnceOverTheMatrix holds the final-answer invariant on a real broker
// over every store and transport (with Pebble, persistent SENDs to queues and logs are
// answered by the group-commit pipeline): a frame with a receipt gets exactly one RECEIPT —
// the ExpectQuiet barrier proves no second answer follows — a frame without one gets none,
// and a refused frame gets exactly one ERROR echoing its receipt, after which the connection
// closes. The router's own test (TestFinalAnswersExactlyOnceEveryRoute) covers every route
// against fakes.
func TestFinalAnswersExactlyOnceOverTheMatrix(t *testing.T) {
	ok := []struct {
		cmd  string
		hdrs []string
	}{
		{"SEND", []string{"destination:/topic/a"}},
		{"SEND", []string{"destination:/queue/a", "persistent:true"}},
		{"SEND", []string{"destination:/events-store/a"}},
		{"SUBSCRIBE", []string{"destination:/topic/b", "id:s1"}},
		{"UNSUBSCRIBE", []string{"id:s1"}},
		{"BEGIN", []string{"transaction:t1"}},
		{"SEND", []string{"destination:/queue/a", "persistent:true", "transaction:t1"}},
		{"COMMIT", []string{"transaction:t1"}},
		{"BEGIN", []string{"transaction:t2"}},
		{"ABORT", []string{"transaction:t2"}},
	}
	refused := []struct {
		cmd, reason string
		hdrs        []string
	}{
		{"SEND", "invalid destination", []string{"destination:/queue//a"}},
		{"SEND", "unknown transaction", []string{"destination:/queue/a", "persistent:true", "transaction:nope"}},
		{"SUBSCRIBE", "invalid destination", []string{"destination:/queue/a/*", "id:x"}},
		{"ACK", "unknown ack id", []string{"id:nope"}},
		{"COMMIT", "unknown transaction", []string{"transaction:nope"}},
		{"ABORT", "unknown transaction", []string{"transaction:nope"}},
	}
	body := func(cmd string) string { // only SEND carries a body
		if cmd == "SEND" {
			return "b"
		}
		return ""
	}
	brokertest.ForEachSetup(t, func(t *testing.T, s brokertest.Setup) {
		addr := s.Start(t)
		for _, receipt := range []bool{false, true} {
			c := s.Connect(t, addr)
			for i, f := range ok {
				hdrs := f.hdrs
				id := "ok-" + string(rune('a'+i))
				if receipt {
					hdrs = append(append([]string(nil), hdrs...), "receipt:"+id)
				}
				c.SendFrame(f.cmd, body(f.cmd), hdrs...)
				if receipt {
					c.Expect(frame.CmdReceipt, "receipt-id:"+id)
				}
				c.ExpectQuiet() // no second answer (and none without a receipt)
			}
		}
		for _, f := range refused {
			for _, receipt := range []bool{false, true} {
				c := s.Connect(t, addr)
				hdrs := f.hdrs
				want := []string{"message:" + f.reason}
				if receipt {
					hdrs = append(append([]string(nil), hdrs...), "receipt:bad")
					want = append(want, "receipt-id:bad")
				}
				c.SendFrame(f.cmd, body(f.cmd), hdrs...)
				c.Expect(frame.CmdError, want...)
				// Nothing after the ERROR: the next read ends the connection.
				if next, err := c.Read(5 * time.Second); err == nil {
					t.Fatalf("%s refused: a second answer %s after the ERROR", f.cmd, next)
				} else if ne, isNet := err.(net.Error); isNet && ne.Timeout() {
					t.Fatal("the connection stayed open after a fatal ERROR")
				}
			}
		}
	})
}
