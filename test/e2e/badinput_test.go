package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// frameOf builds a raw frame: command, "k:v" header lines, body, NUL.
func frameOf(command string, headers []string, body string) string {
	var b strings.Builder
	b.WriteString(command + "\n")
	for _, h := range headers {
		b.WriteString(h + "\n")
	}
	b.WriteString("\n" + body + "\x00")
	return b.String()
}

// Limits for the bad-input broker, small enough to exceed cheaply.
const (
	limitHeaderLine = 1024
	limitHeaders    = 50
	limitBody       = 65536
	maxMessageLen   = 80 // what "a short message header" means here
)

type badInputCase struct {
	name       string
	preConnect bool   // send bad before any CONNECT
	bad        string // the offending bytes
	receipt    string // the receipt header bad carries ("" when none)
	message    string // the exact message header wanted ("" accepts any short one)
	body       string // a substring the ERROR body must hold: what was wrong ("" checks nothing)
}

func badInputCases() []badInputCase {
	manyHeaders := []string{"destination:/queue/bad", "receipt:r-headers"}
	for i := 0; len(manyHeaders) <= limitHeaders; i++ {
		manyHeaders = append(manyHeaders, fmt.Sprintf("h%d:v", i))
	}
	big := strings.Repeat("b", limitBody+1000)
	return []badInputCase{
		{name: "frame before CONNECT", preConnect: true, receipt: "r-early",
			message: "expected CONNECT frame", body: "must be CONNECT or STOMP, not SEND",
			bad: frameOf("SEND", []string{"destination:/queue/bad", "receipt:r-early"}, "too early")},
		{name: "second CONNECT", message: "already connected", body: "CONNECT on a connection that is already connected",
			bad: frameOf("CONNECT", []string{"accept-version:1.2", "host:localhost"}, "")},
		{name: "unknown command", receipt: "r-unknown", message: "unknown command", body: `command "FROBNICATE" is not a STOMP command`,
			bad: frameOf("FROBNICATE", []string{"receipt:r-unknown"}, "")},
		{name: "SEND without destination", receipt: "r-nodest",
			bad: frameOf("SEND", []string{"receipt:r-nodest"}, "where to?")},
		{name: "SUBSCRIBE without id on 1.2", receipt: "r-noid",
			bad: frameOf("SUBSCRIBE", []string{"destination:/queue/bad", "receipt:r-noid"}, "")},
		{name: "ACK without id on 1.2", receipt: "r-ack",
			bad: frameOf("ACK", []string{"message-id:m-1", "subscription:1", "receipt:r-ack"}, "")},
		{name: "BEGIN without transaction", receipt: "r-begin",
			bad: frameOf("BEGIN", []string{"receipt:r-begin"}, "")},
		{name: "invalid destination", receipt: "r-dest", message: "invalid destination",
			bad: frameOf("SEND", []string{"destination:/queue//x", "receipt:r-dest"}, "x")},
		{name: "undefined escape", receipt: "r-escape", message: "undefined escape sequence",
			body: `the value of header "note" has "\\t", an escape STOMP 1.2 does not define`,
			bad:  frameOf("SEND", []string{"destination:/queue/bad", "receipt:r-escape", `note:tab\there`}, "x")},
		{name: "over-long header line", receipt: "r-long", message: "header line too long",
			body: fmt.Sprintf(`header line "long:%s"... is longer than %d octets (max-header-length)`, strings.Repeat("x", 64-len("long:")), limitHeaderLine),
			bad:  frameOf("SEND", []string{"destination:/queue/bad", "receipt:r-long", "long:" + strings.Repeat("x", 2*limitHeaderLine)}, "x")},
		{name: "too many headers", receipt: "r-headers", message: "too many headers",
			body: fmt.Sprintf("more than %d headers (max-headers)", limitHeaders),
			bad:  frameOf("SEND", manyHeaders, "x")},
		{name: "oversized body with content-length", receipt: "r-body-cl", message: "body too large",
			body: fmt.Sprintf("content-length %d exceeds the largest body allowed, %d octets", limitBody+1000, limitBody),
			bad:  frameOf("SEND", []string{"destination:/queue/bad", "receipt:r-body-cl", fmt.Sprintf("content-length:%d", len(big))}, big)},
		{name: "oversized body without content-length", receipt: "r-body-nul", message: "body too large",
			body: fmt.Sprintf("the body exceeds %d octets (max-body-length)", limitBody),
			bad:  frameOf("SEND", []string{"destination:/queue/bad", "receipt:r-body-nul"}, big)},
		{name: "invalid group name", receipt: "r-group",
			bad: frameOf("SEND", []string{"destination:/topic/bad", "group:not.a.group", "receipt:r-group"}, "x")},
		{name: "malformed header", message: "malformed header",
			body: `header line "no-colon-here" has no colon`,
			bad:  frameOf("SEND", []string{"destination:/queue/bad", "no-colon-here"}, "x")},
		{name: "hostile unknown command", message: "unknown command",
			body: `command "\x1b[2J\x00` + strings.Repeat("Q", 64-5) + `"... is not a STOMP command`,
			bad:  frameOf("\x1b[2J\x00"+strings.Repeat("Q", 900), nil, "")},
	}
}

