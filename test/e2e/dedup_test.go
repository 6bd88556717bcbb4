package e2e

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// sendDup sends a persistent SEND with duplicate id dupID and a receipt, and requires the
// RECEIPT.
func sendDup(t *testing.T, c *rawConn, destination, dupID, body string) {
	t.Helper()
	requireNoError(t, c.write(fmt.Sprintf("SEND\ndestination:%s\npersistent:true\n_AMQ_DUPL_ID:%s\nreceipt:r\ncontent-length:%d\n\n%s\x00", destination, dupID, len(body), body)))
	f, err := c.readFrame(10 * time.Second)
	requireNoError(t, err)
	requireReceipt(t, f, "SEND with _AMQ_DUPL_ID:"+dupID)
}

// drainBodies subscribes to destination (ack:auto) and returns the bodies delivered until
// none arrives for quiet.
func drainBodies(t *testing.T, c *rawConn, destination string, quiet time.Duration) []string {
	t.Helper()
	requireNoError(t, c.write("SUBSCRIBE\ndestination:"+destination+"\nid:d\nack:auto\n\n\x00"))
	var out []string
	for {
		f, err := c.readFrame(quiet)
		if err != nil {
			return out
		}
		if f.command == "MESSAGE" {
			out = append(out, string(f.body))
		}
	}
}

// TestDuplicateIDDeliveredOnce: a SEND repeating a duplicate id on the same destination
// gets its RECEIPT but is neither stored nor delivered again, on any connection and after
// a restart of the broker process; the same id on another destination, and a new id, are
// delivered.
func TestDuplicateIDDeliveredOnce(t *testing.T) {
	n := newTitanNode(t, pebbleConfig(filepath.Join(t.TempDir(), "data"), ""))
	b := n.start().broker()
	c1 := dialRaw(t, b)
	c1.connect()
	sendDup(t, c1, "/queue/dup", "id-1", "first")
	sendDup(t, c1, "/queue/dup", "id-1", "retry on the same connection")
	c2 := dialRaw(t, b)
	c2.connect()
	sendDup(t, c2, "/queue/dup", "id-1", "retry on another connection")
	sendDup(t, c2, "/queue/other", "id-1", "same id, other destination")
	sendDup(t, c2, "/queue/dup", "id-2", "second")
	_ = c1.conn.Close()
	_ = c2.conn.Close()

	// Kill -9 and restart: the ids are journaled with the messages.
	n.kill()
	b = n.start().broker()
	c3 := dialRaw(t, b)
	c3.connect()
	sendDup(t, c3, "/queue/dup", "id-1", "retry after a restart")
	sendDup(t, c3, "/queue/dup", "id-2", "retry after a restart")
	sendDup(t, c3, "/queue/dup", "id-3", "third")
	got := drainBodies(t, c3, "/queue/dup", 2*time.Second)
	requireEqual(t, "first|second|third", strings.Join(got, "|"), "bodies delivered from /queue/dup")
	c4 := dialRaw(t, b)
	c4.connect()
	got = drainBodies(t, c4, "/queue/other", 2*time.Second)
	requireEqual(t, "same id, other destination", strings.Join(got, "|"), "bodies delivered from /queue/other")
	if s := metricSum(scrapeMetrics(t, b), "titan_duplicates_total"); s < 2 {
		t.Errorf("titan_duplicates_total = %v, want >= 2 (the repeats after the restart)", s)
	}
}

// TestDuplicateIDOverPublish: POST /publish goes through the same duplicate stage.
func TestDuplicateIDOverPublish(t *testing.T) {
	b := startBroker(t, yamlConfig(""))
	for range 2 {
		code, body := postPublish(t, b, map[string]any{
			"destination": "/queue/pub", "body": "once",
			"headers": map[string]string{"_AMQ_DUPL_ID": "p-1"},
		})
		requireEqual(t, 200, code, "POST /publish: %s", body)
	}
	c := dialRaw(t, b)
	c.connect()
	got := drainBodies(t, c, "/queue/pub", time.Second)
	requireEqual(t, "once", strings.Join(got, "|"), "bodies delivered")
}

// TestTitanSendSetsDuplicateID: titan send puts a fresh _AMQ_DUPL_ID on every message (so
// its own retry is safe), repeating an id given with -H is delivered once, and with
// --retries 0 (no retry to make safe) it adds none.
func TestTitanSendSetsDuplicateID(t *testing.T) {
	b := startBroker(t, yamlConfig(""))
	env := []string{"TITAN_STOMP=" + b.stompAddr}
	for _, body := range []string{"a", "b"} {
		if r := runTitan(t, env, "send", "/queue/cli-dup", body); r.code != 0 {
			t.Fatalf("%s", r)
		}
	}
	for range 2 {
		if r := runTitan(t, env, "send", "-H", "_AMQ_DUPL_ID:mine", "/queue/cli-dup", "c"); r.code != 0 {
			t.Fatalf("%s", r)
		}
	}
	if r := runTitan(t, env, "send", "--retries", "0", "/queue/cli-dup", "d"); r.code != 0 {
		t.Fatalf("%s", r)
	}
	c := dialRaw(t, b)
	c.connect()
	requireNoError(t, c.write("SUBSCRIBE\ndestination:/queue/cli-dup\nid:d\nack:auto\n\n\x00"))
	var bodies []string
	for {
		f, err := c.readFrame(time.Second)
		if err != nil {
			break
		}
		bodies = append(bodies, string(f.body))
		id, has := f.get("_AMQ_DUPL_ID")
		switch string(f.body) {
		case "a", "b":
			if !strings.HasPrefix(id, "titan-send-") {
				t.Errorf("message %q carries _AMQ_DUPL_ID %q, want a titan-send- id", f.body, id)
			}
		case "d":
			if has {
				t.Errorf("message %q sent with --retries 0 carries _AMQ_DUPL_ID %q", f.body, id)
			}
		}
	}
	requireEqual(t, "a|b|c|d", strings.Join(bodies, "|"), "bodies delivered")
}
