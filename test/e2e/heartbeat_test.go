package e2e

import (
	"slices"
	"testing"
	"time"
)

// heartbeatConfig has the broker offer and ask for 500 ms heart-beats (and agree to
// intervals down to 100 ms), and drop clients that offer none after 2 s of silence.
var heartbeatConfig = yamlConfig("heartbeat-x: 500, heartbeat-y: 500, heartbeat-min: 100, connection-ttl: 2000")

// The heart-beat tests are timing-sensitive, so they do not call t.Parallel: they run before
// the parallel tests start and do not compete with them for the CPU.

// A client that negotiates 500 ms heart-beats both ways and then sends no frame for 1.6 s
// (more than 3× the interval) stays connected, and can then send and receive.
func TestHeartbeatsKeepIdleConnectionAlive(t *testing.T) {
	b := startBroker(t, heartbeatConfig)
	const interval, idle = 500, 1600
	forEachClient(t, func(t *testing.T, c stompClient) {
		var out struct {
			HeartBeat         *string  `json:"heart_beat"`
			ServerHeartbeats  int      `json:"server_heartbeats_while_idle"`
			DisconnectedIdle  bool     `json:"disconnected_while_idle"`
			HeartbeatTimeouts int      `json:"heartbeat_timeouts"`
			Received          []string `json:"received"`
			Errors            []any    `json:"errors"`
		}
		c.run(t, b, "heartbeat", map[string]any{
			"dest": "/queue/idle-" + c.short, "heartbeat_ms": interval, "idle_ms": idle,
			// Give python3-stomp the tolerance stompjs has by default (2 intervals) and the
			// broker applies to clients, so a busy CI machine does not make it drop the
			// connection on its own.
			"receive_scale": 2.0,
		}, &out)
		if out.HeartBeat == nil || *out.HeartBeat != "500,500" {
			t.Errorf("CONNECTED heart-beat = %v, want 500,500", out.HeartBeat)
		}
		if out.DisconnectedIdle {
			t.Errorf("the connection closed while idle for %d ms with %d ms heart-beats", idle, interval)
		}
		if out.HeartbeatTimeouts != 0 {
			t.Errorf("the client missed the broker's heart-beats %d times", out.HeartbeatTimeouts)
		}
		// 1.6 s at one EOL per 500 ms at most: at least 2 must have arrived.
		if out.ServerHeartbeats < 2 {
			t.Errorf("the client received %d heart-beats from the broker in %d ms, want at least 2", out.ServerHeartbeats, idle)
		}
		if !slices.Equal([]string{"after-idle"}, out.Received) {
			t.Errorf("after idling the client received %q, want [after-idle]", out.Received)
		}
		if len(out.Errors) != 0 {
			t.Errorf("ERROR frames: %v", out.Errors)
		}
	})
}

// A raw client that negotiates 500 ms heart-beats and then sends nothing is disconnected by
// the broker within a bounded time (the spec's 2× the interval is 1 s; we allow 5 s).
func TestSilentHeartbeatingClientIsDropped(t *testing.T) {
	b := startBroker(t, heartbeatConfig)
	c := dialRaw(t, b)
	f := c.connect("heart-beat:500,500")
	if hb, _ := f.get("heart-beat"); hb != "500,500" {
		t.Errorf("CONNECTED heart-beat = %q, want 500,500", hb)
	}
	took, err := c.expectClosed(5 * time.Second)
	if err != nil {
		t.Fatalf("silent client: %v", err)
	}
	t.Logf("silent client dropped %v after CONNECTED", took.Round(time.Millisecond))
}

// A raw client that offers no heart-beats and then sends nothing is disconnected once the
// configured connection-ttl (2 s) has passed, and not before.
func TestSilentClientWithoutHeartbeatsDroppedAfterTTL(t *testing.T) {
	b := startBroker(t, heartbeatConfig)
	c := dialRaw(t, b)
	c.connect()
	took, err := c.expectClosed(8 * time.Second)
	if err != nil {
		t.Fatalf("silent client without heart-beats: %v", err)
	}
	if took < 1500*time.Millisecond {
		t.Errorf("dropped after %v, before the 2 s connection-ttl", took)
	}
}

