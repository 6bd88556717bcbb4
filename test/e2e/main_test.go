package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/titan-broker/titan/internal/testwait"
)

// systemPython is the interpreter Debian's python3-stomp installs for; the python3 first on
// PATH may be another one (pyenv) that cannot import stomp.
const systemPython = "/usr/bin/python3"

const installHint = "run scripts/test, which installs the end-to-end test clients"

var (
	// titanBin is the broker binary TestMain builds once for every test.
	titanBin string
	// pythonErr and nodeErr say why a client cannot run (nil when it can).
	pythonErr error
	nodeErr   error
)

func TestMain(m *testing.M) { os.Exit(runTests(m)) }

func runTests(m *testing.M) int {
	dir, err := os.MkdirTemp("", "titan-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	defer os.RemoveAll(dir)
	if bin := os.Getenv("TITAN_E2E_BINARY"); bin != "" {
		// Test a titan binary built elsewhere (a release build, another checkout).
		titanBin = bin
		fmt.Fprintf(os.Stderr, "e2e: testing %s (TITAN_E2E_BINARY)\n", bin)
	} else if err := buildTitan(filepath.Join(dir, "titan")); err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	pythonErr = checkPython()
	nodeErr = checkNode()
	phpErr = checkPHP()
	return m.Run()
}

// buildTitan builds cmd/titan to path, with -race when the tests run with it, and sets
// titanBin.
func buildTitan(path string) error {
	titanBin = path
	args := []string{"build"}
	if raceEnabled {
		args = append(args, "-race")
	}
	args = append(args, "-o", path, "github.com/titan-broker/titan/cmd/titan")
	build := exec.Command("go", args...)
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		return fmt.Errorf("building titan (go %s): %v", strings.Join(args, " "), err)
	}
	return nil
}

func checkPython() error {
	out, err := exec.Command(systemPython, "-c", "import stomp; print(stomp.__version__[0])").CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s cannot import stomp (python3-stomp): %v: %s", systemPython, err, bytes.TrimSpace(out))
	}
	if major := strings.TrimSpace(string(out)); major != "8" {
		return fmt.Errorf("%s imports stomp.py major version %s; the tests need 8.x (Debian's python3-stomp)", systemPython, major)
	}
	return nil
}

func checkNode() error {
	if _, err := exec.LookPath("node"); err != nil {
		return fmt.Errorf("node is not on PATH: %v", err)
	}
	for _, pkg := range []string{"@stomp/stompjs", "@stomp/tcp-wrapper"} {
		p := filepath.Join("clients", "node_modules", filepath.FromSlash(pkg), "package.json")
		if _, err := os.Stat(p); err != nil {
			return fmt.Errorf("%s is not installed in test/e2e/clients/node_modules (%v)", pkg, err)
		}
	}
	return nil
}

// stompClient is one real STOMP client library and the script that drives it.
type stompClient struct {
	name  string // subtest name
	short string // used in destination names, so each client has its own
	cmd   func(scenario, args string) (string, []string)
	err   func() error
}

var (
	pythonClient = stompClient{
		name:  "python3-stomp",
		short: "py",
		cmd: func(scenario, args string) (string, []string) {
			return systemPython, []string{filepath.Join("clients", "pyclient.py"), scenario, args}
		},
		err: func() error { return pythonErr },
	}
	stompjsClient = stompClient{
		name:  "stompjs",
		short: "js",
		cmd: func(scenario, args string) (string, []string) {
			return "node", []string{filepath.Join("clients", "jsclient.mjs"), scenario, args}
		},
		err: func() error { return nodeErr },
	}
	allClients = []stompClient{pythonClient, stompjsClient}
)

// require fails the test when the client is not installed: never a skip.
func (c stompClient) require(t *testing.T) {
	t.Helper()
	if err := c.err(); err != nil {
		t.Fatalf("%s client unavailable: %v; %s", c.name, err, installHint)
	}
}

// scriptTimeout bounds one scenario process; waits inside a scenario are bounded by
// scenarioWait (seconds), well below it.
const (
	scriptTimeout = 90 * time.Second
	scenarioWait  = 15
)

