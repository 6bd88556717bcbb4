package main

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestBenchQueueAndTopic(t *testing.T) {
	b, _ := startBroker(t, nil)
	stomp := b.Addrs()[0]
	r := run(t, "bench", "--stomp", stomp, "--destination", "/queue/b", "-p", "2", "-c", "2", "-n", "2000", "--output", "json")
	var res benchResult
	if err := json.Unmarshal([]byte(r.stdout), &res); err != nil || r.code != 0 {
		t.Fatalf("bench: %+v %v", r, err)
	}
	if res.Sent != 2000 || res.Received != 2000 || res.SendPerSecond <= 0 || res.LatencyP99Ms < res.LatencyP50Ms {
		t.Fatalf("queue result %+v", res)
	}
	r = run(t, "bench", "--stomp", stomp, "--destination", "/topic/b", "-c", "3", "-n", "500")
	if r.code != 0 || !strings.Contains(r.stdout, "received      1500:") {
		t.Fatalf("topic fan-out: %+v", r)
	}
}

// --rate paces the producers (scenario f of scripts/bench): every message still arrives
// (with --vhost, the CONNECT host header RabbitMQ needs); a negative rate is refused.
func TestBenchRate(t *testing.T) {
	b, _ := startBroker(t, nil)
	stomp := b.Addrs()[0]
	r := run(t, "bench", "--stomp", stomp, "--vhost", "/", "--destination", "/queue/rate", "-p", "2", "-n", "300", "--rate", "3000", "--output", "json")
	var res benchResult
	if err := json.Unmarshal([]byte(r.stdout), &res); err != nil || r.code != 0 {
		t.Fatalf("bench --rate: %+v %v", r, err)
	}
	if res.Sent != 300 || res.Received != 300 {
		t.Fatalf("bench --rate result %+v", res)
	}
	if r := run(t, "bench", "--stomp", stomp, "--rate", "-1"); r.code == 0 {
		t.Fatalf("--rate -1 accepted: %+v", r)
	}
}
