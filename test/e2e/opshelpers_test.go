package e2e

// Helpers of the destination-pattern, ring-queue, request/response and CLI tests
// (patterns_test.go, ring_test.go, rpc_test.go, cli_test.go): configuration with address
// settings, the monitor API, the titan CLI as a subprocess, and client scripts that run
// alongside the test (a responder serving while a requester runs; a python3-stomp session the
// test drives step by step while it runs the CLI in between).

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// yamlConfigWith is yamlConfig(protocolOptions) with extra appended under titan: (lines
// indented by two spaces, e.g. "  address-settings:\n    - {match: \"#\", ...}\n").
func yamlConfigWith(protocolOptions, extra string) string {
	return yamlConfig(protocolOptions) + extra
}

// monitorURL is the base URL of b's monitor API.
func monitorURL(b *broker) string { return "http://" + b.monitorAddr }

// queueStat is one queue as GET /titan/monitor/queues reports it (the fields these tests
// read).
type queueStat struct {
	Group        string `json:"group"`
	Destination  string `json:"destination"`
	Pattern      string `json:"pattern"`
	Size         int    `json:"size"`
	Capacity     int    `json:"capacity"`
	RingSize     int    `json:"ringSize"`
	Paused       bool   `json:"paused"`
	Consumers    int    `json:"consumers"`
	Delivering   int    `json:"delivering"`
	Scheduled    int    `json:"scheduled"`
	Enqueued     uint64 `json:"enqueued"`
	Dispatched   uint64 `json:"dispatched"`
	Acked        uint64 `json:"acked"`
	Dropped      uint64 `json:"dropped"`
	RingRemoved  uint64 `json:"ringRemoved"`
	Expired      uint64 `json:"expired"`
	DeadLettered uint64 `json:"deadLettered"`
	Settings     struct {
		RingSize          int    `json:"ringSize"`
		MaxDeliveries     int    `json:"maxDeliveries"`
		DeadLetter        string `json:"deadLetter"`
		RedeliveryDelayMs int64  `json:"redeliveryDelayMs"`
		AddressFullPolicy string `json:"addressFullPolicy"`
		Match             string `json:"match"`
	} `json:"settings"`
}

type queueList struct {
	Queues  []queueStat `json:"queues"`
	Summary struct {
		Queues int    `json:"queues"`
		Groups int    `json:"groups"`
		Text   string `json:"text"`
	} `json:"summary"`
}

var httpClient = &http.Client{Timeout: 10 * time.Second}

// monitorQueue returns the queue of destination in group ("" for default) from the monitor
// API, and whether it exists.
func monitorQueue(t *testing.T, b *broker, destination, group string) (queueStat, bool) {
	t.Helper()
	q := url.Values{"destination": {destination}}
	if group != "" {
		q.Set("group", group)
	}
	resp, err := httpClient.Get(monitorURL(b) + "/titan/monitor/queues?" + q.Encode())
	requireNoError(t, err, "GET /titan/monitor/queues")
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /titan/monitor/queues?%s: HTTP %d: %s", q.Encode(), resp.StatusCode, data)
	}
	var l queueList
	requireNoError(t, json.Unmarshal(data, &l), "decoding %s", data)
	for _, qs := range l.Queues {
		if qs.Destination == destination || len(l.Queues) == 1 {
			return qs, true
		}
	}
	return queueStat{}, false
}

// requireQueue is monitorQueue for a queue that must exist.
func requireQueue(t *testing.T, b *broker, destination, group string) queueStat {
	t.Helper()
	qs, ok := monitorQueue(t, b, destination, group)
	if !ok {
		t.Fatalf("the monitor API lists no queue %s (group %q)", destination, group)
	}
	return qs
}

// eventuallyQueue polls the queue of destination until cond holds and returns it.
func eventuallyQueue(t *testing.T, b *broker, destination string, what string, cond func(queueStat) bool) queueStat {
	t.Helper()
	var last queueStat
	eventually(t, 10*time.Second, func() bool {
		q, ok := monitorQueue(t, b, destination, "")
		last = q
		return ok && cond(q)
	}, "queue %s: %s; last seen %+v", destination, what, &last)
	return last
}

// postPublish sends req (a PublishRequest as JSON) to POST /publish and returns the status and
// the answer.
func postPublish(t *testing.T, b *broker, req any) (int, []byte) {
	t.Helper()
	js, err := json.Marshal(req)
	requireNoError(t, err)
	resp, err := httpClient.Post(monitorURL(b)+"/publish", "application/json", bytes.NewReader(js))
	requireNoError(t, err, "POST /publish")
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, data
}

// cliResult is one run of the titan CLI.
type cliResult struct {
	args           []string
	stdout, stderr string
	code           int
}

