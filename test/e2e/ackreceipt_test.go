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

// TestDurablePositionAfterKill9: a durable events-store subscription's position is saved in
// batches (no fsync per ACK), yet an ACK that got its RECEIPT is durable with every ACK before
// it, and the position never passes an unacknowledged message. Sequences 1-3 and 5 are
// acknowledged (only 5 with a receipt), 4 is not; after SIGKILL the subscription resumes at
// 4, and 1-3 never come back.
func TestDurablePositionAfterKill9(t *testing.T) {
	n := newTitanNode(t, pebbleConfig(filepath.Join(t.TempDir(), "data"), ""))
	b := n.start().broker()
	p := dialRaw(t, b)
	p.connect()
	for i := 1; i <= 8; i++ {
		requireReceipt(t, sendExpect(t, p, "/events-store/positions", fmt.Sprintf("e%d", i)), "events-store SEND")
	}
	c := dialRaw(t, b)
	c.connect()
	const sub = "SUBSCRIBE\ndestination:/events-store/positions\nid:s\nack:client-individual\ndurable-name:audit\nstart-position:first\n\n\x00"
	requireNoError(t, c.write(sub))
	acks := map[string]string{}
	for range 8 {
		f, err := c.readFrame(10 * time.Second)
		requireNoError(t, err, "reading MESSAGE")
		if f.command != "MESSAGE" {
			t.Fatalf("got %s", f)
		}
		ack, _ := f.get("ack")
		acks[string(f.body)] = ack
	}
	for _, body := range []string{"e1", "e2", "e3"} {
		requireNoError(t, c.write("ACK\nid:"+acks[body]+"\n\n\x00"))
	}
	requireNoError(t, c.write("ACK\nid:"+acks["e5"]+"\nreceipt:r\n\n\x00"))
	f, err := c.readFrame(10 * time.Second)
	requireNoError(t, err, "waiting for the ACK's RECEIPT")
	requireEqual(t, "RECEIPT", f.command, "answer to the ACK with a receipt")
	n.kill()

	b = n.start().broker()
	c = dialRaw(t, b)
	c.connect()
	requireNoError(t, c.write(sub))
	f, err = c.readFrame(10 * time.Second)
	requireNoError(t, err, "reading the first MESSAGE after the restart")
	requireEqual(t, "e4", string(f.body), "first MESSAGE after the restart: the lowest unacknowledged one")
	n.stop()
}
