package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// This file holds the helpers of the crash, restart and WebSocket tests: a titan process that
// can be killed and started again on the same data directory (titanNode), and a client
// scenario process whose stdout is read line by line while it runs (scenarioProc).

// pebbleConfig is a titan-env.yml with the embedded Pebble store in dataDir and one STOMP
// server on a free loopback port; extraServers (YAML list items, indented like "    - ...")
// follow it in config order.
func pebbleConfig(dataDir, extraServers string) string {
	return fmt.Sprintf(`titan:
  servers:
    - {name: stomp, host: 127.0.0.1, port: 0}
%s  monitor: {host: 127.0.0.1, port: 0}
  store: {type: pebble, data-dir: %q}
  log: {level: info}
`, extraServers, dataDir)
}

// withStoreKeys adds keys ("k: v, k2: v2") to the store section of a pebbleConfig.
func withStoreKeys(cfg, keys string) string {
	return strings.Replace(cfg, "store: {type: pebble,", "store: {type: pebble, "+keys+",", 1)
}

// titanNode is one broker configuration (and so one data directory) that runs as a
// succession of titan processes: start, then kill (SIGKILL) or stop (SIGTERM), then start
// again. Unlike startBroker, cleanup only SIGKILLs a process still running; what every
// process wrote to stderr is logged when the test fails.
type titanNode struct {
	t       *testing.T
	cfgPath string
	dir     string
	runs    int
	cur     *titanProc
	mu      sync.Mutex
	logs    []*titanProc // every process started, for the failure log
	// args are extra `titan serve` arguments for the next start (--accept-data-loss).
	args []string
}

// titanProc is one running (or exited) titan process.
type titanProc struct {
	run         int
	cmd         *exec.Cmd
	stderr      *syncBuffer
	exited      chan struct{}
	waitErr     error
	stompAddrs  []string // 127.0.0.1:PORT, to dial, in config order
	stompPorts  []int
	monitorAddr string
	readyAt     time.Time
}

func newTitanNode(t *testing.T, yaml string) *titanNode {
	t.Helper()
	dir := t.TempDir()
	n := &titanNode{t: t, dir: dir, cfgPath: filepath.Join(dir, "titan.yml")}
	requireNoError(t, os.WriteFile(n.cfgPath, []byte(yaml), 0o644))
	t.Cleanup(func() {
		if p := n.cur; p != nil && p.alive() {
			_ = p.cmd.Process.Kill()
			<-p.exited
		}
		n.mu.Lock()
		defer n.mu.Unlock()
		for _, p := range n.logs {
			if strings.Contains(p.stderr.String(), "WARNING: DATA RACE") {
				t.Errorf("titan run %d reported a data race (see its stderr)", p.run)
			}
			if t.Failed() {
				t.Logf("titan run %d stderr:\n%s", p.run, p.stderr.String())
			}
		}
	})
	return n
}

// readyLineAll parses every STOMP address of the ready line ("STOMP a, b, monitor m, ...").
var readyLineAll = regexp.MustCompile(`^Titan \S+ ready: STOMP (.+?), monitor (\S*), store (.+)$`)

