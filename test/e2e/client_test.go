package e2e

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/titan-broker/titan/client"
	"github.com/titan-broker/titan/internal/testport"
)

// TestGoClientReconnectsAfterBrokerRestart drives the public Go client against a titan
// process that is killed (SIGKILL) and restarted on the same port and data directory:
// the client re-dials with backoff and re-subscribes, messages sent with receipts before
// the kill (delivered but not acknowledged) come back after the restart, and sends made
// after it reach the re-subscribed handler.
func TestGoClientReconnectsAfterBrokerRestart(t *testing.T) {
	dir := t.TempDir()
	// A fixed port, so the restart listens where the clients dial; testport's is below the
	// ephemeral range, so the clients' own re-dials cannot take it while titan is down.
	n := newTitanNode(t, strings.Replace(pebbleConfig(dir, ""), "port: 0}", fmt.Sprintf("port: %d}", testport.Free(t)), 1))
	p := n.start()
	addr := p.stompAddrs[0]

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var lost, restored atomic.Int32
	policy := client.WithReconnect(client.ReconnectPolicy{MaxAttempts: 100, InitialBackoff: 50 * time.Millisecond, MaxBackoff: 500 * time.Millisecond})
	consumer, err := client.Dial(ctx, addr, policy, client.WithHeartBeat(time.Second, time.Second),
		client.WithConnectionListener(func(error) { lost.Add(1) }, func() { restored.Add(1) }))
	requireNoError(t, err)
	defer consumer.Close()
	producer, err := client.Dial(ctx, addr, policy)
	requireNoError(t, err)
	defer producer.Close()

	var restarted atomic.Bool
	var mu sync.Mutex
	before, after := map[string]int{}, map[string]int{}
	kick := make(chan struct{}, 1)
	_, err = consumer.Subscribe("", "/queue/client-restart", func(m *client.Message) {
		mu.Lock()
		if restarted.Load() {
			after[string(m.Body)]++
			if err := m.Ack(); err != nil {
				t.Errorf("Ack %s: %v", m.Body, err)
			}
		} else {
			before[string(m.Body)]++ // left unacknowledged: the broker must redeliver it
		}
		mu.Unlock()
		select {
		case kick <- struct{}{}:
		default:
		}
	}, client.WithAck(client.AckClientIndividual))
	requireNoError(t, err)
	waitFor := func(m map[string]int, want int, what string) {
		t.Helper()
		deadline := time.After(30 * time.Second)
		for {
			mu.Lock()
			got := len(m)
			mu.Unlock()
			if got >= want {
				return
			}
			select {
			case <-kick:
			case <-deadline:
				t.Fatalf("%s: %d of %d distinct messages", what, got, want)
			}
		}
	}
	for i := range 5 {
		_, err := producer.Send(ctx, "", "/queue/client-restart", []byte(fmt.Sprintf("pre-%d", i)))
		requireNoError(t, err, "send pre-%d", i)
	}
	waitFor(before, 5, "deliveries before the kill")

	n.kill()
	restarted.Store(true)
	n.start()

	for i := range 5 {
		_, err := producer.Send(ctx, "", "/queue/client-restart", []byte(fmt.Sprintf("post-%d", i)))
		requireNoError(t, err, "send post-%d (the producer waits for its reconnect)", i)
	}
	waitFor(after, 10, "deliveries after the restart")
	mu.Lock()
	defer mu.Unlock()
	for i := range 5 {
		for _, b := range []string{fmt.Sprintf("pre-%d", i), fmt.Sprintf("post-%d", i)} {
			if after[b] == 0 {
				t.Errorf("%s not received after the restart (got %v)", b, after)
			}
		}
	}
	if lost.Load() < 1 || restored.Load() < 1 {
		t.Errorf("connection listener: lost %d, restored %d; want at least 1 each", lost.Load(), restored.Load())
	}
}

// TestGoClientDetectsASilentBrokerByHeartBeats stops (SIGSTOP) a titan process that promised
// heart-beats every 200ms: the client must notice the silence within the grace period, drop
// the connection with a cause that says so, and reconnect once the broker runs again.
func TestGoClientDetectsASilentBrokerByHeartBeats(t *testing.T) {
	dir := t.TempDir()
	n := newTitanNode(t, fmt.Sprintf(`titan:
  servers:
    - {name: stomp, host: 127.0.0.1, port: 0, protocol-options: {heartbeat-x: 200, heartbeat-y: 200}}
  monitor: {host: 127.0.0.1, port: 0}
  store: {type: pebble, data-dir: %q}
`, dir))
	p := n.start()
	defer func() { _ = p.cmd.Process.Signal(syscall.SIGCONT) }()
	causes := make(chan error, 4)
	restored := make(chan struct{}, 4)
	c, err := client.Dial(context.Background(), p.stompAddrs[0],
		client.WithHeartBeat(200*time.Millisecond, 200*time.Millisecond),
		client.WithConnectTimeout(time.Second),
		client.WithReconnect(client.ReconnectPolicy{MaxAttempts: -1, InitialBackoff: 50 * time.Millisecond, MaxBackoff: 200 * time.Millisecond}),
		client.WithConnectionListener(func(err error) { causes <- err }, func() { restored <- struct{}{} }))
	requireNoError(t, err)
	defer c.Close()

	requireNoError(t, p.cmd.Process.Signal(syscall.SIGSTOP))
	stoppedAt := time.Now()
	select {
	case err := <-causes:
		if !strings.Contains(err.Error(), "no heart-beat from "+p.stompAddrs[0]) {
			t.Fatalf("connection lost with %v, want a heart-beat timeout", err)
		}
		t.Logf("silence noticed after %v: %v", time.Since(stoppedAt).Round(time.Millisecond), err)
	case <-time.After(10 * time.Second):
		t.Fatal("the client did not notice the silent broker within 10s")
	}
	requireNoError(t, p.cmd.Process.Signal(syscall.SIGCONT))
	select {
	case <-restored:
	case <-time.After(20 * time.Second):
		t.Fatal("no reconnect within 20s of SIGCONT")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err = c.Send(ctx, "", "/queue/hb-e2e", []byte("alive"))
	requireNoError(t, err, "send after the reconnect")
}