// Each bad input gets an ERROR frame with a short message header (and receipt-id when the
// bad frame carried a receipt), then the connection closes; a well-behaved python3-stomp
// client connected to the same broker the whole time keeps sending and receiving.
func TestBadInputGetsErrorAndCloseWhileOthersKeepWorking(t *testing.T) {
	t.Parallel()
	pythonClient.require(t)
	b := startBroker(t, yamlConfig(fmt.Sprintf("max-header-length: %d, max-headers: %d, max-body-length: %d",
		limitHeaderLine, limitHeaders, limitBody)))
	p := startPinger(t, b, "/queue/pinger")

	for _, tc := range badInputCases() {
		t.Run(tc.name, func(t *testing.T) {
			c := dialRaw(t, b)
			if !tc.preConnect {
				c.connect()
			}
			if err := c.write(tc.bad); err != nil {
				// The broker may close before reading everything; the ERROR must still come.
				t.Logf("writing the bad frame: %v", err)
			}
			f, err := c.readFrame(10 * time.Second)
			if err != nil {
				t.Fatalf("want an ERROR frame, got %v", err)
			}
			if f.command != "ERROR" {
				t.Fatalf("want an ERROR frame, got %s", f)
			}
			msg, ok := f.get("message")
			switch {
			case !ok || msg == "":
				t.Errorf("ERROR has no message header: %s", f)
			case len(msg) > maxMessageLen:
				t.Errorf("ERROR message header is %d bytes, want a short one (<= %d): %q", len(msg), maxMessageLen, msg)
			case tc.message != "" && msg != tc.message:
				t.Errorf("ERROR message = %q, want %q", msg, tc.message)
			}
			if body := string(f.body); tc.body != "" && !strings.Contains(body, tc.body) {
				t.Errorf("ERROR body %q does not say what was wrong (want %q in it)", body, tc.body)
			}
			for _, r := range strings.TrimSuffix(string(f.body), "\n") {
				if r < 0x20 || r == 0x7f {
					t.Errorf("ERROR body %q holds control character %U", f.body, r)
				}
			}
			if len(f.body) > 1024 {
				t.Errorf("ERROR body is %d bytes: %q", len(f.body), truncate(string(f.body), 300))
			}
			if tc.receipt != "" {
				if rid, _ := f.get("receipt-id"); rid != tc.receipt {
					t.Errorf("ERROR receipt-id = %q, want %q (the bad frame's receipt): %s", rid, tc.receipt, f)
				}
			}
			if _, err := c.expectClosed(5 * time.Second); err != nil {
				t.Errorf("after the ERROR: %v", err)
			}
			p.requireProgress(t)
		})
	}

	sum := p.stop(t)
	if sum.RoundTrips == 0 || len(sum.Errors) != 0 || sum.Disconnected || !sum.Done {
		t.Errorf("the well-behaved client did not keep working: %+v", sum)
	}
}

