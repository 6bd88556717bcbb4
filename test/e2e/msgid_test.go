package e2e

import (
	"fmt"
	"testing"
	"time"
)

// A message-id names one message for as long as any client can see it: the message-ids of
// the messages a titan restart recovers and those of the messages sent after it never meet
// (the counter behind "titan-<n>" starts again with every process). A STOMP 1.0/1.1 client
// acknowledges by message-id, and clients deduplicate by it, so a new message that took a
// recovered one's id would be acknowledged, or dropped, in its place.
func TestMessageIDsStayUniqueAcrossRestarts(t *testing.T) {
	t.Parallel()
	forEachRestart(t, func(t *testing.T, how restartHow) {
		n := newTitanNode(t, pebbleConfig(t.TempDir(), ""))
		const q = "/queue/msgid-restart"
		send := func(p *titanProc, tag string) {
			t.Helper()
			c := dialRaw(t, p.broker())
			c.connect()
			for i := range 3 {
				requireNoError(t, c.write(fmt.Sprintf("SEND\ndestination:%s\nreceipt:%s-%d\n\n%s-%d\x00", q, tag, i, tag, i)), "SEND")
				f, err := c.readFrame(10 * time.Second)
				requireNoError(t, err, "reading the RECEIPT of %s-%d", tag, i)
				if f.command != "RECEIPT" {
					t.Fatalf("SEND %s-%d answered by %s", tag, i, f)
				}
			}
		}
		send(n.start(), "before")
		how.restart(n)
		p := n.start()
		send(p, "after")
		c := dialRaw(t, p.broker())
		c.connect()
		requireNoError(t, c.write("SUBSCRIBE\ndestination:"+q+"\nid:s\nack:client-individual\n\n\x00"), "SUBSCRIBE")
		ids := map[string]string{} // message-id → body
		for range 6 {
			f, err := c.readFrame(10 * time.Second)
			requireNoError(t, err, "reading a MESSAGE (have %v)", ids)
			if f.command != "MESSAGE" {
				t.Fatalf("got %s, want MESSAGE", f)
			}
			id, _ := f.get("message-id")
			if prev, dup := ids[id]; dup {
				t.Fatalf("message-id %q names both %q and %q", id, prev, f.body)
			}
			ids[id] = string(f.body)
		}
	})
}