func (r cliResult) String() string {
	return fmt.Sprintf("titan %s: exit %d, stdout %q, stderr %q", strings.Join(r.args, " "), r.code, r.stdout, r.stderr)
}

// titanCLI runs the built titan binary with --addr pointing at b's monitor API (as host:port,
// the form the ready line prints) followed by args.
func titanCLI(t *testing.T, b *broker, args ...string) cliResult {
	t.Helper()
	full := append([]string{"--addr", b.monitorAddr}, args...)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, titanBin, full...)
	// A -race build sleeps 1 s at a clean exit (GORACE atexit_sleep_ms) for late race
	// reports; a CLI run has none, and the tests run the CLI many times.
	cmd.Env = append(cmd.Environ(), "NO_COLOR=1", "TITAN_MONITOR_TOKEN=",
		"GORACE="+strings.TrimSpace(os.Getenv("GORACE")+" atexit_sleep_ms=0"))
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	r := cliResult{args: args, stdout: stdout.String(), stderr: stderr.String()}
	if err != nil {
		ee, ok := err.(*exec.ExitError)
		if !ok {
			t.Fatalf("running titan %s: %v", strings.Join(args, " "), err)
		}
		r.code = ee.ExitCode()
	}
	return r
}

// requireCLIOK runs the CLI and fails the test unless it exits 0 with nothing on stderr.
func requireCLIOK(t *testing.T, b *broker, args ...string) cliResult {
	t.Helper()
	r := titanCLI(t, b, args...)
	if r.code != 0 || r.stderr != "" {
		t.Fatalf("want success: %v", r)
	}
	return r
}

// requireCLIFail runs the CLI and fails the test unless it exits non-zero with nothing on
// stdout and exactly stderrWant (one line) on stderr.
func requireCLIFail(t *testing.T, b *broker, stderrWant string, args ...string) cliResult {
	t.Helper()
	r := titanCLI(t, b, args...)
	if r.code == 0 || r.stdout != "" || r.stderr != stderrWant {
		t.Fatalf("want a non-zero exit, no stdout and stderr %q: %v", stderrWant, r)
	}
	return r
}

// liveScript is a client scenario running alongside the test: it prints JSON lines while it
// runs (a {"ready": true} line, or one answer per command written to its stdin) and a final
// JSON result once its stdin closes.
type liveScript struct {
	t        *testing.T
	client   stompClient
	scenario string
	stdin    io.WriteCloser
	lines    chan []byte
	stderr   *syncBuffer
	exited   chan struct{}
	finished bool
}

// startLiveScript starts scenario of client c against b with args (host, port, timeout and
// the monitor URL are added). The script is killed at cleanup if still running; its stderr is
// logged when the test fails.
func startLiveScript(t *testing.T, c stompClient, b *broker, scenario string, args map[string]any) *liveScript {
	t.Helper()
	c.require(t)
	full := map[string]any{"host": "127.0.0.1", "port": b.stompPort, "timeout": scenarioWait, "monitor": monitorURL(b)}
	for k, v := range args {
		full[k] = v
	}
	js, err := json.Marshal(full)
	requireNoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), scriptTimeout)
	name, argv := c.cmd(scenario, string(js))
	cmd := exec.CommandContext(ctx, name, argv...)
	cmd.WaitDelay = 5 * time.Second
	s := &liveScript{t: t, client: c, scenario: scenario, lines: make(chan []byte, 4096), stderr: &syncBuffer{}, exited: make(chan struct{})}
	cmd.Stderr = s.stderr
	s.stdin, err = cmd.StdinPipe()
	requireNoError(t, err)
	stdout, err := cmd.StdoutPipe()
	requireNoError(t, err)
	requireNoError(t, cmd.Start(), "starting %s %s", c.name, scenario)
	go func() {
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 64<<10), 64<<20)
		for sc.Scan() {
			s.lines <- append([]byte(nil), sc.Bytes()...)
		}
		close(s.lines)
		_ = cmd.Wait()
		close(s.exited)
	}()
	t.Cleanup(func() {
		_ = s.stdin.Close()
		select {
		case <-s.exited:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-s.exited
		}
		cancel()
		if t.Failed() && s.stderr.String() != "" {
			t.Logf("%s %s stderr:\n%s", c.name, scenario, s.stderr.String())
		}
	})
	return s
}

// next returns the script's next stdout line, failing the test after timeout or if the
// script exited.
func (s *liveScript) next(timeout time.Duration, what string) []byte {
	s.t.Helper()
	select {
	case line, ok := <-s.lines:
		if !ok {
			s.t.Fatalf("%s %s exited while the test waited for %s; stderr:\n%s", s.client.name, s.scenario, what, s.stderr.String())
		}
		return line
	case <-time.After(timeout):
		s.t.Fatalf("%s %s printed no %s within %v", s.client.name, s.scenario, what, timeout)
	}
	return nil
}

