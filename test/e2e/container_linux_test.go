package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// dockerImage is what the Dockerfile says the container runs: its ENTRYPOINT, USER and ENV.
type dockerImage struct {
	entrypoint []string
	user       string
	env        []string // KEY=VALUE, in order
}

// readDockerfile reads the final stage's ENTRYPOINT (exec form), USER and ENV (KEY=VALUE
// pairs, continuation lines joined) from the repository's Dockerfile.
func readDockerfile(t *testing.T) dockerImage {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(docRoot, "Dockerfile"))
	requireNoError(t, err)
	var img dockerImage
	var lines []string
	var cur string
	for l := range strings.SplitSeq(string(data), "\n") {
		if strings.HasPrefix(strings.TrimSpace(l), "#") {
			continue
		}
		if s, ok := strings.CutSuffix(l, "\\"); ok {
			cur += s + " "
			continue
		}
		lines = append(lines, cur+l)
		cur = ""
	}
	for _, l := range lines {
		word, rest, _ := strings.Cut(strings.TrimSpace(l), " ")
		switch word {
		case "FROM":
			img = dockerImage{} // only the final stage counts
		case "ENTRYPOINT":
			requireNoError(t, json.Unmarshal([]byte(rest), &img.entrypoint), "ENTRYPOINT %s", rest)
		case "USER":
			img.user = strings.TrimSpace(rest)
		case "ENV":
			for kv := range strings.FieldsSeq(rest) {
				if !strings.Contains(kv, "=") {
					t.Fatalf("Dockerfile ENV %q: only the KEY=VALUE form is read here", rest)
				}
				img.env = append(img.env, kv)
			}
		}
	}
	if len(img.entrypoint) == 0 || img.user == "" {
		t.Fatalf("Dockerfile: no ENTRYPOINT or USER in the final stage")
	}
	return img
}