// run runs scenario against b with args (host, port and timeout are added) and decodes the
// JSON the script prints into out. A scenario that reported an error fails the test (with
// t.Errorf, so the caller's assertions still show what was observed); its stderr is logged
// when the test fails.
func (c stompClient) run(t *testing.T, b *broker, scenario string, args map[string]any, out any) {
	t.Helper()
	c.require(t)
	full := map[string]any{"host": "127.0.0.1", "port": b.stompPort, "timeout": scenarioWait}
	for k, v := range args {
		full[k] = v
	}
	js, err := json.Marshal(full)
	requireNoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), scriptTimeout)
	defer cancel()
	name, argv := c.cmd(scenario, string(js))
	cmd := exec.CommandContext(ctx, name, argv...)
	cmd.WaitDelay = 5 * time.Second
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	runErr := cmd.Run()
	t.Cleanup(func() {
		if t.Failed() && stderr.Len() > 0 {
			t.Logf("%s %s stderr:\n%s", c.name, scenario, stderr.String())
		}
	})
	if runErr != nil {
		t.Fatalf("%s %s %s: %v after %v\nstdout: %s\nstderr: %s", c.name, scenario, js, runErr,
			time.Since(start).Round(time.Millisecond), stdout.String(), stderr.String())
	}
	line := lastLine(stdout.Bytes())
	var status struct {
		Error string `json:"error"`
	}
	if err := json.Unmarshal(line, &status); err != nil {
		t.Fatalf("%s %s printed no JSON result (%v): %q", c.name, scenario, err, stdout.String())
	}
	if err := json.Unmarshal(line, out); err != nil {
		t.Fatalf("%s %s: decoding %s: %v", c.name, scenario, line, err)
	}
	if status.Error != "" {
		t.Errorf("%s %s did not complete: %s\nobserved: %s", c.name, scenario, status.Error, line)
	}
}

func lastLine(b []byte) []byte {
	lines := bytes.Split(bytes.TrimSpace(b), []byte("\n"))
	return lines[len(lines)-1]
}

// forEachClient runs fn as one subtest per client library.
func forEachClient(t *testing.T, fn func(t *testing.T, c stompClient)) {
	t.Helper()
	for _, c := range allClients {
		t.Run(c.name, func(t *testing.T) { fn(t, c) })
	}
}

// ---------------------------------------------------------------- small helpers

func requireNoError(t testing.TB, err error, msgAndArgs ...any) {
	t.Helper()
	if err != nil {
		t.Fatalf("%sunexpected error: %v", prefix(msgAndArgs), err)
	}
}

func requireEqual[T comparable](t *testing.T, want, got T, msgAndArgs ...any) {
	t.Helper()
	if want != got {
		t.Fatalf("%swant %v, got %v", prefix(msgAndArgs), want, got)
	}
}

func checkEqual[T comparable](t *testing.T, want, got T, msgAndArgs ...any) {
	t.Helper()
	if want != got {
		t.Errorf("%swant %v, got %v", prefix(msgAndArgs), want, got)
	}
}

func prefix(msgAndArgs []any) string {
	if len(msgAndArgs) == 0 {
		return ""
	}
	if f, ok := msgAndArgs[0].(string); ok {
		return fmt.Sprintf(f, msgAndArgs[1:]...) + ": "
	}
	return fmt.Sprint(msgAndArgs...) + ": "
}

// terminate stops a process whose exit closes exited: SIGTERM, then a kill after grace. It
// reports whether the kill was needed (the process ignored SIGTERM for grace).
func terminate(p *os.Process, exited <-chan struct{}, grace time.Duration) (killed bool) {
	_ = p.Signal(syscall.SIGTERM) // an exited process refuses it: exited is closed then
	select {
	case <-exited:
		return false
	case <-time.After(grace):
		_ = p.Kill()
		<-exited
		return true
	}
}

// eventually polls fn until it returns true, failing the test after total
// (testwait.Eventually, which sets its own polling interval). msgAndArgs are formatted only
// on failure, so they may point at values fn updates.
func eventually(t testing.TB, total time.Duration, fn func() bool, msgAndArgs ...any) {
	t.Helper()
	testwait.Eventually(lazyPrefix{t, msgAndArgs}, total, "condition", fn)
}

// lazyPrefix is a testing.TB whose Fatalf prefixes msgAndArgs, formatted when it fails.
type lazyPrefix struct {
	testing.TB
	msgAndArgs []any
}

// Fatalf fails the test with the prefix and the message.
func (l lazyPrefix) Fatalf(format string, args ...any) {
	l.TB.Helper()
	l.TB.Fatalf(prefix(l.msgAndArgs)+format, args...)
}
