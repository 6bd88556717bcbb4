// Package mountns lets a test that mounts file systems (a small tmpfs to fill up, a
// read-only bind mount) run without root: it runs the test again in a new user and mount
// namespace, where the test's user is root of its own mounts (unshare(1) --user
// --map-root-user --mount; Linux 3.8+, tmpfs and bind mounts allowed there since 4.x). The
// mounts live and die with that namespace, so nothing leaks onto the host. It is test
// support: only _test.go files import it.
package mountns

import (
	"flag"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
)

// envInside marks the re-run test process, so that it never re-runs itself again.
const envInside = "TITAN_MOUNTNS_INSIDE"

// Delegate makes the calling test able to mount. As root (CI) it returns false and the test
// goes on in this process. Otherwise it runs this test alone (-test.run ^Name$, the same
// -test.timeout) in a new user and mount namespace with env added to the environment,
// passes its output to t.Log, fails t when it failed, and returns true: the caller returns
// at once. Call it first in the test, before any other setup. When no namespace can be made
// (unshare missing, unprivileged user namespaces disabled) t fails and says so: a test that
// cannot check its rule does not pass quietly.
func Delegate(t *testing.T, env ...string) bool {
	t.Helper()
	if os.Geteuid() == 0 {
		return false
	}
	if os.Getenv(envInside) != "" {
		t.Fatalf("mountns: not root inside the user namespace (euid %d)", os.Geteuid())
	}
	parts := strings.Split(t.Name(), "/")
	for i, p := range parts {
		parts[i] = "^" + regexp.QuoteMeta(p) + "$"
	}
	args := []string{"--user", "--map-root-user", "--mount", os.Args[0],
		"-test.run", strings.Join(parts, "/"), "-test.count", "1", "-test.v"}
	if f := flag.Lookup("test.timeout"); f != nil {
		args = append(args, "-test.timeout", f.Value.String())
	}
	cmd := exec.Command("unshare", args...)
	cmd.Env = append(append(os.Environ(), envInside+"=1"), env...)
	out, err := cmd.CombinedOutput()
	t.Logf("run in a user and mount namespace (not root):\n%s", out)
	if err != nil {
		t.Fatalf("mountns: the test needs root, or unprivileged user namespaces for unshare(1): %v", err)
	}
	top, _, _ := strings.Cut(t.Name(), "/") // -test.v reports "--- PASS: TestX" for it
	if !strings.Contains(string(out), "--- PASS: "+top) {
		t.Fatalf("mountns: the re-run in the namespace did not report %s passed", t.Name())
	}
	return true
}