// With the shipped heart-beat settings (heartbeat-x/-y 10 s, heartbeat-min 1 s), a client
// that asks for 1 s heart-beats is offered 1 s in CONNECTED and gets them, not one every
// 10 s: a raw client that beats every 1 s itself, and python3-stomp with heart-beats
// (1000, 1000), which would drop the connection if the broker's beats were late.
func TestHeartbeatsAsTheClientAsks(t *testing.T) {
	b := startBroker(t, yamlConfig(""))

	t.Run("raw", func(t *testing.T) {
		c := dialRaw(t, b)
		f := c.connect("heart-beat:1000,1000")
		if hb, _ := f.get("heart-beat"); hb != "1000,1000" {
			t.Fatalf("CONNECTED heart-beat = %q, want 1000,1000", hb)
		}
		// Beat every 500 ms ourselves and count the broker's EOLs for 3.5 s.
		stop := make(chan struct{})
		done := make(chan struct{})
		go func() {
			defer close(done)
			tick := time.NewTicker(500 * time.Millisecond)
			defer tick.Stop()
			for {
				select {
				case <-stop:
					return
				case <-tick.C:
					_ = c.write("\n")
				}
			}
		}()
		var gaps []time.Duration
		last := time.Now()
		end := last.Add(3500 * time.Millisecond)
		_ = c.conn.SetReadDeadline(end)
		for {
			b, err := c.r.ReadByte()
			if err != nil {
				break
			}
			if b == '\n' {
				now := time.Now()
				gaps = append(gaps, now.Sub(last))
				last = now
			}
		}
		close(stop)
		<-done
		if len(gaps) < 2 {
			t.Fatalf("%d heart-beats from the broker in 3.5 s at a 1 s interval (gaps %v)", len(gaps), gaps)
		}
		for _, g := range gaps[1:] {
			if g > 2500*time.Millisecond {
				t.Errorf("a %v gap between the broker's heart-beats at a 1 s interval (gaps %v)", g, gaps)
			}
		}
		t.Logf("broker heart-beat gaps: %v", gaps)
	})

	t.Run("python3-stomp", func(t *testing.T) {
		pythonClient.require(t)
		var out struct {
			HeartBeat         *string  `json:"heart_beat"`
			ServerHeartbeats  int      `json:"server_heartbeats_while_idle"`
			DisconnectedIdle  bool     `json:"disconnected_while_idle"`
			HeartbeatTimeouts int      `json:"heartbeat_timeouts"`
			Received          []string `json:"received"`
			Errors            []any    `json:"errors"`
		}
		pythonClient.run(t, b, "heartbeat", map[string]any{
			"dest": "/queue/hb-as-asked", "heartbeat_ms": 1000, "idle_ms": 3500, "receive_scale": 2.0,
		}, &out)
		if out.HeartBeat == nil || *out.HeartBeat != "1000,1000" {
			t.Errorf("CONNECTED heart-beat = %v, want 1000,1000", ptrString(out.HeartBeat))
		}
		if out.DisconnectedIdle || out.HeartbeatTimeouts != 0 {
			t.Errorf("idle 3.5 s with 1 s heart-beats: disconnected %v, heart-beat timeouts %d", out.DisconnectedIdle, out.HeartbeatTimeouts)
		}
		if out.ServerHeartbeats < 2 {
			t.Errorf("python3-stomp received %d heart-beats in 3.5 s, want at least 2", out.ServerHeartbeats)
		}
		if !slices.Equal([]string{"after-idle"}, out.Received) || len(out.Errors) != 0 {
			t.Errorf("after idling: received %q, errors %v", out.Received, out.Errors)
		}
	})
}
