package e2e

import (
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// WebSocket transport: a second STOMP server with transport: websocket, driven by
// @stomp/stompjs over a real WebSocket (npm's ws), talking across transports with
// python3-stomp over TCP.

// wsConfig is a broker with a TCP STOMP server, then a WebSocket one at path /stomp.
func wsConfig(t *testing.T) string {
	return pebbleConfig(t.TempDir(),
		"    - {name: ws, protocol: stomp, host: 127.0.0.1, port: 0, transport: websocket, transport-options: {path: /stomp}}\n")
}

// requireWS fails the test when stompjs or npm's ws is not installed.
func requireWS(t *testing.T) {
	t.Helper()
	stompjsClient.require(t)
	if _, err := os.Stat(filepath.Join("clients", "node_modules", "ws", "package.json")); err != nil {
		t.Fatalf("npm's ws is not installed in test/e2e/clients/node_modules (%v); %s", err, installHint)
	}
}

// wsBinaryBodies are bodies with NUL bytes (and every other byte value) that must cross the
// WebSocket and TCP transports byte-exact.
func wsBinaryBodies() []string {
	all := make([]byte, 256)
	for i := range all {
		all[i] = byte(i)
	}
	return []string{
		hex.EncodeToString(all),
		hex.EncodeToString([]byte("\x00\x00nul\x00inside\x00\n\r\nEND\x00")),
	}
}

type wsMessage struct {
	BodyHex       string  `json:"body_hex"`
	Destination   *string `json:"destination"`
	ContentLength *string `json:"content_length"`
}

type wsResult struct {
	Protocol string      `json:"protocol"`
	Version  *string     `json:"version"`
	Messages []wsMessage `json:"messages"`
	Sent     bool        `json:"sent"`
}

// wsFrameModes: stompjs by default sends a frame as a text WebSocket message (a binary one
// when its body is binary); with forceBinaryWSFrames every frame is a binary message. A
// STOMP-over-WebSocket server must take both.
var wsFrameModes = []struct {
	name        string
	forceBinary bool
}{{"text-frames", false}, {"binary-frames", true}}

// forEachWSFrameMode runs fn as one subtest per frame mode, one after the other.
func forEachWSFrameMode(t *testing.T, fn func(t *testing.T, forceBinary bool)) {
	t.Helper()
	for _, m := range wsFrameModes {
		t.Run(m.name, func(t *testing.T) { fn(t, m.forceBinary) })
	}
}

func wsURL(p *titanProc) string {
	return fmt.Sprintf("ws://%s/stomp", p.stompAddrs[1])
}

func hexOf(s ...string) []string {
	out := make([]string, len(s))
	for i, b := range s {
		out[i] = hex.EncodeToString([]byte(b))
	}
	return out
}

// The ready line lists both STOMP servers in config order: the TCP one first, the
// WebSocket one second, and each speaks its transport.
func TestWebSocketReadyLineListsServersInConfigOrder(t *testing.T) {
	t.Parallel()
	requireWS(t)
	pythonClient.require(t)
	node := newTitanNode(t, wsConfig(t))
	p := node.start()
	requireEqual(t, 2, len(p.stompAddrs), "STOMP addresses in the ready line (%q)", p.stompAddrs)

	// The first is the TCP server: python3-stomp connects to it.
	var conn struct {
		Version string `json:"version"`
	}
	pythonClient.run(t, p.broker(), "connect", nil, &conn)
	checkEqual(t, "1.2", conn.Version, "STOMP version over TCP on the first address")

	// The second is the WebSocket server: stompjs over ws connects to it.
	forEachWSFrameMode(t, func(t *testing.T, forceBinary bool) {
		var echo wsResult
		runScenario(t, stompjsClient, "ws_echo", map[string]any{
			"url": wsURL(p), "dest": "/topic/ws-order", "bodies": []string{"hello over websocket"},
			"force_binary": forceBinary,
		}, &echo)
		checkEqual(t, "v12.stomp", echo.Protocol, "negotiated WebSocket subprotocol")
		checkEqual(t, "1.2", ptrString(echo.Version), "STOMP version over WebSocket")
		requireEqual(t, 1, len(echo.Messages), "echoed messages")
		checkEqual(t, hex.EncodeToString([]byte("hello over websocket")), echo.Messages[0].BodyHex, "echoed body")
	})
	node.stop()
}

// A python3-stomp client publishes over TCP to /topic/x and a stompjs client subscribed over
// WebSocket receives every message, binary bodies with NUL bytes byte-exact.
func TestWebSocketReceivesFromTCP(t *testing.T) {
	t.Parallel()
	requireWS(t)
	pythonClient.require(t)
	node := newTitanNode(t, wsConfig(t))
	p := node.start()
	text := []string{"tcp-to-ws-1", "tcp-to-ws-2 ünïcødé"}
	bins := wsBinaryBodies()
	want := append(hexOf(text...), bins...)

	forEachWSFrameMode(t, func(t *testing.T, forceBinary bool) {
		recv := startScenario(t, stompjsClient, "ws_receive", map[string]any{
			"url": wsURL(p), "dest": "/topic/x", "count": len(want), "force_binary": forceBinary,
		})
		recv.waitReady(t)
		var sent sentBodies
		runScenario(t, pythonClient, "send_bodies", map[string]any{"port": p.stompPorts[0], "dest": "/topic/x", "bodies": text}, &sent)
		runScenario(t, pythonClient, "send_bodies", map[string]any{"port": p.stompPorts[0], "dest": "/topic/x", "bodies_hex": bins}, &sent)
		var got wsResult
		recv.result(t, &got)

		checkEqual(t, "v12.stomp", got.Protocol, "negotiated WebSocket subprotocol")
		requireEqual(t, len(want), len(got.Messages), "messages received over WebSocket")
		for i, m := range got.Messages {
			checkEqual(t, want[i], m.BodyHex, "message %d body (hex)", i)
			checkEqual(t, "/topic/x", ptrString(m.Destination), "message %d destination", i)
			checkEqual(t, fmt.Sprint(len(want[i])/2), ptrString(m.ContentLength), "message %d content-length", i)
		}
	})
	node.stop()
}

// A stompjs client publishes over WebSocket (text, then binaryBody Uint8Arrays with NUL
// bytes) and a python3-stomp client subscribed over TCP receives every body byte-exact.
func TestWebSocketSendsToTCP(t *testing.T) {
	t.Parallel()
	requireWS(t)
	pythonClient.require(t)
	node := newTitanNode(t, wsConfig(t))
	p := node.start()
	text := []string{"ws-to-tcp-1", "ws-to-tcp-2 ünïcødé"}
	bins := wsBinaryBodies()
	want := append(hexOf(text...), bins...)

	forEachWSFrameMode(t, func(t *testing.T, forceBinary bool) {
		recv := startScenario(t, pythonClient, "collect", map[string]any{
			"port": p.stompPorts[0], "dest": "/topic/x", "count": len(want), "binary": true,
		})
		recv.waitReady(t)
		var sent wsResult
		runScenario(t, stompjsClient, "ws_send", map[string]any{
			"url": wsURL(p), "dest": "/topic/x", "bodies": text, "bodies_hex": bins,
			"force_binary": forceBinary,
		}, &sent)
		requireEqual(t, true, sent.Sent, "stompjs sent everything (the receiver is stopped)")
		checkEqual(t, "v12.stomp", sent.Protocol, "negotiated WebSocket subprotocol")
		var got collected
		recv.result(t, &got)

		requireEqual(t, len(want), len(got.Messages), "messages received over TCP (%v)", shortBodies(got.bodies()))
		for i, m := range got.Messages {
			checkEqual(t, want[i], m.Body, "message %d body (hex)", i)
			checkEqual(t, "/topic/x", ptrString(m.Destination), "message %d destination", i)
		}
	})
	node.stop()
}

// A stompjs client over WebSocket sends to a queue it subscribes to: text and binary bodies
// come back intact.
func TestWebSocketRoundTripBinary(t *testing.T) {
	t.Parallel()
	requireWS(t)
	node := newTitanNode(t, wsConfig(t))
	p := node.start()
	bins := wsBinaryBodies()
	forEachWSFrameMode(t, func(t *testing.T, forceBinary bool) {
		var got wsResult
		runScenario(t, stompjsClient, "ws_echo", map[string]any{
			"url": wsURL(p), "dest": "/queue/ws-echo", "bodies": []string{"text body"}, "bodies_hex": bins,
			"force_binary": forceBinary,
		}, &got)
		want := append(hexOf("text body"), bins...)
		requireEqual(t, len(want), len(got.Messages), "echoed messages")
		for i, m := range got.Messages {
			checkEqual(t, want[i], m.BodyHex, "message %d body (hex)", i)
		}
	})
	node.stop()
}

func shortBodies(bs []string) string {
	out := make([]string, len(bs))
	for i, b := range bs {
		out[i] = truncate(b, 40)
	}
	return strings.Join(out, " ")
}
