package e2e

import (
	"bufio"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// A rolling restart of all three nodes under receipted, pipelined load (issue 27): each
// node in turn gets SIGTERM — it steps down from the stream, consumer and meta leaderships
// it holds, then drains its clients — and is started again; the next node once every
// replica is current (the README's procedure). The producer pipelines receipted SENDs and
// moves to the next node when its connection closes; the consumer acknowledges each message
// and moves likewise. Every node exits within its grace period and nothing receipted is
// lost, no message reaches the consumer after a newer one of its producer connection, and a
// message delivered twice is marked redelivered (asserted); the longest pause between two
// deliveries is reported. What keeps the order: every node holds its SENDs to a stream
// that hands over (cluster/holds.go), a stepping-down consumer leader pauses and waits
// until the deliveries it had decided were sent (cluster/stepdown.go), and the stopping
// node hands back what it pulled in stream order (queues/handback.go).

// tryConnect dials b and CONNECTs; errors are returned, not fatal (the node may be down).
func tryConnect(t *testing.T, b *broker) (*rawConn, error) {
	nc, err := net.DialTimeout("tcp", b.stompAddr, time.Second)
	if err != nil {
		return nil, err
	}
	c := &rawConn{t: t, conn: nc, r: bufio.NewReaderSize(nc, 64<<10)}
	if err := c.write("CONNECT\naccept-version:1.2\nhost:localhost\n\n\x00"); err != nil {
		nc.Close()
		return nil, err
	}
	f, err := c.readFrame(5 * time.Second)
	if err != nil || f.command != "CONNECTED" {
		nc.Close()
		return nil, fmt.Errorf("CONNECT answered by %v, %v", f, err)
	}
	return c, nil
}

// rollingLoad is the producer's and the consumer's shared record.
type rollingLoad struct {
	mu        sync.Mutex
	receipted map[string]bool
	seen      map[string]bool
	maxSeq    map[int]int // producer connection → highest sequence delivered
	reordered []string
	twice     int       // messages delivered again (marked redelivered)
	unmarked  []string  // delivered again without redelivered:true
	phase     int       // restarts begun (the reordered messages name it)
	sigterm   time.Time // of the latest restart
	last      time.Time
	maxPause  time.Duration
	pauseAt   string // where the longest pause began: restart, time after its SIGTERM
	delivered atomic.Int64
	stop      atomic.Bool
}

func (l *rollingLoad) produce(t *testing.T, nodes []*clusterNode, done chan<- struct{}) {
	defer close(done)
	const window = 32
	for conn := 0; !l.stop.Load(); conn++ {
		c, err := tryConnect(t, nodes[conn%len(nodes)].broker())
		if err != nil {
			time.Sleep(50 * time.Millisecond)
			continue
		}
		credit := make(chan struct{}, window)
		dead := make(chan struct{})
		go func() {
			defer close(dead)
			for {
				f, err := c.readFrame(30 * time.Second)
				if err != nil || f.command != "RECEIPT" {
					return
				}
				rid, _ := f.get("receipt-id")
				l.mu.Lock()
				l.receipted[rid] = true
				l.mu.Unlock()
				<-credit
			}
		}()
	send:
		for seq := 0; !l.stop.Load(); seq++ {
			select {
			case credit <- struct{}{}:
			case <-dead:
				break send
			}
			id := fmt.Sprintf("p%d-%d", conn, seq)
			if c.write(frameOf("SEND", []string{"destination:/queue/rolling", "persistent:true", "receipt:" + id}, id)) != nil {
				break
			}
		}
		if l.stop.Load() { // let the last receipts arrive
			for range 300 {
				if len(credit) == 0 {
					break
				}
				select {
				case <-dead:
				case <-time.After(10 * time.Millisecond):
				}
			}
		}
		c.conn.Close()
		<-dead
	}
}

func (l *rollingLoad) consume(t *testing.T, nodes []*clusterNode, stop <-chan struct{}, done chan<- struct{}) {
	defer close(done)
	for conn := 1; ; conn++ {
		select {
		case <-stop:
			return
		default:
		}
		c, err := tryConnect(t, nodes[conn%len(nodes)].broker())
		if err != nil {
			time.Sleep(50 * time.Millisecond)
			continue
		}
		if c.write(frameOf("SUBSCRIBE", []string{"id:1", "destination:/queue/rolling", "ack:client-individual"}, "")) != nil {
			c.conn.Close()
			continue
		}
		go func() { <-stop; c.conn.Close() }()
		for {
			f, err := c.readFrame(60 * time.Second)
			if err != nil || f.command != "MESSAGE" {
				break
			}
			ack, _ := f.get("ack")
			_ = c.write(frameOf("ACK", []string{"id:" + ack}, ""))
			id := string(f.body)
			pc, sq, _ := strings.Cut(strings.TrimPrefix(id, "p"), "-")
			pconn, _ := strconv.Atoi(pc)
			seq, _ := strconv.Atoi(sq)
			now := time.Now()
			l.mu.Lock()
			if l.seen[id] {
				l.twice++
				if r, _ := f.get("redelivered"); r != "true" {
					l.unmarked = append(l.unmarked, id)
				}
			} else {
				l.seen[id] = true
				if m, ok := l.maxSeq[pconn]; ok && seq < m {
					redelivered, _ := f.get("redelivered")
					l.reordered = append(l.reordered, fmt.Sprintf("%s after p%d-%d (consumer connection %d, restart %d, redelivered %q)", id, pconn, m, conn, l.phase, redelivered))
				}
				l.maxSeq[pconn] = max(l.maxSeq[pconn], seq)
				if !l.last.IsZero() && now.Sub(l.last) > l.maxPause {
					l.maxPause = now.Sub(l.last)
					l.pauseAt = fmt.Sprintf("restart %d, %v after its SIGTERM", l.phase, l.last.Sub(l.sigterm).Round(time.Millisecond))
				}
				l.last = now
				l.delivered.Add(1)
			}
			l.mu.Unlock()
		}
		c.conn.Close()
	}
}

func TestClusterRollingRestartLosesNothing(t *testing.T) {
	t.Parallel() // a cluster test shares the parallel phase: its elections and timeouts leave CPU idle
	nodes := startCluster(t, "")
	l := &rollingLoad{receipted: map[string]bool{}, seen: map[string]bool{}, maxSeq: map[int]int{}}
	prodDone, consDone, consStop := make(chan struct{}), make(chan struct{}), make(chan struct{})
	go l.produce(t, nodes, prodDone)
	go l.consume(t, nodes, consStop, consDone)
	progress := func(what string) {
		from := l.delivered.Load()
		eventually(t, 60*time.Second, func() bool { return l.delivered.Load() >= from+300 }, "300 deliveries %s", what)
	}
	progress("before the restarts")
	for i, n := range nodes {
		start := time.Now()
		l.mu.Lock()
		l.phase, l.sigterm = i+1, start
		l.mu.Unlock()
		requireNoError(t, n.cmd.Process.Signal(syscall.SIGTERM))
		select {
		case <-n.exited:
		case <-time.After(20 * time.Second):
			t.Fatalf("%s did not exit within 20 s of SIGTERM", n.name)
		}
		stopped := time.Since(start)
		n.launch(t)
		n.waitReady(t)
		// The README's procedure: the next node only once every node is up and every
		// replica current (a stream whose other replicas are behind cannot hand its
		// leadership over), as `titan cluster add NODE --wait` reports it.
		out := requireCLIOK(t, n.broker(), "cluster", "add", n.name, "--wait", "60s").stdout
		requireEqual(t, n.name+" joined cluster titan-e2e: 3 nodes, quorum 2; every replica current\n", out, "cluster add --wait after restarting %s", n.name)
		t.Logf("restart %d (%s): stopped in %v, back after %v", i+1, n.name, stopped.Round(time.Millisecond), time.Since(start).Round(time.Millisecond))
		if strings.Contains(n.logs[len(n.logs)-2].String(), "stepped down") {
			for _, line := range strings.Split(n.logs[len(n.logs)-2].String(), "\n") {
				if strings.Contains(line, "stepped down") || strings.Contains(line, "stepping down") {
					t.Logf("%s: %s", n.name, line)
				}
			}
		}
		progress("after restarting " + n.name)
	}
	l.stop.Store(true)
	<-prodDone
	l.mu.Lock()
	want := len(l.receipted)
	l.mu.Unlock()
	eventually(t, 90*time.Second, func() bool {
		l.mu.Lock()
		defer l.mu.Unlock()
		for id := range l.receipted {
			if !l.seen[id] {
				return false
			}
		}
		return true
	}, "every receipted message delivered")
	close(consStop)
	<-consDone
	l.mu.Lock()
	defer l.mu.Unlock()
	stored := 0 // publishes stored after a later one of their node (pipeline.Persister's warning)
	for _, n := range nodes {
		for _, b := range n.logs {
			stored += strings.Count(b.String(), "stored after a later one")
		}
	}
	t.Logf("%d receipted, %d delivered (distinct), %d delivered again, longest delivery pause %v (from %s), %d reordered (%d stored out of order)", want, len(l.seen), l.twice, l.maxPause.Round(time.Millisecond), l.pauseAt, len(l.reordered), stored)
	if len(l.unmarked) > 0 {
		t.Errorf("%d messages delivered twice without redelivered:true, first: %q", len(l.unmarked), l.unmarked[:min(20, len(l.unmarked))])
	}
	for _, n := range nodes { // what the step-downs and hand-backs could not do
		for _, b := range n.logs {
			for _, line := range strings.Split(b.String(), "\n") {
				if strings.Contains(line, "level=WARN") && (strings.Contains(line, "step") || strings.Contains(line, "hand-back") || strings.Contains(line, "resumed")) {
					t.Logf("%s: %s", n.name, line)
				}
			}
		}
	}
	if len(l.reordered) > 0 {
		t.Errorf("%d messages delivered after a later one of their producer connection, first: %q", len(l.reordered), l.reordered[:min(20, len(l.reordered))])
		for _, n := range nodes { // the nodes' warnings say where they were held
			for _, b := range n.logs {
				for _, line := range strings.Split(b.String(), "\n") {
					if strings.Contains(line, "level=WARN") || strings.Contains(line, "level=ERROR") {
						t.Logf("%s: %s", n.name, line)
					}
				}
			}
		}
	}
}
