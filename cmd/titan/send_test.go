package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/titan-broker/titan/internal/config"
)

func TestSendWaitsForReceiptAndReportsErrors(t *testing.T) {
	b, _ := startBroker(t, func(c *config.Config) { c.Servers[0].ProtocolOptions.MaxBodyLength = 1024 })
	stomp := b.Addrs()[0]
	r := run(t, "send", "--stomp", stomp, "/queue/cli", "hello", "-H", "x-a:1")
	if r.code != 0 || r.stdout != "sent 5 bytes to /queue/cli\n" || r.stderr != "" {
		t.Fatalf("send: %+v", r)
	}
	q := b.Engine().Queues()
	if len(q) != 1 || q[0].Stats().Messages != 1 {
		t.Fatalf("queue after send: %d queues", len(q))
	}
	r = run(t, "send", "--stomp", stomp, "-o", "json", "--group", "market", "/queue/cli", "hi")
	var res sendResult
	if err := json.Unmarshal([]byte(r.stdout), &res); err != nil || r.code != 0 || res != (sendResult{Destination: "/queue/cli", Group: "market", Bytes: 2}) {
		t.Fatalf("send -o json: %+v %v", r, err)
	}
	r = run(t, "send", "--stomp", stomp, "/queue//bad", "x")
	if r.code != 1 || !strings.HasPrefix(r.stderr, "titan: broker sent ERROR: invalid destination") {
		t.Fatalf("bad destination: %+v", r)
	}
	r = run(t, "send", "--stomp", stomp, "/queue/big", strings.Repeat("x", 4096))
	if r.code != 1 || !strings.Contains(r.stderr, "body of 4096 bytes is over the broker's limit (max-body-length)") {
		t.Fatalf("body over the limit: %+v", r)
	}
	r = run(t, "send", "--stomp", "127.0.0.1:1", "/queue/x", "x")
	if r.code != 1 || !strings.Contains(r.stderr, "cannot connect to 127.0.0.1:1: dial: connection refused") || !strings.Contains(r.stderr, "--stomp") {
		t.Fatalf("unreachable: %+v", r)
	}
	r = run(t, "send", "--stomp", stomp, "/queue/x", "-H", "nocolon", "x")
	if r.code != 1 || !strings.Contains(r.stderr, "is not name:value") {
		t.Fatalf("bad header: %+v", r)
	}
}

// TestSTOMPDefaultsAndEnvironment: without --stomp and TITAN_STOMP the commands talk to the
// documented default and say so; TITAN_STOMP, TITAN_LOGIN and TITAN_PASSCODE are read.
func TestSTOMPDefaultsAndEnvironment(t *testing.T) {
	t.Setenv(stompEnv, "")
	t.Setenv(loginEnv, "")
	t.Setenv(passcodeEnv, "")
	r := run(t, "send", "/queue/x", "x")
	if !strings.HasPrefix(r.stderr, "titan: using the default STOMP address localhost:61613 (set --stomp or TITAN_STOMP)\n") {
		t.Fatalf("default address not reported: %+v", r)
	}
	b, _ := startBroker(t, nil)
	t.Setenv(stompEnv, b.Addrs()[0])
	t.Setenv(loginEnv, "app")
	t.Setenv(passcodeEnv, "secret")
	run(t, "send", "/queue/env", "x").requireOK(t)
	o := stompOptions{}
	o.resolve(&strings.Builder{})
	if o.addr != b.Addrs()[0] || o.login != "app" || o.passcode != "secret" {
		t.Fatalf("resolved %+v", o)
	}
	r = run(t, "send", "--cert", "c.pem", "/queue/x", "x")
	if r.code != 1 || r.stderr != "titan: --cert and --key go together\n" {
		t.Fatalf("--cert alone: %+v", r)
	}
	r = run(t, "send", "--ca", "/nonexistent.pem", "/queue/x", "x")
	if r.code != 1 || !strings.Contains(r.stderr, "--ca: open /nonexistent.pem") {
		t.Fatalf("--ca missing: %+v", r)
	}
}
