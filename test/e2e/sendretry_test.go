package e2e

import (
	"bytes"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"
)

// titan send's retry (issue 11, duplicate detection): every attempt carries the same
// _AMQ_DUPL_ID, so a retry after a lost RECEIPT delivers the message once. A TCP proxy
// between titan send and a real titan forwards everything, except that on the first
// connection it swallows the RECEIPT (and everything after it): the broker stored the
// message, the client never hears so, times out and sends again on a new connection.

// receiptEater is a loopback TCP proxy to target; on its first connection it forwards the
// broker's bytes only up to the first RECEIPT frame.
type receiptEater struct {
	ln     net.Listener
	target string
	mu     sync.Mutex
	conns  int
	eaten  int
	all    []net.Conn
}

func startReceiptEater(t *testing.T, target string) *receiptEater {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	requireNoError(t, err)
	p := &receiptEater{ln: ln, target: target}
	go p.serve()
	t.Cleanup(func() {
		_ = ln.Close()
		p.mu.Lock()
		for _, c := range p.all {
			_ = c.Close()
		}
		p.mu.Unlock()
	})
	return p
}

func (p *receiptEater) serve() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		b, err := net.Dial("tcp", p.target)
		if err != nil {
			_ = c.Close()
			continue
		}
		p.mu.Lock()
		p.conns++
		first := p.conns == 1
		p.all = append(p.all, c, b)
		p.mu.Unlock()
		go func() { _, _ = io.Copy(b, c) }()
		go p.back(c, b, first)
	}
}

// back copies broker → client; on the first connection it stops at the first RECEIPT and
// keeps the connection open, reading and discarding what follows.
func (p *receiptEater) back(c, b net.Conn, eat bool) {
	if !eat {
		_, _ = io.Copy(c, b)
		return
	}
	buf := make([]byte, 64<<10)
	var seen []byte
	for {
		n, err := b.Read(buf)
		if n > 0 {
			seen = append(seen, buf[:n]...)
			if i := bytes.Index(seen, []byte("RECEIPT\n")); i >= 0 && (i == 0 || seen[i-1] == 0 || seen[i-1] == '\n') {
				fwd := n - (len(seen) - i) // bytes of this read before the RECEIPT
				if fwd > 0 {
					_, _ = c.Write(buf[:fwd])
				}
				p.mu.Lock()
				p.eaten++
				p.mu.Unlock()
				_, _ = io.Copy(io.Discard, b)
				return
			}
			if _, err := c.Write(buf[:n]); err != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

func TestTitanSendRetryAfterLostReceiptDeliversOnce(t *testing.T) {
	b := startBroker(t, yamlConfig(""))
	proxy := startReceiptEater(t, b.stompAddr)
	env := []string{"TITAN_STOMP=" + proxy.ln.Addr().String()}
	start := time.Now()
	r := runTitan(t, env, "send", "--timeout", "1s", "--retries", "3", "/queue/cli-retry", "once")
	if r.code != 0 {
		t.Fatalf("titan send through a RECEIPT-losing proxy: %s", r)
	}
	t.Logf("titan send took %v: %s", time.Since(start).Round(time.Millisecond), strings.TrimSpace(r.stderr))
	proxy.mu.Lock()
	conns, eaten := proxy.conns, proxy.eaten
	proxy.mu.Unlock()
	requireEqual(t, 1, eaten, "RECEIPTs swallowed")
	if conns < 2 {
		t.Fatalf("titan send made %d connection(s), want a retry on a second one", conns)
	}
	if !strings.Contains(r.stderr, "retrying (1 of 3) with the same _AMQ_DUPL_ID titan-send-") {
		t.Errorf("titan send's stderr %q does not report the retry with its duplicate id", r.stderr)
	}
	// The broker got the message twice (the second time as a duplicate): delivered once.
	c := dialRaw(t, b)
	c.connect()
	requireEqual(t, "once", strings.Join(drainBodies(t, c, "/queue/cli-retry", time.Second), "|"), "bodies delivered")
	requireEqual(t, 1.0, metricSum(scrapeMetrics(t, b), "titan_duplicates_total"), "titan_duplicates_total: the retry was recognised")
}