// start runs a new titan process on the node's configuration and returns once it printed
// its ready line.
func (n *titanNode) start() *titanProc {
	t := n.t
	t.Helper()
	if n.cur != nil && n.cur.alive() {
		t.Fatalf("titan run %d is still running", n.cur.run)
	}
	n.runs++
	cmd := exec.Command(titanBin, append([]string{"serve", "--config", n.cfgPath}, n.args...)...)
	cmd.Dir = n.dir
	p := &titanProc{run: n.runs, cmd: cmd, stderr: &syncBuffer{}, exited: make(chan struct{})}
	cmd.Stderr = p.stderr
	stdout, err := cmd.StdoutPipe()
	requireNoError(t, err)
	requireNoError(t, cmd.Start(), "starting titan")
	n.mu.Lock()
	n.logs = append(n.logs, p)
	n.mu.Unlock()
	n.cur = p
	ready := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if strings.Contains(sc.Text(), " ready: ") {
				select {
				case ready <- sc.Text():
				default:
				}
			}
		}
		p.waitErr = cmd.Wait()
		close(p.exited)
	}()
	var line string
	select {
	case line = <-ready:
	case <-p.exited:
		t.Fatalf("titan run %d exited before it was ready: %v\nstderr:\n%s", p.run, p.waitErr, p.stderr.String())
	case <-time.After(brokerStartTimeout):
		t.Fatalf("titan run %d printed no ready line within %v", p.run, brokerStartTimeout)
	}
	p.readyAt = time.Now()
	m := readyLineAll.FindStringSubmatch(line)
	if m == nil {
		t.Fatalf("cannot parse titan's ready line %q", line)
	}
	for _, a := range strings.Split(m[1], ", ") {
		_, port, err := net.SplitHostPort(a)
		requireNoError(t, err, "STOMP address %q in ready line %q", a, line)
		pn, err := strconv.Atoi(port)
		requireNoError(t, err, "STOMP port %q", port)
		p.stompAddrs = append(p.stompAddrs, net.JoinHostPort("127.0.0.1", port))
		p.stompPorts = append(p.stompPorts, pn)
	}
	p.monitorAddr = m[2]
	return p
}

func (p *titanProc) alive() bool {
	select {
	case <-p.exited:
		return false
	default:
		return true
	}
}

// broker returns p as a *broker, so stompClient.run can drive it (first STOMP server).
func (p *titanProc) broker() *broker {
	return &broker{stompAddr: p.stompAddrs[0], stompPort: p.stompPorts[0], monitorAddr: p.monitorAddr, cmd: p.cmd, stderr: p.stderr}
}

// kill SIGKILLs the current process and waits for it to be gone.
func (n *titanNode) kill() {
	n.t.Helper()
	p := n.cur
	requireNoError(n.t, p.cmd.Process.Signal(syscall.SIGKILL), "SIGKILL titan run %d", p.run)
	select {
	case <-p.exited:
	case <-time.After(brokerStopTimeout):
		n.t.Fatalf("titan run %d still running %v after SIGKILL", p.run, brokerStopTimeout)
	}
}

// stop sends SIGTERM to the current process and requires a clean exit.
func (n *titanNode) stop() {
	n.t.Helper()
	p := n.cur
	requireNoError(n.t, p.cmd.Process.Signal(syscall.SIGTERM), "SIGTERM titan run %d", p.run)
	select {
	case <-p.exited:
		if p.waitErr != nil {
			n.t.Fatalf("titan run %d exited with %v after SIGTERM", p.run, p.waitErr)
		}
	case <-time.After(brokerStopTimeout):
		_ = p.cmd.Process.Kill()
		<-p.exited
		n.t.Fatalf("titan run %d did not exit within %v of SIGTERM", p.run, brokerStopTimeout)
	}
}

// ---------------------------------------------------------------- streaming scenarios

// scenarioProc is a client scenario running in the background: every stdout line that is a
// JSON object is kept as it arrives, so a test can wait for a "ready" line, or keep what a
// producer printed before it died. The last line is the scenario's result.
type scenarioProc struct {
	name   string
	cmd    *exec.Cmd
	cancel context.CancelFunc
	stderr syncBuffer
	exited chan struct{}

	mu    sync.Mutex
	cond  *sync.Cond
	lines []json.RawMessage
}

