package main

import (
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/titan-broker/titan/internal/config"
)

// closedAddr returns the address of a port nothing listens on.
func closedAddr(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

func TestConnectionRefusedSaysWhereAndHow(t *testing.T) {
	t.Setenv(tokenEnv, "")
	addr := "http://" + closedAddr(t)
	want := "titan: cannot reach the Titan monitor API at " + addr + " (connection refused): is the broker running? Use --addr to point at another broker\n"
	run(t, "--addr", addr, "queue", "list").requireFail(t, want)
	run(t, "--addr", addr, "queue", "create", "/orders").requireFail(t, want)
	run(t, "--addr", addr, "--once").requireFail(t, want)
	// An address without a scheme means http.
	run(t, "--addr", strings.TrimPrefix(addr, "http://"), "queue", "list").requireFail(t, want)
}

func TestTokenFlagAndEnvironment(t *testing.T) {
	_, addr := startBroker(t, func(c *config.Config) { c.Monitor.Token = "s3cret-0123456789abcdef" })
	run(t, "--addr", addr, "queue", "list").
		requireFail(t, "titan: the monitor API at "+addr+" needs credentials: pass --user and --password-file (or set TITAN_MONITOR_USER and TITAN_MONITOR_PASSWORD), or --token-file (TITAN_MONITOR_TOKEN)\n")
	run(t, "--addr", addr, "--token-file", secretFile(t, "wrong"), "queue", "list").
		requireFail(t, "titan: the monitor API at "+addr+" rejected the token (check --token-file or TITAN_MONITOR_TOKEN)\n")
	run(t, "--addr", addr, "--token-file", secretFile(t, "s3cret-0123456789abcdef"), "queue", "list").requireOK(t)
	t.Setenv(tokenEnv, "s3cret-0123456789abcdef")
	run(t, "--addr", addr, "queue", "create", "/orders").requireOK(t)
	run(t, "--addr", addr, "--once").requireOK(t)
}

func TestNotATitanAPIAndTimeout(t *testing.T) {
	t.Setenv(tokenEnv, "")
	other := httptest.NewServer(http.NotFoundHandler())
	defer other.Close()
	run(t, "--addr", other.URL, "queue", "list").
		requireFail(t, "titan: unexpected answer from "+other.URL+": HTTP 404 Not Found (is --addr the Titan monitor API?)\n")

	release := make(chan struct{})
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer slow.Close()
	defer close(release)
	start := time.Now()
	run(t, "--addr", slow.URL, "--timeout", "100ms", "queue", "list").
		requireFail(t, "titan: no answer from the Titan monitor API at "+slow.URL+" within 100ms: check --addr, or raise --timeout\n")
	if time.Since(start) > 3*time.Second {
		t.Fatal("--timeout not applied")
	}
}

func TestGlobalFlagValidation(t *testing.T) {
	t.Setenv(tokenEnv, "")
	run(t, "--output", "yaml", "queue", "list").requireFail(t, "titan: --output \"yaml\" is not supported (use table or json)\n")
	run(t, "--timeout", "0s", "queue", "list").requireFail(t, "titan: --timeout must be positive, got 0s\n")
	run(t, "--addr", "ftp://x", "queue", "list").requireFail(t, "titan: --addr \"ftp://x\" is not a monitor API address (use e.g. --addr http://localhost:7777)\n")
	r := run(t, "queue", "--help").requireOK(t)
	requireContains(t, r.stdout, "create", "delete", "pause", "resume", "set", "list", "--addr", "--token", "--timeout", "--no-color", "--output")
	r = run(t, "--help").requireOK(t)
	requireContains(t, r.stdout, "--view", "--interval", "--once", "serve", "queue")
}
