package main

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/spf13/cobra"

	"github.com/titan-broker/titan/internal/admin"
	"github.com/titan-broker/titan/internal/brokertest"
)

func TestDashboardOnceOverview(t *testing.T) {
	b, addr := startBroker(t, nil)
	c := brokertest.Connect(t, b.Addrs()[0])
	if _, err := b.Admin().CreateQueue(admin.CreateQueueOptions{QueueRef: admin.QueueRef{Destination: "/orders"}}); err != nil {
		t.Fatal(err)
	}
	r := run(t, "--addr", addr, "--once").requireOK(t)
	requireContains(t, r.stdout,
		"Titan 0.1.0 · "+addr+" · up ",
		"connections 1 (",
		"· 1 queue in 1 group ·",
		"CONNECTIONS (1)\nSESSION",
		c.Conn.LocalAddr().String(),
		"QUEUES (1 queue in 1 group)\nGROUP",
		"default  /orders",
	)
	if strings.Contains(r.stdout, "\x1b[") {
		t.Fatal("ANSI codes in a non-terminal frame")
	}
}

func TestDashboardOnceQueuesViewAndJSON(t *testing.T) {
	b, addr := startBroker(t, nil)
	if _, err := b.Admin().CreateQueue(admin.CreateQueueOptions{QueueRef: admin.QueueRef{Destination: "/queue/jobs", Group: "g1"}}); err != nil {
		t.Fatal(err)
	}
	r := run(t, "--addr", addr, "--view", "queues", "--once").requireOK(t)
	requireContains(t, r.stdout, "MAX PENDING", "g1  ", "/queue/jobs", "\n1 queue in 1 group\n")
	if strings.Contains(r.stdout, "CONNECTIONS") {
		t.Fatal("queues view shows connections")
	}

	r = run(t, "--addr", addr, "--once", "--output", "json").requireOK(t)
	var s admin.Snapshot
	if err := json.Unmarshal([]byte(r.stdout), &s); err != nil {
		t.Fatal(err)
	}
	requireEqual(t, s.Summary.Text, "1 queue in 1 group", "summary")
	requireEqual(t, s.Server.Version, "0.1.0", "version")
}

func TestDashboardLiveWritesPlainFramesWhenNotATerminal(t *testing.T) {
	_, addr := startBroker(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 350*time.Millisecond)
	defer cancel()
	r := runContext(t, ctx, "--addr", addr, "--interval", "100ms")
	r.requireOK(t)
	frames := strings.Count(r.stdout, "Titan 0.1.0")
	if frames < 2 {
		t.Fatalf("%d frames in %q", frames, r.stdout)
	}
	requireContains(t, r.stdout, "\n\nTitan 0.1.0") // frames separated by a blank line
	if strings.Contains(r.stdout, clearScreen) {
		t.Fatal("clear-screen written to a non-terminal")
	}
}

func TestDashboardErrors(t *testing.T) {
	_, addr := startBroker(t, nil)
	run(t, "--addr", addr, "--view", "nope").requireFail(t, "titan: --view \"nope\" is not supported (use overview or queues)\n")
	run(t, "--addr", addr, "--interval", "1ms").requireFail(t, "titan: --interval must be at least 100ms, got 1ms\n")
	run(t, "--addr", addr, "extra").requireFail(t, "titan: unknown command \"extra\" for \"titan\"\n")
}

// TestDashboardShowsRatesAndQuitsOnQ runs the live dashboard with keys typed by the test:
// after traffic the frame shows non-zero rates, and q ends it.
func TestDashboardShowsRatesAndQuitsOnQ(t *testing.T) {
	b, addr := startBroker(t, nil)
	keys := make(chan byte, 1)
	old := dashboardKeys
	dashboardKeys = func(*cobra.Command, bool) (<-chan byte, func(), bool) { return keys, func() {}, true }
	defer func() { dashboardKeys = old }()

	stop := make(chan struct{})
	sent := make(chan struct{})
	go func() {
		defer close(sent)
		c := brokertest.Connect(t, b.Addrs()[0])
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			c.SendFrame("SEND", "x", "destination:/queue/rates")
			time.Sleep(5 * time.Millisecond)
		}
	}()
	out := &lockedBuffer{}
	root := newRootCmd()
	root.SetArgs([]string{"--addr", addr, "--interval", "100ms"})
	root.SetOut(out)
	root.SetErr(out)
	done := make(chan error, 1)
	go func() { done <- root.Execute() }()
	deadline := time.Now().Add(10 * time.Second)
	for !rateShown(out.String()) {
		if time.Now().After(deadline) {
			t.Fatalf("no non-zero rates in the dashboard within 10s:\n%s", out.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	close(stop)
	<-sent
	keys <- 'q'
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("dashboard still running after q")
	}
}

// rateShown reports whether some frame shows a non-zero published rate and an IN/S column.
func rateShown(s string) bool {
	return strings.Contains(s, "IN/S") && strings.Contains(s, "rates/s: published ") &&
		!strings.Contains(lastFrame(s), "rates/s: published 0 ") && !strings.Contains(lastFrame(s), "rates/s: published – ")
}

func lastFrame(s string) string {
	i := strings.LastIndex(s, "Titan 0.1.0")
	if i < 0 {
		return ""
	}
	return s[i:]
}

// lockedBuffer is a strings.Builder safe for one writer and concurrent readers.
type lockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