// startScenario starts scenario of client c with args (host and timeout added unless given)
// and returns at once. Cleanup kills it if it is still running and logs its stderr when the
// test failed.
func startScenario(t *testing.T, c stompClient, scenario string, args map[string]any) *scenarioProc {
	t.Helper()
	c.require(t)
	full := map[string]any{"host": "127.0.0.1", "timeout": scenarioWait}
	for k, v := range args {
		full[k] = v
	}
	js, err := json.Marshal(full)
	requireNoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), scriptTimeout)
	name, argv := c.cmd(scenario, string(js))
	p := &scenarioProc{name: c.name + " " + scenario, cancel: cancel, exited: make(chan struct{})}
	p.cond = sync.NewCond(&p.mu)
	p.cmd = exec.CommandContext(ctx, name, argv...)
	p.cmd.WaitDelay = 5 * time.Second
	p.cmd.Stderr = &p.stderr
	stdout, err := p.cmd.StdoutPipe()
	requireNoError(t, err)
	requireNoError(t, p.cmd.Start(), "starting %s", p.name)
	go func() {
		defer close(p.exited)
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 64<<10), 64<<20)
		for sc.Scan() {
			line := bytes.TrimSpace(sc.Bytes())
			if len(line) == 0 || line[0] != '{' {
				continue
			}
			p.mu.Lock()
			p.lines = append(p.lines, json.RawMessage(bytes.Clone(line)))
			p.cond.Broadcast()
			p.mu.Unlock()
		}
		_ = p.cmd.Wait()
		p.mu.Lock()
		p.cond.Broadcast()
		p.mu.Unlock()
	}()
	t.Cleanup(func() {
		cancel()
		<-p.exited
		if t.Failed() && p.stderr.String() != "" {
			t.Logf("%s stderr:\n%s", p.name, p.stderr.String())
		}
	})
	return p
}

// snapshot returns the lines printed so far.
func (p *scenarioProc) snapshot() []json.RawMessage {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]json.RawMessage(nil), p.lines...)
}

func (p *scenarioProc) done() bool {
	select {
	case <-p.exited:
		return true
	default:
		return false
	}
}

// waitLine waits until some printed line satisfies pred, failing the test if the process
// exits first or timeout passes.
func (p *scenarioProc) waitLine(t *testing.T, timeout time.Duration, what string, pred func(json.RawMessage) bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	timer := time.AfterFunc(timeout, func() {
		p.mu.Lock()
		p.cond.Broadcast()
		p.mu.Unlock()
	})
	defer timer.Stop()
	p.mu.Lock()
	defer p.mu.Unlock()
	seen := 0
	for {
		for ; seen < len(p.lines); seen++ {
			if pred(p.lines[seen]) {
				return
			}
		}
		if p.done() {
			t.Fatalf("%s exited before %s; its output: %s", p.name, what, joinLines(p.lines))
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: no %s within %v; its output so far: %s", p.name, what, timeout, joinLines(p.lines))
		}
		p.cond.Wait()
	}
}

// waitReady waits for the scenario's {"ready": true} line.
func (p *scenarioProc) waitReady(t *testing.T) {
	t.Helper()
	p.waitLine(t, 30*time.Second, `{"ready": true}`, func(l json.RawMessage) bool {
		var v struct {
			Ready bool `json:"ready"`
		}
		return json.Unmarshal(l, &v) == nil && v.Ready
	})
}

// wait waits up to timeout for the process to exit (killing it after that) and reports
// whether it exited by itself.
func (p *scenarioProc) wait(timeout time.Duration) bool {
	select {
	case <-p.exited:
		return true
	case <-time.After(timeout):
		p.cancel()
		<-p.exited
		return false
	}
}

// result waits for the scenario to finish and decodes its last line into out; a scenario
// that reported an error fails the test (with t.Errorf, so what it saw is still asserted).
func (p *scenarioProc) result(t *testing.T, out any) {
	t.Helper()
	if !p.wait(scriptTimeout) {
		t.Fatalf("%s did not finish within %v", p.name, scriptTimeout)
	}
	lines := p.snapshot()
	if len(lines) == 0 {
		t.Fatalf("%s printed no JSON result; stderr:\n%s", p.name, p.stderr.String())
	}
	last := lines[len(lines)-1]
	requireNoError(t, json.Unmarshal(last, out), "decoding %s result %s", p.name, last)
	var status struct {
		Error string `json:"error"`
	}
	_ = json.Unmarshal(last, &status)
	if status.Error != "" {
		t.Errorf("%s did not complete: %s\nobserved: %s", p.name, status.Error, truncate(string(last), 4000))
	}
}

func joinLines(lines []json.RawMessage) string {
	var b strings.Builder
	for _, l := range lines {
		b.Write(l)
		b.WriteByte('\n')
	}
	return truncate(b.String(), 4000)
}

// runScenario runs scenario to completion against port and decodes its result into out.
func runScenario(t *testing.T, c stompClient, scenario string, args map[string]any, out any) {
	t.Helper()
	startScenario(t, c, scenario, args).result(t, out)
}
