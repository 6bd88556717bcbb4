package e2e

import (
	"bufio"
	"bytes"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
)

// broker is one running `titan serve` process.
type broker struct {
	stompAddr   string // 127.0.0.1:PORT, to dial
	stompPort   int
	monitorAddr string // as printed
	cmd         *exec.Cmd
	stderr      *syncBuffer
}

// yamlConfig returns a titan-env.yml for a test broker: STOMP and monitor on free loopback
// ports, the memory store, debug logs (shown only when the test fails), and protocolOptions
// (a YAML flow mapping's inside, e.g. "heartbeat-x: 500, heartbeat-y: 500"; may be empty).
func yamlConfig(protocolOptions string) string {
	return fmt.Sprintf(`titan:
  servers:
    - name: stomp
      host: 127.0.0.1
      port: 0
      protocol-options: {%s}
  monitor: {host: 127.0.0.1, port: 0}
  store: {type: memory}
  log: {level: debug}
`, protocolOptions)
}

var readyLine = regexp.MustCompile(`^Titan \S+ ready: STOMP (\S+?)(?:,|\s).*monitor (\S+), store (.+)$`)

const (
	brokerStartTimeout = 30 * time.Second
	brokerStopTimeout  = 20 * time.Second
)

// startBroker runs `titan serve --config` with yaml and returns once it has printed its ready
// line. Cleanup sends SIGTERM and waits; the broker's stderr goes to the test log when the
// test fails, and a data race the broker reports (race builds) fails the test.
func startBroker(t testing.TB, yaml string) *broker {
	t.Helper()
	dir := t.TempDir()
	path := filepath.Join(dir, "titan.yml")
	requireNoError(t, os.WriteFile(path, []byte(yaml), 0o644))
	cmd := exec.Command(titanBin, "serve", "--config", path)
	cmd.Dir = dir
	b := &broker{cmd: cmd, stderr: &syncBuffer{}}
	cmd.Stderr = b.stderr
	stdout, err := cmd.StdoutPipe()
	requireNoError(t, err)
	requireNoError(t, cmd.Start(), "starting titan")

	exited := make(chan struct{})
	var waitErr error
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
		waitErr = cmd.Wait()
		close(exited)
	}()
	t.Cleanup(func() {
		if terminate(cmd.Process, exited, brokerStopTimeout) {
			t.Errorf("titan did not exit within %v of SIGTERM", brokerStopTimeout)
		} else if waitErr != nil {
			t.Errorf("titan exited with %v after SIGTERM", waitErr)
		}
		if strings.Contains(b.stderr.String(), "WARNING: DATA RACE") {
			t.Errorf("titan reported a data race (see its stderr below)")
		}
		if t.Failed() {
			t.Logf("titan stderr:\n%s", b.stderr.String())
		}
	})

	var line string
	select {
	case line = <-ready:
	case <-exited:
		t.Fatalf("titan exited before it was ready: %v", waitErr)
	case <-time.After(brokerStartTimeout):
		t.Fatalf("titan printed no ready line within %v", brokerStartTimeout)
	}
	m := readyLine.FindStringSubmatch(line)
	if m == nil {
		t.Fatalf("cannot parse titan's ready line %q", line)
	}
	_, port, err := net.SplitHostPort(m[1])
	requireNoError(t, err, "STOMP address %q in ready line", m[1])
	b.stompAddr = net.JoinHostPort("127.0.0.1", port)
	_, err = fmt.Sscan(port, &b.stompPort)
	requireNoError(t, err, "STOMP port %q", port)
	b.monitorAddr = m[2]
	return b
}

// syncBuffer is a bytes.Buffer safe for one writer and concurrent readers.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.String()
}
