package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// A SEND the broker did not take — refused (address-full-policy FAIL: ERROR queue full), the
// SENDs a producer pipelined behind that refusal (never answered: the connection closes on
// the ERROR), or discarded (DROP) — is not in the queue, so no restart may deliver it: after
// a restart (SIGTERM or SIGKILL) the queue holds exactly what it held before.
func TestRestartDoesNotResurrectSendsNotTaken(t *testing.T) {
	t.Parallel()
	for _, policy := range []string{"FAIL", "DROP"} {
		t.Run(policy, func(t *testing.T) {
			t.Parallel()
			forEachRestart(t, func(t *testing.T, how restartHow) {
				n := newTitanNode(t, pebbleConfig(t.TempDir(), "")+`  flow-control:
    queue: {max-pending-bytes: 65536}
  address-settings:
    - match: "#"
      address-full-policy: `+policy+"\n")
				const q = "/queue/not-taken"
				p := n.start()
				c := dialRaw(t, p.broker())
				c.connect()
				var burst strings.Builder
				body := strings.Repeat("x", 1024)
				for i := range 300 { // 300 KiB for a queue of 64 KiB
					fmt.Fprintf(&burst, "SEND\ndestination:%s\npersistent:true\nx-i:%d\n\n%s\x00", q, i, body)
				}
				burst.WriteString("SEND\ndestination:/queue/other\nreceipt:end\n\nend\x00")
				requireNoError(t, c.write(burst.String()), "writing the burst")
				f, err := c.readFrame(10 * time.Second)
				requireNoError(t, err, "reading the answer to the burst")
				switch policy {
				case "FAIL":
					if f.command != "ERROR" || !strings.Contains(f.String(), "queue full") {
						t.Fatalf("burst answered by %s, want ERROR queue full", f)
					}
					if _, err := c.expectClosed(10 * time.Second); err != nil {
						t.Fatalf("the connection stayed open after the ERROR: %v", err)
					}
				case "DROP":
					if f.command != "RECEIPT" {
						t.Fatalf("burst answered by %s, want the RECEIPT of its last SEND", f)
					}
				}
				held := requireQueue(t, p.broker(), q, "").Size
				if held <= 0 || held >= 300 {
					t.Fatalf("the queue holds %d messages after the burst, want some and not all", held)
				}
				how.restart(n)
				p = n.start()
				if after := requireQueue(t, p.broker(), q, "").Size; after != held {
					t.Fatalf("after the restart the queue holds %d messages; before it, %d (SENDs it did not take came back)", after, held)
				}
			})
		})
	}
}
