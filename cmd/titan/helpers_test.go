package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/titan-broker/titan/internal/broker"
	"github.com/titan-broker/titan/internal/brokertest"
	"github.com/titan-broker/titan/internal/config"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// startBroker runs a real in-process broker (ports 0, memory store) and returns it with the
// --addr value of its monitor API. TITAN_MONITOR_TOKEN is cleared for the test.
func startBroker(t *testing.T, mutate func(*config.Config)) (*broker.Broker, string) {
	t.Helper()
	t.Setenv(tokenEnv, "")
	c := config.Default()
	c.Servers[0].Host, c.Servers[0].Port = "127.0.0.1", 0
	c.Monitor.Host, c.Monitor.Port = "127.0.0.1", 0
	c.Store.Type = "memory"
	if mutate != nil {
		mutate(&c)
	}
	b := brokertest.Run(t, c)
	return b, "http://" + b.MonitorAddr()
}

// result is one CLI run.
type result struct {
	stdout, stderr string
	code           int
}

// run executes the titan command line exactly as main does and returns its output and exit
// status.
func run(t *testing.T, args ...string) result {
	t.Helper()
	var out, errb bytes.Buffer
	code := execute(args, &out, &errb)
	return result{stdout: out.String(), stderr: errb.String(), code: code}
}

// runContext is run with a context (for the live dashboard).
func runContext(t *testing.T, ctx context.Context, args ...string) result {
	t.Helper()
	var out, errb bytes.Buffer
	root := newRootCmd()
	root.SetArgs(args)
	root.SetOut(&out)
	root.SetErr(&errb)
	code := 0
	if err := root.ExecuteContext(ctx); err != nil {
		errb.WriteString("titan: " + err.Error() + "\n")
		code = 1
	}
	return result{stdout: out.String(), stderr: errb.String(), code: code}
}

func (r result) requireOK(t *testing.T) result {
	t.Helper()
	if r.code != 0 {
		t.Fatalf("exit %d, stderr %q, stdout %q", r.code, r.stderr, r.stdout)
	}
	if r.stderr != "" {
		t.Fatalf("unexpected stderr %q", r.stderr)
	}
	return r
}

// requireFail checks a non-zero exit with exactly the one-line error stderr.
func (r result) requireFail(t *testing.T, stderr string) {
	t.Helper()
	if r.code == 0 {
		t.Fatalf("exit 0, want failure; stdout %q", r.stdout)
	}
	if r.stderr != stderr {
		t.Fatalf("stderr\n got %q\nwant %q", r.stderr, stderr)
	}
	if strings.Count(r.stderr, "\n") != 1 {
		t.Fatalf("error is not one line: %q", r.stderr)
	}
}

func requireEqual[T comparable](t testing.TB, got, want T, what string) {
	t.Helper()
	if got != want {
		t.Fatalf("%s:\n got %v\nwant %v", what, got, want)
	}
}

func requireContains(t testing.TB, s string, subs ...string) {
	t.Helper()
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			t.Fatalf("output lacks %q:\n%s", sub, s)
		}
	}
}
