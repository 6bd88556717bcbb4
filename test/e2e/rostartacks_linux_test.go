//go:build linux

package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"path/filepath"
	"testing"
	"time"
)

// TestAcksWhileReadOnlyKeptAfterRemount (issue 30): titan starts on a read-only data
// directory holding 200 receipted messages; a client-individual subscriber receives and
// ACKs them all while the store is down (the deletes are refused and kept); the directory
// is remounted writable, the store recovers, and — with no other delete to carry them —
// the kept deletes are written. After a clean restart none of the 200 is delivered again.
func TestAcksWhileReadOnlyKeptAfterRemount(t *testing.T) {
	if delegateMounts(t) {
		return
	}
	mnt := mountTmpfsE2E(t, 256<<20)
	data := filepath.Join(mnt, "data")
	node := newTitanNode(t, pebbleConfig(data, ""))
	p := node.start()
	const dest, sent = "/queue/ro-acks", 200
	c := dialRaw(t, p.broker())
	c.connect()
	for i := range sent {
		if f := persistentSend(t, c, dest, i, 256); f.command != "RECEIPT" {
			t.Fatalf("SEND %d: %s", i, f)
		}
	}
	node.stop()

	writable := bindReadOnly(t, data)
	p = node.start()
	requireStartedDown(t, p, dest, "read-only file system")

	sub := dialRaw(t, p.broker())
	sub.connect()
	requireNoError(t, sub.write(frameOf("SUBSCRIBE", []string{"id:1", "destination:" + dest, "ack:client-individual"}, "")))
	for n := 0; n < sent; {
		f, err := sub.readFrame(30 * time.Second)
		requireNoError(t, err, "receiving while the store is down (%d of %d)", n, sent)
		if f.command != "MESSAGE" {
			t.Fatalf("while receiving: %s", f)
		}
		ack, _ := f.get("ack")
		requireNoError(t, sub.write(frameOf("ACK", []string{"id:" + ack}, "")))
		n++
	}
	// Barrier: every ACK before it was handled.
	requireNoError(t, sub.write(frameOf("SUBSCRIBE", []string{"id:2", "destination:/queue/ro-acks-barrier", "receipt:b"}, "")))
	for {
		f, err := sub.readFrame(30 * time.Second)
		requireNoError(t, err, "RECEIPT of the barrier")
		if f.command == "RECEIPT" {
			break
		}
		if f.command != "MESSAGE" {
			t.Fatalf("before the barrier's RECEIPT: %s", f)
		}
	}
	h := requireHealth(t, p.broker(), 503, "DOWN")
	t.Logf("%d messages acknowledged while the store is down (%s)", sent, h.Store.Cause)

	writable()
	eventually(t, 30*time.Second, func() bool {
		resp, err := httpClient.Get(monitorURL(p.broker()) + "/titan/monitor/health")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		var h healthAnswer
		return json.Unmarshal(b, &h) == nil && h.Store.Status == "ok"
	}, "the store recovers after the remount")
	_ = sub.conn.Close()
	node.stop()

	p = node.start()
	c = dialRaw(t, p.broker())
	c.connect()
	if f := persistentSend(t, c, dest, sent, 16); f.command != "RECEIPT" {
		t.Fatalf("marker SEND: %s", f)
	}
	requireNoError(t, c.write(frameOf("SUBSCRIBE", []string{"id:1", "destination:" + dest, "ack:auto"}, "")))
	f, err := c.readFrame(30 * time.Second)
	requireNoError(t, err, "first message after the restart")
	want := fmt.Sprintf("m-%d;", sent)
	if f.command != "MESSAGE" || string(f.body[:min(len(f.body), len(want))]) != want {
		t.Fatalf("first delivery after the restart is %s, want the marker %q: an acknowledged message came back", f, want)
	}
	t.Logf("after a clean restart the first delivery is the marker: none of the %d acknowledged messages came back", sent)
	node.stop()
}