// pinger is the pyclient.py "pinger" scenario: a python3-stomp client that round-trips
// messages through a queue until its stdin closes, printing {"rt": n} after each.
type pinger struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	rt     atomic.Int64
	mu     sync.Mutex
	errs   []string
	last   []byte
	exited chan struct{}
	stderr syncBuffer
}

type pingerSummary struct {
	RoundTrips   int      `json:"round_trips"`
	Errors       []string `json:"errors"`
	Disconnected bool     `json:"disconnected"`
	Done         bool     `json:"done"`
}

func startPinger(t *testing.T, b *broker, dest string) *pinger {
	t.Helper()
	args, err := json.Marshal(map[string]any{"host": "127.0.0.1", "port": b.stompPort, "dest": dest, "timeout": scenarioWait})
	requireNoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	p := &pinger{exited: make(chan struct{})}
	p.cmd = exec.CommandContext(ctx, systemPython, filepath.Join("clients", "pyclient.py"), "pinger", string(args))
	p.cmd.WaitDelay = 5 * time.Second
	p.cmd.Stderr = &p.stderr
	p.stdin, err = p.cmd.StdinPipe()
	requireNoError(t, err)
	stdout, err := p.cmd.StdoutPipe()
	requireNoError(t, err)
	requireNoError(t, p.cmd.Start(), "starting the pinger")
	ready := make(chan struct{})
	go func() {
		defer close(p.exited)
		sc := bufio.NewScanner(stdout)
		var once sync.Once
		for sc.Scan() {
			line := bytes.Clone(sc.Bytes())
			var ev struct {
				Ready bool   `json:"ready"`
				RT    int64  `json:"rt"`
				Error string `json:"error"`
			}
			if json.Unmarshal(line, &ev) != nil {
				continue
			}
			p.mu.Lock()
			p.last = line
			if ev.Error != "" {
				p.errs = append(p.errs, ev.Error)
			}
			p.mu.Unlock()
			if ev.RT > 0 {
				p.rt.Store(ev.RT)
			}
			if ev.Ready {
				once.Do(func() { close(ready) })
			}
		}
		_ = p.cmd.Wait()
	}()
	t.Cleanup(func() {
		_ = p.stdin.Close()
		select {
		case <-p.exited:
		case <-time.After(30 * time.Second):
		}
		cancel()
		<-p.exited
		if t.Failed() && p.stderr.String() != "" {
			t.Logf("pinger stderr:\n%s", p.stderr.String())
		}
	})
	select {
	case <-ready:
	case <-p.exited:
		t.Fatalf("the pinger exited before it was ready; stderr:\n%s", p.stderr.String())
	case <-time.After(30 * time.Second):
		t.Fatalf("the pinger was not ready within 30s; stderr:\n%s", p.stderr.String())
	}
	return p
}

// requireProgress waits until the pinger completes two more round trips (so at least one
// started after this point), failing if it reports an error or exits.
func (p *pinger) requireProgress(t *testing.T) {
	t.Helper()
	start := p.rt.Load()
	eventually(t, 2*time.Duration(scenarioWait)*time.Second, func() bool {
		p.mu.Lock()
		errs := p.errs
		p.mu.Unlock()
		if len(errs) > 0 {
			t.Fatalf("the well-behaved client failed: %q", errs)
		}
		select {
		case <-p.exited:
			t.Fatalf("the well-behaved client exited after %d round trips", p.rt.Load())
		default:
		}
		return p.rt.Load() >= start+2
	}, "the well-behaved client to keep round-tripping messages (stuck at %d)", start)
}

// stop closes the pinger's stdin and returns its summary.
func (p *pinger) stop(t *testing.T) pingerSummary {
	t.Helper()
	_ = p.stdin.Close()
	select {
	case <-p.exited:
	case <-time.After(30 * time.Second):
		t.Fatalf("the pinger did not finish within 30s of its stdin closing")
	}
	p.mu.Lock()
	last := p.last
	p.mu.Unlock()
	var sum pingerSummary
	if err := json.Unmarshal(last, &sum); err != nil {
		t.Fatalf("pinger summary %q: %v", last, err)
	}
	return sum
}
