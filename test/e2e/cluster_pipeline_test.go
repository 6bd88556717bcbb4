package e2e

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-stomp/stomp/v3"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Pipelined SENDs in cluster mode (issue 13 on issue 15's adapters): one producer writes
// SENDs, each with a receipt, without waiting for any RECEIPT, to a node that does not lead
// the queue's stream; the stream's leader is killed with SIGKILL midway. Every RECEIPT
// comes, in SEND order; a consumer on the third node then receives every message, in SEND
// order (each message's first delivery), whatever retries the leader change caused.
func TestClusterPipelinedSendsKeepOrderThroughLeaderKill(t *testing.T) {
	t.Parallel() // a cluster test shares the parallel phase: its elections and timeouts leave CPU idle
	nodes := startCluster(t, "")
	const dst = "/queue/pipe.order"
	const n = 3000
	// The first SEND creates the stream; its leader is then known.
	first := goStompDial(nodes[0], nil)
	requireNoError(t, first.Send(dst, "text/plain", []byte("-1"), stomp.SendOpt.Receipt))
	_ = first.Disconnect()
	leader := streamLeader(t, nodes, queueStream("default", "pipe.order", 0))
	prod, cons := (leader+1)%3, (leader+2)%3

	c, err := net.Dial("tcp", "127.0.0.1:"+strconv.Itoa(nodes[prod].stompPort))
	requireNoError(t, err)
	defer c.Close()
	r := bufio.NewReader(c)
	_, err = c.Write([]byte("CONNECT\naccept-version:1.2\nhost:/\nheart-beat:0,0\n\n\x00"))
	requireNoError(t, err)
	f, err := readFrameFrom(r)
	requireNoError(t, err)
	if f.command != "CONNECTED" {
		t.Fatalf("CONNECT answered %s", f)
	}
	receipts := make(chan string, n)
	readErr := make(chan error, 1)
	go func() {
		for {
			f, err := readFrameFrom(r)
			if err != nil {
				readErr <- err
				return
			}
			if f.command != "RECEIPT" {
				readErr <- fmt.Errorf("got %s", f)
				return
			}
			id, _ := f.get("receipt-id")
			receipts <- id
		}
	}()
	var killed sync.Once
	next := 0 // the receipt expected next
	w := bufio.NewWriter(c)
	for i := range n {
		fmt.Fprintf(w, "SEND\ndestination:%s\nreceipt:%d\ncontent-type:text/plain\n\n%d\x00", dst, i, i)
		if i%16 == 15 {
			requireNoError(t, w.Flush())
		}
		if i == n/3 {
			requireNoError(t, w.Flush())
			// Wait for a first RECEIPT so that the stream is busy, then kill its leader.
			select {
			case id := <-receipts:
				if id != strconv.Itoa(next) {
					t.Fatalf("RECEIPT %s, want %d", id, next)
				}
				next++
			case err := <-readErr:
				t.Fatal(err)
			case <-time.After(30 * time.Second):
				t.Fatal("no RECEIPT")
			}
			killed.Do(func() { nodes[leader].kill9(t) })
		}
	}
	requireNoError(t, w.Flush())
	lastAt, gap, gapAt := time.Now(), time.Duration(0), 0
	for next < n {
		select {
		case id := <-receipts:
			if id != strconv.Itoa(next) {
				t.Fatalf("RECEIPT %s, want %d (RECEIPTs come in SEND order)", id, next)
			}
			if d := time.Since(lastAt); d > gap {
				gap, gapAt = d, next
			}
			lastAt = time.Now()
			next++
		case err := <-readErr:
			t.Fatalf("after %d RECEIPTs: %v", next, err)
		case <-time.After(60 * time.Second):
			t.Fatalf("only %d of %d RECEIPTs", next, n)
		}
	}

	t.Logf("%d RECEIPTs in SEND order; longest pause %v, before RECEIPT %d (the leader change)", n, gap, gapAt)
	sc := goStompDial(nodes[cons], nil)
	defer func() { _ = sc.Disconnect() }()
	sub, err := sc.Subscribe(dst, stomp.AckAuto)
	requireNoError(t, err)
	seen := make(map[int]bool, n)
	last := -2
	deadline := time.After(120 * time.Second)
	for len(seen) < n {
		select {
		case m := <-sub.C:
			if m.Err != nil {
				t.Fatal(m.Err)
			}
			v, err := strconv.Atoi(strings.TrimSpace(string(m.Body)))
			requireNoError(t, err)
			if v < 0 || seen[v] {
				continue // the stream-creating SEND, or a redelivery
			}
			if v < last {
				t.Fatalf("message %d delivered after %d: SEND order broken", v, last)
			}
			seen[v], last = true, v
		case <-deadline:
			t.Fatalf("received %d of %d messages", len(seen), n)
		}
	}
	t.Logf("%d messages delivered in SEND order", n)
}

