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
// it holds, then drains its clients — and is started again. The producer pipelines
// receipted SENDs and moves to the next node when its connection closes; the consumer
// acknowledges each message and moves likewise. Every node exits within its grace period
// and nothing receipted is lost. The longest delivery pause and the messages delivered out
// of their producer connection's order are reported, not asserted: a rolling restart still
// reorders (messages a stopping node had pulled come back behind newer ones, issue 27),
// which this test will assert once that is fixed.

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
	last      time.Time
	maxPause  time.Duration
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
			if !l.seen[id] {
				l.seen[id] = true
				if m, ok := l.maxSeq[pconn]; ok && seq < m {
					l.reordered = append(l.reordered, fmt.Sprintf("%s after p%d-%d", id, pconn, m))
				}
				l.maxSeq[pconn] = max(l.maxSeq[pconn], seq)
				if !l.last.IsZero() {
					l.maxPause = max(l.maxPause, now.Sub(l.last))
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
		requireNoError(t, n.cmd.Process.Signal(syscall.SIGTERM))
		select {
		case <-n.exited:
		case <-time.After(20 * time.Second):
			t.Fatalf("%s did not exit within 20 s of SIGTERM", n.name)
		}
		stopped := time.Since(start)
		n.launch(t)
		n.waitReady(t)
		eventually(t, 60*time.Second, func() bool {
			v, ok := getCluster(n)
			if !ok || len(v.Nodes) != 3 {
				return false
			}
			for _, x := range v.Nodes {
				if !x.Up {
					return false
				}
			}
			return true
		}, "%s sees 3 nodes up after its restart", n.name)
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
	t.Logf("%d receipted, %d delivered (distinct), longest delivery pause %v, %d reordered", want, len(l.seen), l.maxPause.Round(time.Millisecond), len(l.reordered))
	if len(l.reordered) > 0 { // a figure, not asserted (see above)
		t.Logf("first delivered after a later one of its producer connection: %q", l.reordered[:min(10, len(l.reordered))])
	}
}
