package e2e

import (
	"fmt"
	"path/filepath"
	"testing"
	"time"
)

// TestAckReceiptSurvivesKill9: an ACK that got its RECEIPT is durable. Each round sends
// persistent messages, acknowledges some of them one by one with a receipt (ack:client-
// individual) and SIGKILLs the broker right after the last RECEIPT; after the restart no
// message whose ACK was receipted is delivered again, and every other one is.
func TestAckReceiptSurvivesKill9(t *testing.T) {
	n := newTitanNode(t, pebbleConfig(filepath.Join(t.TempDir(), "data"), ""))
	acked := map[string]bool{}
	sent := 0
	const perRound, ackPerRound, rounds = 200, 120, 3
	for round := range rounds {
		b := n.start().broker()
		p := dialRaw(t, b)
		p.connect()
		for i := range perRound {
			body := fmt.Sprintf("m-%d-%d", round, i)
			requireReceipt(t, sendExpect(t, p, "/queue/acked", body), "persistent SEND")
			sent++
		}
		_ = p.conn.Close()
		c := dialRaw(t, b)
		c.connect()
		requireNoError(t, c.write("SUBSCRIBE\ndestination:/queue/acked\nid:s\nack:client-individual\n\n\x00"))
		var early []*rawFrame // MESSAGEs read while waiting for a RECEIPT
		for a := 0; a < ackPerRound; {
			var f *rawFrame
			if len(early) > 0 {
				f, early = early[0], early[1:]
			} else {
				var err error
				f, err = c.readFrame(10 * time.Second)
				requireNoError(t, err, "round %d: reading MESSAGE %d", round, a)
			}
			if f.command != "MESSAGE" {
				t.Fatalf("round %d: got %s", round, f)
			}
			body := string(f.body)
			if acked[body] {
				t.Fatalf("round %d: %s was delivered again after its ACK was receipted", round, body)
			}
			ackID, _ := f.get("ack")
			requireNoError(t, c.write(fmt.Sprintf("ACK\nid:%s\nreceipt:a\n\n\x00", ackID)))
			// MESSAGEs may come before the RECEIPT: read until it arrives, checking them.
			for {
				g, err := c.readFrame(10 * time.Second)
				requireNoError(t, err, "round %d: waiting for the ACK's RECEIPT", round)
				if g.command == "RECEIPT" {
					break
				}
				early = append(early, g)
			}
			acked[body] = true
			a++
		}
		n.kill()
	}
	// Everything not acknowledged with a receipt comes back; nothing acknowledged does.
	b := n.start().broker()
	c := dialRaw(t, b)
	c.connect()
	got := drainBodies(t, c, "/queue/acked", 3*time.Second)
	seen := map[string]bool{}
	for _, body := range got {
		if acked[body] {
			t.Errorf("%s was delivered again after its ACK was receipted", body)
		}
		seen[body] = true
	}
	requireEqual(t, sent-len(acked), len(seen), "distinct unacknowledged messages delivered after the last restart")
	n.stop()
}
