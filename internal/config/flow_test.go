package config

import (
	"strings"
	"testing"
	"time"

	"github.com/titan-broker/titan/internal/dest"
)

func TestFlowControlDefaults(t *testing.T) {
	c, err := Parse([]byte("titan:\n  servers:\n    - name: a\n"))
	if err != nil {
		t.Fatal(err)
	}
	f := c.FlowControl
	if f.Subscriber.MaxPendingBytes != 16<<20 || f.Subscriber.ResumePendingBytes != 8<<20 ||
		f.Subscriber.SlowConsumerTimeoutDuration() != 30*time.Second {
		t.Fatalf("subscriber defaults: %+v", f.Subscriber)
	}
	if f.Heap.HighWatermark != 0.9 || f.Heap.LowWatermark != 0.7 || f.Heap.MaxBytes != 0 {
		t.Fatalf("heap defaults: %+v", f.Heap)
	}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	c, err = Parse([]byte("titan:\n  flow-control:\n    heap: {high-watermark: 0.5}\n"))
	if err != nil || c.Validate() != nil || c.FlowControl.Heap.LowWatermark != 0.4 {
		t.Fatalf("a lowered high mark lowers the default low mark: %v %+v", err, c.FlowControl.Heap)
	}
	if c.Servers[0].ProtocolOptions.MaxOutboundBytes != 16<<20 {
		t.Fatalf("max-outbound-bytes follows the subscriber high watermark: %d", c.Servers[0].ProtocolOptions.MaxOutboundBytes)
	}
}

func TestFlowControlSettings(t *testing.T) {
	c, err := Parse([]byte(`
titan:
  servers:
    - name: a
    - name: b
      port: 61614
      protocol-options: {max-outbound-bytes: 4096}
  flow-control:
    subscriber: {max-pending-bytes: 1048576, resume-pending-bytes: 1024, slow-consumer-timeout: -1}
    heap: {high-watermark: 0.8, low-watermark: 0.5, max-bytes: 1000000}
  address-settings:
    - match: "lossy.#"
      slow-consumer-policy: drop
    - match: "lossy.kept"
      slow-consumer-policy: BLOCK
`))
	if err != nil {
		t.Fatal(err)
	}
	f := c.FlowControl
	if f.Subscriber.MaxPendingBytes != 1<<20 || f.Subscriber.ResumePendingBytes != 1024 || f.Subscriber.SlowConsumerTimeoutDuration() != 0 {
		t.Fatalf("subscriber: %+v", f.Subscriber)
	}
	if c.Servers[0].ProtocolOptions.MaxOutboundBytes != 1<<20 || c.Servers[1].ProtocolOptions.MaxOutboundBytes != 4096 {
		t.Fatalf("per-server high watermark: %d %d", c.Servers[0].ProtocolOptions.MaxOutboundBytes, c.Servers[1].ProtocolOptions.MaxOutboundBytes)
	}
	if f.Heap.HighWatermark != 0.8 || f.Heap.LowWatermark != 0.5 || f.Heap.MaxBytes != 1000000 {
		t.Fatalf("heap: %+v", f.Heap)
	}
	r := NewResolver(&c)
	ev := func(ch string) dest.Identity {
		return dest.Identity{Group: "default", Pattern: dest.PatternEvents, Channel: ch}
	}
	if !r.HasDropPolicy() || !r.DropWhenFull(ev("lossy.x")) || r.DropWhenFull(ev("lossy.kept")) || r.DropWhenFull(ev("prices")) {
		t.Fatal("slow-consumer-policy: the most specific match decides; default BLOCK")
	}
}

func TestFlowControlValidation(t *testing.T) {
	for _, tc := range []struct{ yaml, want string }{
		{"  flow-control:\n    subscriber: {max-pending-bytes: 100, resume-pending-bytes: 100}\n", "resume-pending-bytes < max-pending-bytes"},
		{"  flow-control:\n    heap: {high-watermark: 0.5, low-watermark: 0.6}\n", "low-watermark < high-watermark"},
		{"  flow-control:\n    heap: {high-watermark: 1.5}\n", "high-watermark <= 1"},
		{"  address-settings:\n    - {match: \"#\", slow-consumer-policy: FAIL}\n", `slow-consumer-policy "FAIL" is not supported`},
	} {
		c, err := Parse([]byte("titan:\n" + tc.yaml))
		if err == nil {
			err = c.Validate()
		}
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: err %v, want %q", tc.yaml, err, tc.want)
		}
	}
}

// TestSubscriberBufferAndPendingRequestLimits checks the keys of issues 30 and 32:
// max-buffer-bytes defaults to four times max-pending-bytes and may not be below it;
// slow-consumer-policy CLOSE is the default's name (BLOCK its old one); the pending-request
// limits default to 100000 and 1000.
func TestSubscriberBufferAndPendingRequestLimits(t *testing.T) {
	c, err := Parse([]byte("titan:\n  flow-control:\n    subscriber: {max-pending-bytes: 1048576}\n"))
	if err != nil || c.Validate() != nil {
		t.Fatalf("%v %v", err, c.Validate())
	}
	if got := c.FlowControl.Subscriber.MaxBufferBytes; got != 4<<20 {
		t.Fatalf("max-buffer-bytes default %d, want 4 MiB", got)
	}
	if c.Limits.MaxPendingRequests != 100000 || c.Limits.MaxPendingRequestsByClient != 1000 {
		t.Fatalf("pending-request limits %d, %d", c.Limits.MaxPendingRequests, c.Limits.MaxPendingRequestsByClient)
	}
	c, err = Parse([]byte("titan:\n  flow-control:\n    subscriber: {max-pending-bytes: 1048576, max-buffer-bytes: 1024}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "max-buffer-bytes") {
		t.Fatalf("max-buffer-bytes below max-pending-bytes: %v", err)
	}
	for _, p := range []string{"", "CLOSE", "close", "BLOCK"} {
		if drop, ok := ParseSlowConsumerPolicy(p); drop || !ok {
			t.Fatalf("slow-consumer-policy %q: drop %v ok %v", p, drop, ok)
		}
	}
}