// netnsPair makes two network namespaces joined by a veth pair, server at 10.213.0.1/24 and
// client at 10.213.0.2/24 (loopback up in both), and removes them at cleanup. Needs root.
func netnsPair(t *testing.T) (server, client string) {
	t.Helper()
	id := fmt.Sprint(os.Getpid() % 100000)
	server, client = "titan-ct-s"+id, "titan-ct-c"+id
	sh := func(args ...string) {
		t.Helper()
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			t.Fatalf("ip %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	sh("netns", "add", server)
	t.Cleanup(func() { _ = exec.Command("ip", "netns", "del", server).Run() })
	sh("netns", "add", client)
	t.Cleanup(func() { _ = exec.Command("ip", "netns", "del", client).Run() })
	vs, vc := "vts"+id, "vtc"+id
	sh("link", "add", vs, "netns", server, "type", "veth", "peer", "name", vc, "netns", client)
	sh("-n", server, "addr", "add", "10.213.0.1/24", "dev", vs)
	sh("-n", client, "addr", "add", "10.213.0.2/24", "dev", vc)
	for _, l := range [][2]string{{server, vs}, {server, "lo"}, {client, vc}, {client, "lo"}} {
		sh("-n", l[0], "link", "set", l[1], "up")
	}
	return server, client
}

var oneTimePassword = regexp.MustCompile(`one-time password: (\S+)`)

// TestContainerEntrypointServesBeyondLoopback runs the image's entrypoint as the container
// would (the Dockerfile's ENTRYPOINT, USER and ENV; the /var/lib/titan volume a fresh
// directory) in its own network namespace, and reaches it from a second namespace over a
// veth pair, as a client reaches a container through a port mapping (CI has no Docker
// daemon). The first start creates the users file and prints a one-time password once;
// with it a client sends over STOMP and operates the monitor API from the other
// namespace; without credentials both refuse; a restart on the same volume keeps the user
// and prints no new password.
func TestContainerEntrypointServesBeyondLoopback(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("this test makes network namespaces and a veth pair: it needs root (CAP_NET_ADMIN), as scripts/test has in CI")
	}
	img := readDockerfile(t)
	serverNS, clientNS := netnsPair(t)
	volume := filepath.Join(t.TempDir(), "volume")
	requireNoError(t, os.MkdirAll(volume, 0o750))
	uid, gid, _ := strings.Cut(img.user, ":")
	requireNoError(t, exec.Command("chown", uid+":"+gid, volume).Run())
	// The binary must be readable by the image's user, as /usr/local/bin/titan is.
	bin := filepath.Join(t.TempDir(), "titan")
	data, err := os.ReadFile(titanBin)
	requireNoError(t, err)
	requireNoError(t, os.WriteFile(bin, data, 0o755))
	// t.TempDir's directories are 0700: the image's user must reach the binary and the volume.
	for _, d := range []string{filepath.Dir(bin), filepath.Dir(volume), filepath.Dir(filepath.Dir(volume))} {
		requireNoError(t, os.Chmod(d, 0o755))
	}

	env := []string{"PATH=/usr/bin:/bin", "GORACE=atexit_sleep_ms=0"}
	for _, kv := range img.env {
		env = append(env, strings.ReplaceAll(kv, "/var/lib/titan", volume))
	}
	start := func() (stderr *syncBuffer, stop func()) {
		t.Helper()
		args := []string{"netns", "exec", serverNS, "setpriv", "--reuid", uid, "--regid", gid, "--clear-groups", bin}
		args = append(args, img.entrypoint[1:]...)
		cmd := exec.Command("ip", args...)
		cmd.Env = env
		stderr = &syncBuffer{}
		cmd.Stderr = stderr
		stdout, err := cmd.StdoutPipe()
		requireNoError(t, err)
		requireNoError(t, cmd.Start(), "starting the entrypoint")
		ready := make(chan struct{})
		exited := make(chan struct{})
		go func() {
			sc := bufio.NewScanner(stdout)
			for sc.Scan() {
				if strings.Contains(sc.Text(), " ready: ") {
					close(ready)
				}
			}
			_ = cmd.Wait()
			close(exited)
		}()
		select {
		case <-ready:
		case <-exited:
			t.Fatalf("the entrypoint exited before it was ready:\n%s", stderr.String())
		case <-time.After(brokerStartTimeout):
			_ = cmd.Process.Kill()
			t.Fatalf("the entrypoint printed no ready line within %v:\n%s", brokerStartTimeout, stderr.String())
		}
		return stderr, func() {
			if terminate(cmd.Process, exited, brokerStopTimeout) {
				t.Errorf("the entrypoint did not exit within %v of SIGTERM", brokerStopTimeout)
			}
			if t.Failed() {
				t.Logf("titan stderr:\n%s", stderr.String())
			}
		}
	}
	// client runs the titan CLI in the client namespace.
	client := func(env []string, args ...string) (string, error) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, "ip", append([]string{"netns", "exec", clientNS, bin}, args...)...)
		cmd.Env = append([]string{"PATH=/usr/bin:/bin", "NO_COLOR=1", "GORACE=atexit_sleep_ms=0"}, env...)
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		err := cmd.Run()
		return out.String(), err
	}

	stderr, stop := start()
	m := oneTimePassword.FindStringSubmatch(stderr.String())
	if m == nil {
		stop()
		t.Fatalf("the first start printed no one-time password:\n%s", stderr.String())
	}
	pw := m[1]
	login := []string{"TITAN_LOGIN=admin", "TITAN_PASSCODE=" + pw}
	monitor := []string{"TITAN_MONITOR_USER=admin", "TITAN_MONITOR_PASSWORD=" + pw}
	const stomp, api = "10.213.0.1:61613", "http://10.213.0.1:7777"

	if out, err := client(login, "send", "--stomp", stomp, "/queue/ct", "hello"); err != nil {
		t.Fatalf("send with the first user's credentials from another namespace: %v\n%s", err, out)
	}
	if out, err := client(nil, "send", "--stomp", stomp, "--retries", "0", "/queue/ct", "anon"); err == nil {
		t.Errorf("an anonymous send from another namespace was accepted: %s", out)
	}
	out, err := client(monitor, "--addr", api, "queue", "list", "-o", "json")
	if err != nil || !strings.Contains(out, `"destination": "/queue/ct"`) || !strings.Contains(out, `"size": 1`) {
		t.Errorf("queue list through the monitor from another namespace: %v\n%s", err, out)
	}
	if out, err := client(nil, "--addr", api, "queue", "list"); err == nil {
		t.Errorf("the monitor API answered without credentials: %s", out)
	}
	stop()

	stderr, stop = start()
	defer stop()
	if strings.Contains(stderr.String(), "one-time password") {
		t.Errorf("a restart on the same volume printed a new password:\n%s", stderr.String())
	}
	if out, err := client(login, "send", "--stomp", stomp, "/queue/ct", "again"); err != nil {
		t.Errorf("send after a restart with the first start's password: %v\n%s", err, out)
	}
}
