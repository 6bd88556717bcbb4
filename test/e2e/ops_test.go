package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/titan-broker/titan/client"
)

// TestServerEntryWithoutPortListensOnDefault runs titan with a titan-env.yml whose server
// entry and monitor section name no port (as Titan's own example file does): the broker
// must listen on the documented defaults 61613 and 7777, not on a random port. Another
// process on the machine may hold either port; then titan must fail naming that port, which
// proves the same rule.
func TestServerEntryWithoutPortListensOnDefault(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "titan.yml")
	yaml := "titan:\n  servers:\n    - name: stomp\n      host: 127.0.0.1\n  monitor:\n    host: 127.0.0.1\n  store: {type: memory}\n"
	requireNoError(t, os.WriteFile(path, []byte(yaml), 0o644))
	cmd := exec.Command(titanBin, "serve", "--config", path)
	cmd.Dir = dir
	stderr := &syncBuffer{}
	cmd.Stderr = stderr
	stdout, err := cmd.StdoutPipe()
	requireNoError(t, err)
	requireNoError(t, cmd.Start())
	exited := make(chan struct{})
	ready := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if strings.Contains(sc.Text(), " ready: ") {
				ready <- sc.Text()
			}
		}
		_ = cmd.Wait()
		close(exited)
	}()
	defer terminate(cmd.Process, exited, brokerStopTimeout)
	select {
	case line := <-ready:
		if !strings.Contains(line, "STOMP 127.0.0.1:61613,") || !strings.Contains(line, "monitor 127.0.0.1:7777,") {
			t.Fatalf("ready line %q: want STOMP on 127.0.0.1:61613 and the monitor on 127.0.0.1:7777", line)
		}
	case <-exited:
		msg := stderr.String()
		if !strings.Contains(msg, "61613") && !strings.Contains(msg, "7777") {
			t.Fatalf("titan exited before it was ready, without naming a default port: %s", msg)
		}
		t.Logf("a default port is busy on this machine; titan named it: %s", strings.TrimSpace(msg))
	case <-time.After(brokerStartTimeout):
		t.Fatalf("titan printed no ready line within %v", brokerStartTimeout)
	}
}

// TestJSONLoggingEveryLineIsJSON runs titan serve with log format json: every line it prints,
// the ready banner on stdout included, is one JSON object, and a connection's open and close
// are logged at INFO with the close reason.
func TestJSONLoggingEveryLineIsJSON(t *testing.T) {
	dir := t.TempDir()
	cmd := exec.Command(titanBin, "serve", "--host", "127.0.0.1", "--port", "0", "--monitor-host", "127.0.0.1",
		"--monitor-port", "0", "--store", "memory", "--log-format", "json")
	cmd.Dir = dir
	stderr, stdout := &syncBuffer{}, &syncBuffer{}
	cmd.Stderr, cmd.Stdout = stderr, stdout
	requireNoError(t, cmd.Start())
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	defer func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
		}
	}()
	var ready struct {
		Msg   string   `json:"msg"`
		Stomp []string `json:"stomp"`
	}
	eventually(t, brokerStartTimeout, func() bool {
		line, _, _ := strings.Cut(stdout.String(), "\n")
		return json.Unmarshal([]byte(line), &ready) == nil && ready.Msg == "ready" && len(ready.Stomp) == 1
	}, "a JSON ready line on stdout")
	c, err := client.Dial(context.Background(), ready.Stomp[0])
	requireNoError(t, err)
	_, err = c.Send(context.Background(), "", "/queue/json-log", []byte("x"))
	requireNoError(t, err)
	requireNoError(t, c.Close())
	requireNoError(t, cmd.Process.Signal(syscall.SIGTERM))
	select {
	case err := <-exited:
		requireNoError(t, err, "titan exit after SIGTERM")
	case <-time.After(brokerStopTimeout):
		t.Fatalf("titan did not exit within %v of SIGTERM", brokerStopTimeout)
	}
	var msgs []string
	for name, out := range map[string]string{"stdout": stdout.String(), "stderr": stderr.String()} {
		for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
			var obj struct {
				Level, Msg, Reason string
			}
			if err := json.Unmarshal([]byte(line), &obj); err != nil || obj.Level == "" {
				t.Errorf("%s line is not a JSON log record: %q", name, line)
				continue
			}
			msgs = append(msgs, obj.Level+" "+obj.Msg+" "+obj.Reason)
		}
	}
	joined := strings.Join(msgs, "\n")
	for _, want := range []string{"INFO ready", "INFO connection opened", "INFO connection closed client_disconnect", "INFO shutting down"} {
		if !strings.Contains(joined, want) {
			t.Errorf("no %q record; records:\n%s", want, joined)
		}
	}
}
