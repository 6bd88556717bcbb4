package main

import (
	"encoding/json"
	"runtime"
	"strings"
	"testing"
)

func TestVersionCommandAndFlag(t *testing.T) {
	oldV, oldC := version, commit
	defer func() { version, commit = oldV, oldC }()

	// Unstamped: the version falls back to the module's or the broker's.
	version, commit = "", ""
	r := run(t, "version").requireOK(t)
	requireContains(t, r.stdout, "titan 0.1.0 (commit ", runtime.Version())

	// Stamped by -ldflags -X main.version=... -X main.commit=...
	version, commit = "1.2.3", "abcdef0"
	want := "titan 1.2.3 (commit abcdef0, " + runtime.Version() + " " + runtime.GOOS + "/" + runtime.GOARCH + ")\n"
	requireEqual(t, run(t, "version").requireOK(t).stdout, want, "titan version")
	requireEqual(t, run(t, "--version").requireOK(t).stdout, want, "titan --version")
	var bi buildInfo
	if err := json.Unmarshal([]byte(run(t, "version", "-o", "json").requireOK(t).stdout), &bi); err != nil {
		t.Fatal(err)
	}
	if bi.Version != "1.2.3" || bi.Commit != "abcdef0" || bi.Platform != runtime.GOOS+"/"+runtime.GOARCH {
		t.Fatalf("json %+v", bi)
	}
}

func TestAddrFromEnvironmentAndDefaultNotice(t *testing.T) {
	_, addr := startBroker(t, nil)
	t.Setenv(addrEnv, addr)
	run(t, "queue", "list").requireOK(t)
	// An explicit --addr wins over TITAN_ADDR.
	r := run(t, "--addr", "http://"+closedAddr(t), "queue", "list")
	if r.code == 0 {
		t.Fatalf("--addr did not win over %s: %+v", addrEnv, r)
	}
	t.Setenv(addrEnv, "")
	r = run(t, "--timeout", "200ms", "queue", "list")
	requireContains(t, r.stderr, "titan: using the default monitor API address http://localhost:7777 (set --addr or TITAN_ADDR)\n")
}

// TestServeBannerIsJSONWithJSONOutput: -o json (like JSON logging) makes titan serve's own
// lines JSON records, a startup failure included.
func TestServeBannerIsJSONWithJSONOutput(t *testing.T) {
	r := run(t, "-o", "json", "serve", "--port", "99999")
	var rec struct {
		Level, Msg, Err string
	}
	if r.code != 1 || r.stdout != "" || json.Unmarshal([]byte(r.stderr), &rec) != nil || rec.Level != "ERROR" || !strings.Contains(rec.Err, "port 99999 out of range") {
		t.Fatalf("serve failure with -o json: %+v", r)
	}
	r = run(t, "serve", "--log-format", "json", "--port", "99999")
	if r.code != 1 || json.Unmarshal([]byte(r.stderr), &rec) != nil {
		t.Fatalf("serve failure with --log-format json: %+v", r)
	}
	r = run(t, "serve", "--port", "99999")
	if r.code != 1 || !strings.HasPrefix(r.stderr, "titan: invalid configuration:") {
		t.Fatalf("serve failure in text mode: %+v", r)
	}
}