// readFrameFrom reads one STOMP frame (no content-length bodies) from r, skipping
// heart-beat EOLs.
func readFrameFrom(r *bufio.Reader) (*rawFrame, error) {
	raw, err := r.ReadString(0)
	if err != nil {
		return nil, err
	}
	raw = strings.TrimLeft(strings.TrimSuffix(raw, "\x00"), "\r\n")
	head, body, _ := strings.Cut(raw, "\n\n")
	lines := strings.Split(head, "\n")
	f := &rawFrame{command: lines[0], body: []byte(body)}
	for _, l := range lines[1:] {
		if k, v, ok := strings.Cut(l, ":"); ok {
			f.headers = append(f.headers, [2]string{k, v})
		}
	}
	return f, nil
}

// Issue 28: a queue SEND with persistent:false is pipelined in cluster mode like a
// persistent one (a queue message lives only in its stream). One producer on n0 writes
// SENDs alternating persistent:false and persistent:true, each with a receipt, without
// waiting; every RECEIPT comes in SEND order, the stream holds every message before anyone
// consumes (so each RECEIPT followed its store), and a consumer on n1 receives them all in
// SEND order.
func TestClusterNonPersistentSendsPipelinedInOrder(t *testing.T) {
	t.Parallel()
	nodes := startCluster(t, "")
	const dst = "/queue/pipe.nonpersistent"
	const n = 600
	c, err := net.Dial("tcp", "127.0.0.1:"+strconv.Itoa(nodes[0].stompPort))
	requireNoError(t, err)
	defer c.Close()
	r := bufio.NewReader(c)
	_, err = c.Write([]byte("CONNECT\naccept-version:1.2\nhost:/\nheart-beat:0,0\n\n\x00"))
	requireNoError(t, err)
	f, err := readFrameFrom(r)
	requireNoError(t, err)
	if f.command != "CONNECTED" {
		t.Fatalf("CONNECT answered %s", f)
	}
	w := bufio.NewWriter(c)
	for i := range n {
		fmt.Fprintf(w, "SEND\ndestination:%s\npersistent:%v\nreceipt:%d\ncontent-type:text/plain\n\n%d\x00", dst, i%2 == 1, i, i)
	}
	requireNoError(t, w.Flush())
	requireNoError(t, c.SetReadDeadline(time.Now().Add(60*time.Second)))
	for i := range n {
		f, err := readFrameFrom(r)
		requireNoError(t, err, "RECEIPT %d", i)
		if id, _ := f.get("receipt-id"); f.command != "RECEIPT" || id != strconv.Itoa(i) {
			t.Fatalf("got %s, want RECEIPT %d (RECEIPTs come in SEND order)", f, i)
		}
	}
	// Every RECEIPT followed its message's store: the queue's stream holds all of them.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	nc, err := nats.Connect(fmt.Sprintf("nats://127.0.0.1:%d", nodes[2].natsPort))
	requireNoError(t, err)
	defer nc.Close()
	js, err := jetstream.New(nc)
	requireNoError(t, err)
	st, err := js.Stream(ctx, queueStream("default", "pipe.nonpersistent", 0))
	requireNoError(t, err)
	info, err := st.Info(ctx)
	requireNoError(t, err)
	requireEqual(t, int(info.State.Msgs), n, "messages stored in the queue stream after the last RECEIPT")

	sc := goStompDial(nodes[1], nil)
	defer func() { _ = sc.Disconnect() }()
	sub, err := sc.Subscribe(dst, stomp.AckAuto)
	requireNoError(t, err)
	for i := range n {
		select {
		case m := <-sub.C:
			if m.Err != nil {
				t.Fatal(m.Err)
			}
			if got := strings.TrimSpace(string(m.Body)); got != strconv.Itoa(i) {
				t.Fatalf("message %d is %q: not in SEND order", i, got)
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("only %d of %d messages delivered", i, n)
		}
	}
}
