package e2e

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestDuplicateIDsSurviveKillNine (issue 30): 20 rounds of a producer that pipelines
// persistent SENDs with a fresh _AMQ_DUPL_ID each, is cut off by kill -9 after the first
// RECEIPTs, and after the restart resends every SEND it has no RECEIPT for, with the same
// id. Some of those were stored before the crash without their RECEIPT being sent: the id
// is stored in the message's own batch, so the retry is recognised. At the end every id is
// stored exactly once: none twice, none lost.
func TestDuplicateIDsSurviveKillNine(t *testing.T) {
	const (
		rounds   = 20
		perRound = 150
		killAt   = 30 // RECEIPTs read before the kill
		dest     = "/queue/dup-crash"
	)
	node := newTitanNode(t, pebbleConfig(filepath.Join(t.TempDir(), "data"), ""))
	receipted := map[string]bool{}
	var pending []string // sent, not receipted: retried after the restart
	sendAll := func(c *rawConn, ids []string) {
		var b strings.Builder
		for _, id := range ids {
			b.WriteString(frameOf("SEND", []string{"destination:" + dest, "persistent:true", "_AMQ_DUPL_ID:" + id, "receipt:" + id}, "body-"+id))
		}
		requireNoError(t, c.write(b.String()))
	}
	retried := 0
	for round := range rounds {
		p := node.start()
		c := dialRaw(t, p.broker())
		c.connect()
		// The retries of the last round's unanswered SENDs, each must be answered.
		if len(pending) > 0 {
			retried += len(pending)
			sendAll(c, pending)
			for range pending {
				f, err := c.readFrame(30 * time.Second)
				requireNoError(t, err, "round %d: answer to a retried SEND", round)
				id, _ := f.get("receipt-id")
				if f.command != "RECEIPT" {
					t.Fatalf("round %d: retry answered %s", round, f)
				}
				receipted[id] = true
			}
			pending = nil
		}
		ids := make([]string, perRound)
		for i := range ids {
			ids[i] = fmt.Sprintf("r%02d-%03d", round, i)
		}
		sendAll(c, ids)
		got := map[string]bool{}
		for len(got) < killAt {
			f, err := c.readFrame(30 * time.Second)
			requireNoError(t, err, "round %d: RECEIPT", round)
			if f.command != "RECEIPT" {
				t.Fatalf("round %d: %s", round, f)
			}
			id, _ := f.get("receipt-id")
			got[id] = true
		}
		node.kill() // SENDs after the first killAt RECEIPTs are stored or not, answered or not
		for _, id := range ids {
			if got[id] {
				receipted[id] = true
			} else {
				pending = append(pending, id)
			}
		}
	}
	// The last round's unanswered SENDs, retried, then everything drained.
	p := node.start()
	c := dialRaw(t, p.broker())
	c.connect()
	if len(pending) > 0 {
		retried += len(pending)
		sendAll(c, pending)
		for range pending {
			f, err := c.readFrame(30 * time.Second)
			requireNoError(t, err, "answer to a retried SEND")
			if f.command != "RECEIPT" {
				t.Fatalf("retry answered %s", f)
			}
			id, _ := f.get("receipt-id")
			receipted[id] = true
		}
	}
	counts := map[string]int{}
	requireNoError(t, c.write("SUBSCRIBE\ndestination:"+dest+"\nid:d\nack:auto\n\n\x00"))
	requireNoError(t, c.write("SEND\ndestination:"+dest+"\nreceipt:end\n\nEND\x00"))
	for {
		f, err := c.readFrame(30 * time.Second)
		requireNoError(t, err, "draining %s", dest)
		if f.command == "MESSAGE" {
			body := string(f.body)
			if body == "END" {
				break
			}
			counts[strings.TrimPrefix(body, "body-")]++
		}
	}
	twice, lost := 0, 0
	for id, n := range counts {
		if n > 1 {
			twice++
			if twice <= 5 {
				t.Errorf("id %s stored %d times", id, n)
			}
		}
	}
	for id := range receipted {
		if counts[id] == 0 {
			lost++
			if lost <= 5 {
				t.Errorf("id %s was receipted but is not stored", id)
			}
		}
	}
	t.Logf("%d rounds of kill -9: %d ids sent, %d receipted, %d SENDs retried after a restart; %d ids stored, %d twice, %d lost",
		rounds, rounds*perRound, len(receipted), retried, len(counts), twice, lost)
	if twice > 0 || lost > 0 {
		t.Fatalf("%d ids stored twice, %d receipted ids lost", twice, lost)
	}
	if len(receipted) != rounds*perRound {
		t.Fatalf("%d ids receipted, want all %d", len(receipted), rounds*perRound)
	}
}
