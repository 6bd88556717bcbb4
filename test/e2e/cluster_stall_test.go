package e2e

import (
	"bufio"
	"fmt"
	"net"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/go-stomp/stomp/v3"
)

// Ordering and back-pressure per stream, not per node (issue 28): the leader of one
// group's queue stream is frozen with SIGSTOP while a connection on another node has a
// receipted SEND to it outstanding; SENDs from a second connection on that same node to
// another group's stream (led elsewhere) are all answered while the first stays stalled,
// and the stalled SEND is still stored once its stream has a leader again (0 receipted
// lost).
func TestClusterStalledStreamDoesNotDelayAnotherStream(t *testing.T) {
	t.Parallel() // a cluster test shares the parallel phase: its elections and timeouts leave CPU idle
	nodes := startCluster(t, "")
	const dst = "/queue/stall"
	// Make the groups' streams; find two whose leaders differ.
	setup := goStompDial(nodes[0], nil)
	stalled, other, frozen := "", "", -1
	for i := 0; i < 12 && other == ""; i++ {
		g := "stall" + strconv.Itoa(i)
		requireNoError(t, setup.Send(dst, "text/plain", []byte("setup"), stomp.SendOpt.Receipt, stomp.SendOpt.Header("group", g)))
		l := streamLeader(t, nodes, queueStream(g, "stall", 0))
		switch {
		case stalled == "":
			stalled, frozen = g, l
		case l != frozen:
			other = g
		}
	}
	_ = setup.Disconnect()
	if other == "" {
		t.Fatal("every group's stream is led by one node")
	}
	prod := (frozen + 1) % 3

	connA, recA := stallConn(t, nodes[prod])
	connB, recB := stallConn(t, nodes[prod])
	send := func(c net.Conn, group, receipt string) {
		_, err := fmt.Fprintf(c, "SEND\ndestination:%s\ngroup:%s\nreceipt:%s\ncontent-type:text/plain\n\n%s\x00", dst, group, receipt, receipt)
		requireNoError(t, err)
	}
	expect := func(rec <-chan string, want string) {
		t.Helper()
		select {
		case id := <-rec:
			if id != want {
				t.Fatalf("RECEIPT %s, want %s", id, want)
			}
		case <-time.After(60 * time.Second):
			t.Fatalf("no RECEIPT %s", want)
		}
	}
	// Both streams used from this node once (their first publish waits for its PubAck).
	send(connA, stalled, "a0")
	expect(recA, "a0")
	send(connB, other, "b0")
	expect(recB, "b0")

	p := nodes[frozen]
	p.mu.Lock()
	proc := p.cmd.Process
	p.mu.Unlock()
	requireNoError(t, proc.Signal(syscall.SIGSTOP))
	resumed := false
	resume := func() {
		if !resumed {
			resumed = true
			_ = proc.Signal(syscall.SIGCONT)
		}
	}
	defer resume()

	send(connA, stalled, "a1")
	// Let a1's publish pass the stall fence (200 ms) unanswered: the point where a node-wide
	// gate stopped every stream. This is set-up, not an assertion.
	time.Sleep(time.Second)
	const n = 20
	var longest time.Duration
	for i := 1; i <= n; i++ {
		id := "b" + strconv.Itoa(i)
		at := time.Now()
		send(connB, other, id)
		select {
		case got := <-recB:
			if got != id {
				t.Fatalf("RECEIPT %s, want %s", got, id)
			}
		case got := <-recA:
			t.Fatalf("the stalled stream's RECEIPT %s came before %s: its leader's election ended before the other stream's SENDs were answered", got, id)
		case <-time.After(60 * time.Second):
			t.Fatalf("no RECEIPT %s while stream of group %s is stalled: the stall delayed another stream", id, stalled)
		}
		longest = max(longest, time.Since(at))
	}
	select {
	case got := <-recA:
		t.Fatalf("the stalled stream's RECEIPT %s came before the other stream's SENDs were all answered", got)
	default:
	}
	t.Logf("%d SENDs to stream TITAN_%s_Q answered while TITAN_%s_Q's leader %s was frozen; slowest RECEIPT %v", n, other, stalled, p.name, longest)
	resume()
	expect(recA, "a1")
}

// stallConn opens a raw STOMP 1.2 connection to n (no heart-beats) and returns it with
// the receipt-ids it receives; any other frame fails the test.
func stallConn(t *testing.T, n *clusterNode) (net.Conn, <-chan string) {
	t.Helper()
	c, err := net.Dial("tcp", "127.0.0.1:"+strconv.Itoa(n.stompPort))
	requireNoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	r := bufio.NewReader(c)
	_, err = c.Write([]byte("CONNECT\naccept-version:1.2\nhost:/\nheart-beat:0,0\n\n\x00"))
	requireNoError(t, err)
	f, err := readFrameFrom(r)
	requireNoError(t, err)
	if f.command != "CONNECTED" {
		t.Fatalf("CONNECT answered %s", f)
	}
	rec := make(chan string, 64)
	go func() {
		for {
			f, err := readFrameFrom(r)
			if err != nil {
				return
			}
			if f.command != "RECEIPT" {
				t.Errorf("got %s", f)
				return
			}
			id, _ := f.get("receipt-id")
			rec <- id
		}
	}()
	return c, rec
}
