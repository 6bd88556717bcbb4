package config

import (
	"strings"
	"testing"
)

// heartbeat-min sits beside heartbeat-x/-y: 1000 ms by default, read from protocol-options,
// and at least 1 ms.
func TestHeartbeatMin(t *testing.T) {
	c, err := Parse([]byte(fullYAML))
	if err != nil {
		t.Fatal(err)
	}
	if got := *c.Servers[0].ProtocolOptions.HeartbeatMin; got != 1000 {
		t.Fatalf("default heartbeat-min = %d, want 1000", got)
	}
	y := strings.Replace(fullYAML, "heartbeat-y: 0\n", "heartbeat-y: 0\n        heartbeat-min: 250\n", 1)
	if c, err = Parse([]byte(y)); err != nil {
		t.Fatal(err)
	}
	if got := *c.Servers[0].ProtocolOptions.HeartbeatMin; got != 250 {
		t.Fatalf("heartbeat-min = %d, want 250", got)
	}
	y = strings.Replace(fullYAML, "heartbeat-y: 0\n", "heartbeat-y: 0\n        heartbeat-min: 0\n", 1)
	if c, err = Parse([]byte(y)); err == nil {
		err = c.Validate()
	}
	if err == nil || !strings.Contains(err.Error(), "heartbeat-min must be >= 1 ms") {
		t.Fatalf("heartbeat-min: 0 gave %v, want a validation error", err)
	}
}
