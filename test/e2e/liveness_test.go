package e2e

import (
	"bufio"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Connection liveness and the frame completion deadline (issue 30).

// livenessConfig is a broker with a TCP and a WebSocket STOMP server whose protocol
// deadlines are all short: heart-beats of 300 ms for clients that negotiate them, CONNECT
// within 1 s, a frame within 600 ms of its first byte, TCP keepalive every second. No
// connection-ttl: the default, off.
func livenessConfig() string {
	po := "{heartbeat-x: 300, heartbeat-y: 300, heartbeat-min: 100, connect-timeout: 1000, frame-timeout: 600}"
	return fmt.Sprintf(`titan:
  servers:
    - {name: stomp, host: 127.0.0.1, port: 0, transport-options: {tcp-keepalive: 1000}, protocol-options: %s}
    - {name: ws, host: 127.0.0.1, port: 0, transport: websocket, transport-options: {path: /stomp, tcp-keepalive: 1000}, protocol-options: %s}
  monitor: {host: 127.0.0.1, port: 0}
  store: {type: memory}
  log: {level: debug}
`, po, po)
}

// livenessIdle is how long the idle subscribers stay silent: past every silence bound in
// force in livenessConfig (heart-beat grace 2 × 300 ms, connect-timeout, frame-timeout).
const livenessIdle = 2500

type idleOut struct {
	HeartBeat        *string  `json:"heart_beat"`
	DisconnectedIdle bool     `json:"disconnected_while_idle"`
	Received         []string `json:"received"`
	Errors           []any    `json:"errors"`
}

func checkIdleOut(t *testing.T, out idleOut) {
	t.Helper()
	if out.DisconnectedIdle {
		t.Errorf("the subscriber without heart-beats was disconnected while idle for %d ms", livenessIdle)
	}
	if !slices.Equal([]string{"after-idle"}, out.Received) {
		t.Errorf("after idling the subscriber received %q, want [after-idle]", out.Received)
	}
	if len(out.Errors) != 0 {
		t.Errorf("ERROR frames: %v", out.Errors)
	}
}

// A python3-stomp subscriber with the library's default heart-beats (0,0) — over TCP, at
// every STOMP version, subscribed before or after its idle time — stays connected past every
// silence bound in force and receives a message sent afterwards; so does a stompjs
// subscriber without heart-beats over WebSocket. Before issue 30 such connections were
// closed after connection-ttl (60 s by default) with reason heartbeat_timeout.
func TestIdleSubscriberWithoutHeartbeatsStillReceives(t *testing.T) {
	pythonClient.require(t)
	requireWS(t)
	p := newTitanNode(t, livenessConfig()).start()
	b, wsAddr := p.broker(), p.stompAddrs[1]
	for _, v := range []string{"1.0", "1.1", "1.2"} {
		for _, first := range []bool{true, false} {
			name := fmt.Sprintf("%s/subscribe-first=%v", v, first)
			t.Run("tcp-python3-stomp/"+name, func(t *testing.T) {
				t.Parallel()
				var out idleOut
				pythonClient.run(t, b, "idle_subscriber", map[string]any{
					"dest": "/queue/idle-py-" + strings.ReplaceAll(name, "/", "-"), "version": v,
					"subscribe_first": first, "idle_ms": livenessIdle,
				}, &out)
				checkIdleOut(t, out)
			})
			t.Run("websocket-stompjs/"+name, func(t *testing.T) {
				t.Parallel()
				var out idleOut
				stompjsClient.run(t, b, "ws_idle", map[string]any{
					"url": "ws://" + wsAddr + "/stomp", "dest": "/topic/idle-js-" + strings.ReplaceAll(name, "/", "-"),
					"version": v, "subscribe_first": first, "idle_ms": livenessIdle,
				}, &out)
				checkIdleOut(t, out)
			})
		}
	}
	m := scrapeMetrics(t, b)
	checkEqual(t, 0.0, metricValue(m, `titan_connections_closed_total{reason="heartbeat_timeout"}`), "heart-beat timeouts")
}

// A frame trickled one byte every 100 ms (each byte well within any read timeout) is closed
// at the frame-timeout (600 ms here) with ERROR message:frame timeout, over TCP and
// WebSocket, and counted as titan_connections_closed_total{reason="frame_timeout"}; a
// connection that sends whole frames is unaffected.
func TestTrickledFrameClosedAtFrameTimeout(t *testing.T) {
	p := newTitanNode(t, livenessConfig()).start()
	b, wsAddr := p.broker(), p.stompAddrs[1]
	dial := map[string]func(t *testing.T) *rawConn{
		"tcp":       func(t *testing.T) *rawConn { return dialRaw(t, b) },
		"websocket": func(t *testing.T) *rawConn { return dialWSRaw(t, "ws://"+wsAddr+"/stomp") },
	}
	for _, tr := range []string{"tcp", "websocket"} {
		t.Run(tr, func(t *testing.T) {
			c := dial[tr](t)
			c.connect()
			// A whole frame first: answered.
			requireNoError(t, c.write("SEND\ndestination:/queue/trickle\nreceipt:whole\n\nx\x00"))
			f, err := c.readFrame(5 * time.Second)
			requireNoError(t, err, "the RECEIPT of a whole frame")
			if f.command != "RECEIPT" {
				t.Fatalf("whole frame answered by %s", f)
			}
			stop := make(chan struct{})
			defer close(stop)
			go func() {
				for _, ch := range []byte("SEND\ndestination:/queue/trickle\nreceipt:trickled\n\n" + strings.Repeat("x", 200)) {
					select {
					case <-stop:
						return
					case <-time.After(100 * time.Millisecond):
					}
					if c.write(string(ch)) != nil {
						return
					}
				}
			}()
			start := time.Now()
			f, err = c.readFrame(10 * time.Second)
			requireNoError(t, err, "waiting for the ERROR of the trickled frame")
			if msg, _ := f.get("message"); f.command != "ERROR" || msg != "frame timeout" {
				t.Fatalf("trickled frame answered by %s, want ERROR message:frame timeout", f)
			}
			requireClosed(t, c)
			t.Logf("%s: trickled frame closed %v after its first byte was due", tr, time.Since(start).Round(time.Millisecond))
		})
	}
	m := scrapeMetrics(t, b)
	checkEqual(t, 2.0, metricValue(m, `titan_connections_closed_total{reason="frame_timeout"}`), "frame-timeout closes")
}

// metricValue returns the value of the one series named exactly series (name and labels as
// /metrics prints them), or -1 when it is absent.
func metricValue(text, series string) float64 {
	sc := bufio.NewScanner(strings.NewReader(text))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), series+" "); ok {
			if f, err := strconv.ParseFloat(strings.TrimSpace(v), 64); err == nil {
				return f
			}
		}
	}
	return -1
}
