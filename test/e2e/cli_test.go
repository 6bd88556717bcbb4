package e2e

// Issue 3 end to end: the titan queue CLI (the built binary, run as a subprocess) operating a
// real titan process while python3-stomp producers and a subscriber send and receive: create,
// list (table and --output json), pause and resume (a BLOCK producer waits for the resume),
// delete refused for a non-empty queue and forced, groups; exit codes and exact output.

import (
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// listQueues runs `titan queue list --output json [args]` and decodes it.
func listQueues(t *testing.T, b *broker, args ...string) queueList {
	t.Helper()
	r := requireCLIOK(t, b, append([]string{"--output", "json", "queue", "list"}, args...)...)
	var l queueList
	if err := json.Unmarshal([]byte(r.stdout), &l); err != nil {
		t.Fatalf("queue list --output json printed invalid JSON (%v): %q", err, r.stdout)
	}
	return l
}

func findListed(l queueList, destination, group string) (queueStat, bool) {
	for _, q := range l.Queues {
		if q.Destination == destination && q.Group == group {
			return q, true
		}
	}
	return queueStat{}, false
}

// tableRow returns the fields of the `titan queue list` row of destination in group.
func tableRow(t *testing.T, stdout, destination, group string) []string {
	t.Helper()
	for _, line := range strings.Split(stdout, "\n") {
		f := strings.Fields(line)
		if len(f) > 2 && f[0] == group && f[1] == destination {
			return f
		}
	}
	t.Fatalf("queue list shows no row for %s in group %s:\n%s", destination, group, stdout)
	return nil
}

func TestQueueCLIWhileTrafficFlows(t *testing.T) {
	t.Parallel()
	b := startBroker(t, yamlConfigWith("", `  address-settings:
    - {match: "#", address-full-policy: BLOCK, block-timeout: 20000}
`))
	const dest = "/queue/cli-orders"
	s := startLiveScript(t, pythonClient, b, "session", nil)
	call := func(op map[string]any) sessionMsgs {
		t.Helper()
		var out sessionMsgs
		s.call(op, &out)
		return out
	}
	send := func(conn, dest, body string, extra map[string]any) string {
		t.Helper()
		op := map[string]any{"op": "send", "conn": conn, "dest": dest, "body": body}
		for k, v := range extra {
			op[k] = v
		}
		return call(op).Receipt
	}

	// Create, exactly as the issue writes it, then by traffic.
	r := requireCLIOK(t, b, "queue", "create", "/orders", "--max-pending-bytes", "1048576")
	checkEqual(t, "created queue /orders (group default), events: capacity none, max-pending-bytes 1048576 (1 MiB), ring size none\n",
		r.stdout, "queue create /orders stdout")
	r = requireCLIOK(t, b, "queue", "create", "/orders", "--max-pending-bytes", "10")
	checkEqual(t, "queue /orders (group default) already exists; its limits were kept: capacity none, max-pending-bytes 1048576 (1 MiB), ring size none\n",
		r.stdout, "second queue create /orders stdout (idempotent)")

	for _, c := range []string{"sub", "p", "p2"} {
		call(map[string]any{"op": "connect", "conn": c})
	}
	sub := call(map[string]any{"op": "subscribe", "conn": "sub", "dest": dest})
	for i := 0; i < 5; i++ {
		send("p", dest, fmt.Sprintf("o-%d", i), nil)
	}
	call(map[string]any{"op": "wait_messages", "conn": "sub", "count": 5})

	// list: JSON and table.
	l := listQueues(t, b)
	q, ok := findListed(l, dest, "default")
	if !ok {
		t.Fatalf("queue list --output json has no %s: %+v", dest, l)
	}
	checkEqual(t, "queues", q.Pattern, "pattern")
	checkEqual(t, 1, q.Consumers, "consumers")
	checkEqual(t, uint64(5), q.Enqueued, "enqueued")
	checkEqual(t, false, q.Paused, "paused")
	if _, ok := findListed(l, "/orders", "default"); !ok {
		t.Errorf("queue list --output json has no /orders: %+v", l)
	}
	checkEqual(t, "2 queues in 1 group", l.Summary.Text, "summary")
	r = requireCLIOK(t, b, "queue", "list")
	if strings.Contains(r.stdout, "\x1b[") {
		t.Errorf("queue list wrote colour codes to a pipe:\n%s", r.stdout)
	}
	row := tableRow(t, r.stdout, dest, "default")
	checkEqual(t, "queues", row[2], "table PATTERN")
	checkEqual(t, "active", row[len(row)-1], "table STATE")
	if !strings.HasSuffix(r.stdout, "2 queues in 1 group\n") {
		t.Errorf("queue list does not end with the summary line:\n%s", r.stdout)
	}

	// Pause: a producer's SEND waits (BLOCK) — no RECEIPT, and its connection's later frames
	// wait behind it — while other connections and destinations flow; resume releases it.
	r = requireCLIOK(t, b, "queue", "pause", dest)
	checkEqual(t, "paused queue /queue/cli-orders (group default) (0 messages held)\n", r.stdout, "queue pause stdout")
	q, _ = findListed(listQueues(t, b), dest, "default")
	checkEqual(t, true, q.Paused, "paused in queue list --output json")
	row = tableRow(t, requireCLIOK(t, b, "queue", "list").stdout, dest, "default")
	checkEqual(t, "paused", row[len(row)-1], "table STATE while paused")

	blocked := send("p", dest, "while-paused", map[string]any{"wait": false})
	behind := send("p", "/queue/cli-other", "behind-the-blocked-send", map[string]any{"wait": false})
	send("p2", "/queue/cli-other", "p2-while-paused", nil) // another connection is not blocked
	if err := s.try(map[string]any{"op": "wait_receipt", "conn": "p", "receipt": blocked, "timeout": 1}, nil); err == nil {
		t.Errorf("a SEND to the paused queue got its RECEIPT while the queue was paused")
	}
	st := call(map[string]any{"op": "state", "conn": "p"})
	if slices.Contains(st.Receipts, behind) {
		t.Errorf("the SEND behind the blocked one got its RECEIPT while the queue was paused (BLOCK should stop reading the producer's connection)")
	}
	if slices.Contains(msgBodies(call(map[string]any{"op": "state", "conn": "sub"}).Messages), "while-paused") {
		t.Errorf("the subscriber received a message sent while the queue was paused")
	}
	checkEqual(t, 5, int(requireQueue(t, b, dest, "").Enqueued), "enqueued while paused")

	r = requireCLIOK(t, b, "queue", "resume", dest)
	if !regexp.MustCompile(`^resumed queue /queue/cli-orders \(group default\) \([01] messages held\)\n$`).MatchString(r.stdout) {
		t.Errorf("queue resume stdout = %q", r.stdout)
	}
	call(map[string]any{"op": "wait_receipt", "conn": "p", "receipt": blocked})
	call(map[string]any{"op": "wait_receipt", "conn": "p", "receipt": behind})
	got := call(map[string]any{"op": "wait_messages", "conn": "sub", "count": 6})
	if want := append(numbered("o", 5), "while-paused"); !slices.Equal(want, msgBodies(got.Messages)) {
		t.Errorf("subscriber received %q, want %q", msgBodies(got.Messages), want)
	}
	st = call(map[string]any{"op": "state", "conn": "p"})
	if i, j := slices.Index(st.Receipts, blocked), slices.Index(st.Receipts, behind); i < 0 || j < 0 || i > j {
		t.Errorf("receipts %q: want %s then %s", st.Receipts, blocked, behind)
	}

	// Delete: refused while the queue holds messages, forced with --force.
	call(map[string]any{"op": "unsubscribe", "conn": "sub", "id": sub.ID})
	for i := 0; i < 3; i++ {
		send("p", dest, fmt.Sprintf("n-%d", i), nil)
	}
	checkEqual(t, 3, requireQueue(t, b, dest, "").Size, "size before delete")
	requireCLIFail(t, b, "titan: queue /queue/cli-orders is not empty (use --force)\n", "queue", "delete", dest)
	q, ok = findListed(listQueues(t, b), dest, "default")
	if !ok || q.Size != 3 {
		t.Errorf("after a refused delete: queue %+v (exists: %v), want it still holding 3", q, ok)
	}
	r = requireCLIOK(t, b, "queue", "delete", dest, "--force")
	checkEqual(t, "deleted queue /queue/cli-orders (group default), discarding 3 messages\n", r.stdout, "queue delete --force stdout")
	if _, ok := findListed(listQueues(t, b), dest, "default"); ok {
		t.Errorf("queue list still shows %s after delete --force", dest)
	}
	requireCLIFail(t, b, "titan: no queue /queue/cli-orders (see `titan queue list`)\n", "queue", "delete", dest)

	// The next SEND creates a fresh queue; the discarded messages are gone.
	send("p", dest, "fresh", nil)
	q = requireQueue(t, b, dest, "")
	checkEqual(t, uint64(1), q.Enqueued, "enqueued of the fresh queue (counters restart)")
	call(map[string]any{"op": "connect", "conn": "sub2"})
	call(map[string]any{"op": "subscribe", "conn": "sub2", "dest": dest})
	call(map[string]any{"op": "wait_messages", "conn": "sub2", "count": 1})
	call(map[string]any{"op": "disconnect", "conn": "sub2"})
	if got := msgBodies(call(map[string]any{"op": "state", "conn": "sub2"}).Messages); !slices.Equal(got, []string{"fresh"}) {
		t.Errorf("a subscriber of the recreated queue received %q, want only [fresh]", got)
	}

	// Groups: the same destination in group market is another queue.
	send("p", dest, "m-1", map[string]any{"headers": map[string]string{"group": "market"}})
	l = listQueues(t, b, "--group", "market")
	if len(l.Queues) != 1 || l.Queues[0].Group != "market" || l.Queues[0].Destination != dest || l.Queues[0].Size != 1 {
		t.Errorf("queue list --group market = %+v, want only %s in market holding 1", l.Queues, dest)
	}
	checkEqual(t, "1 queue in 1 group", l.Summary.Text, "summary of --group market")
	requireCLIFail(t, b, "titan: queue /queue/cli-orders in group market is not empty (use --force)\n",
		"queue", "delete", dest, "--group", "market")
	r = requireCLIOK(t, b, "--output", "json", "queue", "delete", dest, "--group", "market", "--force")
	var del struct {
		Destination string `json:"destination"`
		Group       string `json:"group"`
		Discarded   int    `json:"discarded"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &del); err != nil || del.Discarded != 1 || del.Group != "market" {
		t.Errorf("queue delete --force --output json = %q (%v), want group market, discarded 1", r.stdout, err)
	}
	if _, ok := findListed(listQueues(t, b), dest, "default"); !ok {
		t.Errorf("deleting %s in group market removed the default group's queue", dest)
	}

	// Errors are one line with a non-zero exit.
	requireCLIFail(t, b, "titan: no queue /queue/nope (see `titan queue list`)\n", "queue", "pause", "/queue/nope")
	requireCLIFail(t, b, "titan: invalid destination \"/queue//x\"\n", "queue", "create", "/queue//x")
	s.finish(nil)
}

// A CLI pointed at nothing fails in one actionable line with a non-zero exit.
func TestQueueCLIUnreachableBroker(t *testing.T) {
	t.Parallel()
	b := &broker{monitorAddr: "127.0.0.1:1"}
	start := time.Now()
	r := titanCLI(t, b, "queue", "list")
	if r.code == 0 || r.stdout != "" || strings.Count(r.stderr, "\n") != 1 ||
		!strings.HasPrefix(r.stderr, "titan: cannot reach the Titan monitor API at http://127.0.0.1:1") {
		t.Errorf("want one line \"titan: cannot reach the Titan monitor API at http://127.0.0.1:1 ...\" and a non-zero exit: %v", r)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("the CLI took %v to report an unreachable broker", d)
	}
}

// In fanout-mode, events destinations have dispatcher queues the CLI operates too: a queue
// created by traffic has capacity 11, pausing it makes a BLOCK producer wait until resume,
// and a message drained with no subscriber is dropped and counted.
func TestQueueCLIOperatesEventsQueuesInFanoutMode(t *testing.T) {
	t.Parallel()
	b := startBroker(t, yamlConfigWith(`fanout-mode: "virtual"`, `  address-settings:
    - {match: "#", address-full-policy: BLOCK, block-timeout: 20000}
`))
	const dest = "/topic/fan"
	s := startLiveScript(t, pythonClient, b, "session", nil)
	var out sessionMsgs
	for _, c := range []string{"sub", "p"} {
		s.call(map[string]any{"op": "connect", "conn": c}, nil)
	}
	s.call(map[string]any{"op": "subscribe", "conn": "sub", "dest": dest}, nil)
	s.call(map[string]any{"op": "send", "conn": "p", "dest": dest, "body": "e-0"}, nil)
	s.call(map[string]any{"op": "wait_messages", "conn": "sub", "count": 1}, nil)
	q, ok := findListed(listQueues(t, b), dest, "default")
	if !ok {
		t.Fatalf("queue list shows no queue for %s in fanout-mode", dest)
	}
	checkEqual(t, "events", q.Pattern, "pattern")
	checkEqual(t, 11, q.Capacity, "capacity of an events queue created by traffic")

	r := requireCLIOK(t, b, "queue", "pause", dest)
	checkEqual(t, "paused queue /topic/fan (group default) (0 messages held)\n", r.stdout, "queue pause stdout")
	s.call(map[string]any{"op": "send", "conn": "p", "dest": dest, "body": "e-1", "wait": false}, &out)
	blocked := out.Receipt
	if err := s.try(map[string]any{"op": "wait_receipt", "conn": "p", "receipt": blocked, "timeout": 1}, nil); err == nil {
		t.Errorf("a SEND to the paused events queue got its RECEIPT while paused")
	}
	requireCLIOK(t, b, "queue", "resume", dest)
	s.call(map[string]any{"op": "wait_receipt", "conn": "p", "receipt": blocked}, nil)
	s.call(map[string]any{"op": "wait_messages", "conn": "sub", "count": 2}, &out)
	if want := []string{"e-0", "e-1"}; !slices.Equal(want, msgBodies(out.Messages)) {
		t.Errorf("subscriber received %q, want %q", msgBodies(out.Messages), want)
	}

	s.call(map[string]any{"op": "send", "conn": "p", "dest": "/topic/fan-nobody", "body": "lost"}, nil)
	eventuallyQueue(t, b, "/topic/fan-nobody", "one message dropped", func(q queueStat) bool { return q.Dropped == 1 && q.Size == 0 })
	r = requireCLIOK(t, b, "queue", "delete", "/topic/fan-nobody")
	checkEqual(t, "deleted queue /topic/fan-nobody (group default)\n", r.stdout, "queue delete stdout")
	s.finish(nil)
}

// The address-full-policy of a full queue, with python3-stomp producers: BLOCK holds the
// producer's SEND (no RECEIPT) until a consumer makes room, and releases it as soon as there
// is room (issue 3: "the producer's other traffic resumes as soon as there is room"); FAIL
// answers ERROR "queue full" with the receipt-id and closes the connection; DROP accepts
// (RECEIPT), discards and counts.
func TestAddressFullPolicies(t *testing.T) {
	t.Parallel()
	b := startBroker(t, yamlConfigWith("", `  address-settings:
    - {match: "capfail", default-max-pending-messages: 2, address-full-policy: FAIL}
    - {match: "capdrop", default-max-pending-messages: 2, address-full-policy: DROP}
    - {match: "#", address-full-policy: BLOCK, block-timeout: 20000}
`))
	session := func(t *testing.T) (*liveScript, func(conn, dest, body string, wait bool) string) {
		s := startLiveScript(t, pythonClient, b, "session", nil)
		return s, func(conn, dest, body string, wait bool) string {
			t.Helper()
			var out sessionMsgs
			s.call(map[string]any{"op": "send", "conn": conn, "dest": dest, "body": body, "wait": wait}, &out)
			return out.Receipt
		}
	}

	t.Run("BLOCK until a consumer makes room", func(t *testing.T) {
		t.Parallel()
		const dest = "/queue/capblock"
		s, send := session(t)
		var st sessionMsgs
		r := requireCLIOK(t, b, "queue", "create", dest, "--capacity", "2")
		checkEqual(t, "created queue /queue/capblock (group default), queues: capacity 2, max-pending-bytes 67108864 (64 MiB), ring size none\n",
			r.stdout, "queue create --capacity stdout")
		s.call(map[string]any{"op": "connect", "conn": "p"}, nil)
		send("p", dest, "b-0", true)
		send("p", dest, "b-1", true)
		blocked := send("p", dest, "b-2", false)
		if err := s.try(map[string]any{"op": "wait_receipt", "conn": "p", "receipt": blocked, "timeout": 1}, nil); err == nil {
			t.Fatalf("a SEND to a full BLOCK queue got its RECEIPT with no room")
		}
		checkEqual(t, 2, requireQueue(t, b, dest, "").Size, "size of the full queue")
		s.call(map[string]any{"op": "connect", "conn": "c"}, nil)
		s.call(map[string]any{"op": "subscribe", "conn": "c", "dest": dest}, nil)
		s.call(map[string]any{"op": "wait_messages", "conn": "c", "count": 2}, nil)
		drained := eventuallyQueue(t, b, dest, "drained by the consumer", func(q queueStat) bool { return q.Size == 0 })
		// There is room now: the blocked SEND must go through well before the 20 s block-timeout.
		if err := s.try(map[string]any{"op": "wait_receipt", "conn": "p", "receipt": blocked, "timeout": 5}, nil); err != nil {
			t.Fatalf("the blocked SEND still has no RECEIPT 5 s after a consumer drained the queue (monitor: size %d, acked %d, "+
				"consumers %d; block-timeout 20 s): a BLOCK producer is not released when room appears (%v)",
				drained.Size, drained.Acked, drained.Consumers, err)
		}
		s.call(map[string]any{"op": "wait_messages", "conn": "c", "count": 3}, &st)
		if want := numbered("b", 3); !slices.Equal(want, msgBodies(st.Messages)) {
			t.Errorf("consumer received %q, want %q", msgBodies(st.Messages), want)
		}
		s.finish(nil)
	})
	t.Run("FAIL", func(t *testing.T) {
		t.Parallel()
		const dest = "/queue/capfail"
		s, send := session(t)
		var st sessionMsgs
		s.call(map[string]any{"op": "connect", "conn": "p"}, nil)
		send("p", dest, "f-0", true)
		send("p", dest, "f-1", true)
		rid := send("p", dest, "f-2", false)
		s.call(map[string]any{"op": "wait_reply", "conn": "p", "receipt": rid}, &st)
		if slices.Contains(st.Receipts, rid) || len(st.Errors) != 1 {
			t.Fatalf("SEND to a full FAIL queue: receipts %q, errors %v; want one ERROR and no RECEIPT", st.Receipts, st.Errors)
		}
		checkEqual(t, "queue full", st.Errors[0].Headers["message"], "ERROR message")
		checkEqual(t, rid, st.Errors[0].Headers["receipt-id"], "ERROR receipt-id")
		s.call(map[string]any{"op": "wait_closed", "conn": "p"}, nil)
		qs := requireQueue(t, b, dest, "")
		checkEqual(t, 2, qs.Size, "size of the full FAIL queue")
		checkEqual(t, 2, qs.Capacity, "capacity from default-max-pending-messages")
		s.finish(nil)
	})
	t.Run("DROP", func(t *testing.T) {
		t.Parallel()
		const dest = "/queue/capdrop"
		s, send := session(t)
		var st sessionMsgs
		s.call(map[string]any{"op": "connect", "conn": "p"}, nil)
		for i := 0; i < 3; i++ {
			send("p", dest, fmt.Sprintf("d-%d", i), true) // every SEND gets its RECEIPT
		}
		qs := requireQueue(t, b, dest, "")
		checkEqual(t, 2, qs.Size, "size of the full DROP queue")
		checkEqual(t, uint64(1), qs.Dropped, "dropped")
		s.call(map[string]any{"op": "connect", "conn": "c"}, nil)
		s.call(map[string]any{"op": "subscribe", "conn": "c", "dest": dest}, nil)
		s.call(map[string]any{"op": "wait_messages", "conn": "c", "count": 2}, nil)
		s.call(map[string]any{"op": "disconnect", "conn": "c"}, nil)
		s.call(map[string]any{"op": "state", "conn": "c"}, &st)
		if want := numbered("d", 2); !slices.Equal(want, msgBodies(st.Messages)) {
			t.Errorf("consumer received %q, want %q (d-2 dropped)", msgBodies(st.Messages), want)
		}
		s.finish(nil)
	})
}

// SIGTERM while a producer is blocked (BLOCK policy, paused queue) shuts titan down promptly
// and cleanly: the blocked SEND must not hold the shutdown until its block-timeout.
func TestSIGTERMWhileAProducerIsBlocked(t *testing.T) {
	t.Parallel()
	n := newTitanNode(t, yamlConfigWith("", `  address-settings:
    - {match: "#", address-full-policy: BLOCK, block-timeout: 60000}
`))
	p := n.start()
	b := p.broker()
	const dest = "/queue/blocked-at-shutdown"
	requireCLIOK(t, b, "queue", "create", dest)
	requireCLIOK(t, b, "queue", "pause", dest)
	s := startLiveScript(t, pythonClient, b, "session", nil)
	var out sessionMsgs
	s.call(map[string]any{"op": "connect", "conn": "p"}, nil)
	s.call(map[string]any{"op": "send", "conn": "p", "dest": dest, "body": "stuck", "wait": false}, &out)
	if err := s.try(map[string]any{"op": "wait_receipt", "conn": "p", "receipt": out.Receipt, "timeout": 1}, nil); err == nil {
		t.Fatalf("a SEND to the paused queue got its RECEIPT")
	}
	start := time.Now()
	requireNoError(t, p.cmd.Process.Signal(syscall.SIGTERM), "SIGTERM")
	select {
	case <-p.exited:
	case <-time.After(brokerStopTimeout):
		_ = p.cmd.Process.Kill()
		<-p.exited
		t.Fatalf("titan did not exit within %v of SIGTERM", brokerStopTimeout)
	}
	took := time.Since(start)
	if p.waitErr != nil || took > 5*time.Second {
		t.Errorf("SIGTERM with a producer blocked on a paused queue: titan exited with %v after %v; want a clean exit (status 0) within 5 s\nstderr tail: %s",
			p.waitErr, took.Round(time.Millisecond), lastLines(p.stderr.String(), 3))
	}
	s.finish(nil)
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
