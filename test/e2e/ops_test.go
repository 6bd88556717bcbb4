package e2e

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
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
	defer func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(brokerStopTimeout):
			_ = cmd.Process.Kill()
			<-exited
		}
	}()
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