// waitReady waits for the {"ready": true} line.
func (s *liveScript) waitReady() {
	s.t.Helper()
	line := s.next(scriptTimeout, "ready line")
	var r struct {
		Ready bool   `json:"ready"`
		Error string `json:"error"`
	}
	if err := json.Unmarshal(line, &r); err != nil || !r.Ready {
		s.t.Fatalf("%s %s: want {\"ready\": true}, got %s", s.client.name, s.scenario, line)
	}
}

// call writes one command to a session script and decodes its one-line answer into out
// (may be nil). An answer with an "error" field fails the test.
func (s *liveScript) call(op map[string]any, out any) {
	s.t.Helper()
	if err := s.try(op, out); err != nil {
		s.t.Fatalf("%s %s: %v", s.client.name, s.scenario, err)
	}
}

// try is call returning the script's error instead of failing the test.
func (s *liveScript) try(op map[string]any, out any) error {
	s.t.Helper()
	js, err := json.Marshal(op)
	requireNoError(s.t, err)
	if _, err := s.stdin.Write(append(js, '\n')); err != nil {
		s.t.Fatalf("%s %s: writing command %s: %v", s.client.name, s.scenario, js, err)
	}
	line := s.next(2*time.Duration(scenarioWait)*time.Second, fmt.Sprintf("answer to %s", js))
	var status struct {
		Error string `json:"error"`
	}
	if err := json.Unmarshal(line, &status); err != nil {
		s.t.Fatalf("%s %s: answer to %s is not JSON: %q", s.client.name, s.scenario, js, line)
	}
	if out != nil {
		requireNoError(s.t, json.Unmarshal(line, out), "decoding %s", line)
	}
	if status.Error != "" {
		return fmt.Errorf("%s: %s", js, status.Error)
	}
	return nil
}

// finish closes the script's stdin and decodes its final line into out; a final line with an
// "error" field fails the test (with t.Errorf, so the caller's assertions still run).
func (s *liveScript) finish(out any) {
	s.t.Helper()
	if s.finished {
		s.t.Fatalf("finish called twice")
	}
	s.finished = true
	_ = s.stdin.Close()
	var last []byte
	deadline := time.After(scriptTimeout)
	for {
		select {
		case line, ok := <-s.lines:
			if !ok {
				if last == nil {
					s.t.Fatalf("%s %s printed no result; stderr:\n%s", s.client.name, s.scenario, s.stderr.String())
				}
				var status struct {
					Error string `json:"error"`
				}
				requireNoError(s.t, json.Unmarshal(last, &status), "%s %s result %q", s.client.name, s.scenario, last)
				if out != nil {
					requireNoError(s.t, json.Unmarshal(last, out), "decoding %s", last)
				}
				if status.Error != "" {
					s.t.Errorf("%s %s did not complete: %s", s.client.name, s.scenario, status.Error)
				}
				return
			}
			last = line
		case <-deadline:
			s.t.Fatalf("%s %s did not exit within %v of its stdin closing", s.client.name, s.scenario, scriptTimeout)
		}
	}
}

// fullMsg is one MESSAGE with all its headers (full_record in pyclient.py, fullRecord in
// jsclient.mjs).
type fullMsg struct {
	Headers map[string]string `json:"headers"`
	Body    string            `json:"body"`
	AtMs    *float64          `json:"at_ms"`
}

func (m fullMsg) String() string {
	keys := make([]string, 0, len(m.Headers))
	for k := range m.Headers {
		keys = append(keys, k)
	}
	keys = sorted(keys)
	var b strings.Builder
	fmt.Fprintf(&b, "{body:%q", m.Body)
	for _, k := range keys {
		fmt.Fprintf(&b, " %s:%q", k, m.Headers[k])
	}
	b.WriteString("}")
	return b.String()
}

// header returns header k and whether the MESSAGE carried it.
func (m fullMsg) header(k string) (string, bool) {
	v, ok := m.Headers[k]
	return v, ok
}

func msgBodies(ms []fullMsg) []string {
	out := make([]string, len(ms))
	for i, m := range ms {
		out[i] = m.Body
	}
	return out
}

// byBody indexes ms by body (the first MESSAGE of each body).
func byBody(ms []fullMsg) map[string]fullMsg {
	out := map[string]fullMsg{}
	for _, m := range ms {
		if _, dup := out[m.Body]; !dup {
			out[m.Body] = m
		}
	}
	return out
}

// sessionMsgs is the answer of a session command that reports a connection's state.
type sessionMsgs struct {
	Messages []fullMsg `json:"messages"`
	Receipts []string  `json:"receipts"`
	Errors   []struct {
		Headers map[string]string `json:"headers"`
		Body    string            `json:"body"`
	} `json:"errors"`
	Receipt string `json:"receipt"`
	ID      string `json:"id"`
}
