package main

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestSubscribePrintsAndAcknowledges(t *testing.T) {
	b, _ := startBroker(t, nil)
	stomp := b.Addrs()[0]
	for _, body := range []string{"one", "two"} {
		if r := run(t, "send", "--stomp", stomp, "/queue/sub", body); r.code != 0 {
			t.Fatalf("send: %+v", r)
		}
	}
	r := run(t, "subscribe", "--stomp", stomp, "/queue/sub", "--count", "1", "--ack", "client-individual")
	if r.code != 0 || !strings.Contains(r.stdout, "--- message 1\n") || !strings.Contains(r.stdout, "\none\n") {
		t.Fatalf("subscribe: %+v", r)
	}
	r = run(t, "subscribe", "--stomp", stomp, "/queue/sub", "-n", "1", "--output", "json")
	var m struct {
		Headers map[string]string `json:"headers"`
		Body    string            `json:"body"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &m); err != nil || m.Body != "two" || m.Headers["destination"] != "/queue/sub" {
		t.Fatalf("json: %+v %v", r, err)
	}
	r = run(t, "subscribe", "--stomp", stomp, "/queue/sub", "--wait", "100ms")
	if r.code != 0 || !strings.Contains(r.stderr, "no message for 100ms; 0 received") {
		t.Fatalf("wait: %+v", r)
	}
}
