package main

import (
	"strings"
	"testing"
)

func TestSendWaitsForReceiptAndReportsErrors(t *testing.T) {
	b, _ := startBroker(t, nil)
	stomp := b.Addrs()[0]
	r := run(t, "send", "--stomp", stomp, "/queue/cli", "hello", "-H", "x-a:1")
	if r.code != 0 || r.stdout != "sent 5 bytes to /queue/cli\n" {
		t.Fatalf("send: %+v", r)
	}
	q := b.Engine().Queues()
	if len(q) != 1 || q[0].Stats().Messages != 1 {
		t.Fatalf("queue after send: %d queues", len(q))
	}
	r = run(t, "send", "--stomp", stomp, "/queue//bad", "x")
	if r.code != 1 || r.stderr != "titan: stompclient: broker sent ERROR: invalid destination\n" {
		t.Fatalf("bad destination: %+v", r)
	}
	r = run(t, "send", "--stomp", "127.0.0.1:1", "/queue/x", "x")
	if r.code != 1 || !strings.Contains(r.stderr, "cannot reach the STOMP port 127.0.0.1:1") || !strings.Contains(r.stderr, "--stomp") {
		t.Fatalf("unreachable: %+v", r)
	}
	r = run(t, "send", "--stomp", stomp, "/queue/x", "-H", "nocolon", "x")
	if r.code != 1 || !strings.Contains(r.stderr, "is not name:value") {
		t.Fatalf("bad header: %+v", r)
	}
}
