package e2e

// Issue 16 end to end: client libraries beyond python3-stomp and stompjs against a real
// titan process. PHP's PECL stomp (Debian's php-stomp, run by php-cli) reads the two octets
// after a content-length body and fails the read unless they are NUL and LF (or the NUL is
// the last octet read), so it loses frames from a broker that ends frames with a bare NUL
// and coalesces them into one write; Go's github.com/go-stomp/stomp/v3 (pinned v3.1.3 in
// go.mod) runs in the test process. Both go through: connect, a burst of queued messages to
// an auto-ack subscriber, receipts right after MESSAGEs, a transaction committed and one
// aborted, client-individual ACK/NACK, a binary body, request/response through a temp-queue.

import (
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/go-stomp/stomp/v3"
	gsframe "github.com/go-stomp/stomp/v3/frame"

	stompframe "github.com/titan-broker/titan/internal/frame"
)

// phpErr says why the PECL stomp client cannot run (nil when it can); set by TestMain.
var phpErr error

func checkPHP() error {
	out, err := exec.Command("php", "-r", `echo phpversion("stomp");`).CombinedOutput()
	if err != nil {
		return fmt.Errorf("php cannot run (php-cli): %v: %s", err, strings.TrimSpace(string(out)))
	}
	if strings.TrimSpace(string(out)) == "" {
		return fmt.Errorf("php has no stomp extension (php-stomp)")
	}
	return nil
}

// phpClient drives clients/phpclient.php (PECL stomp). It is not in allClients: its
// scenarios are the interoperability ones of this file.
var phpClient = stompClient{
	name:  "pecl-stomp",
	short: "php",
	cmd: func(scenario, args string) (string, []string) {
		return "php", []string{filepath.Join("clients", "phpclient.php"), scenario, args}
	},
	err: func() error { return phpErr },
}

// phpFrame is one frame a PHP scenario read.
type phpFrame struct {
	Command string            `json:"command"`
	Headers map[string]string `json:"headers"`
	BodyHex string            `json:"body_hex"`
}

func (f phpFrame) body() string {
	b, err := hex.DecodeString(f.BodyHex)
	if err != nil {
		return "<bad hex " + f.BodyHex + ">"
	}
	return string(b)
}

func phpBodies(fs []phpFrame) []string {
	out := make([]string, len(fs))
	for i, f := range fs {
		out[i] = f.body()
	}
	return out
}

// phpReads is what every PHP scenario reports about its reads.
type phpReads struct {
	Messages    []phpFrame       `json:"messages"`
	Other       []phpFrame       `json:"other"`
	FailedReads int              `json:"failed_reads"`
	Errors      []map[string]any `json:"errors"`
}

// checkClean fails the test for any failed read, any ERROR and any frame other than
// MESSAGE and RECEIPT (a frame whose first octet was eaten shows up as "ESSAGE").
func (r phpReads) checkClean(t *testing.T) {
	t.Helper()
	checkEqual(t, 0, r.FailedReads, "failed reads")
	checkEqual(t, 0, len(r.Errors), "ERROR frames: %v", r.Errors)
	for _, f := range r.Other {
		if f.Command != "RECEIPT" {
			t.Errorf("unexpected frame %q %v %q", f.Command, f.Headers, f.body())
		}
	}
}

func checkStrings(t *testing.T, what string, want, got []string) {
	t.Helper()
	if !slices.Equal(want, got) {
		t.Errorf("%s: want %q, got %q", what, want, got)
	}
}

func allTrue(bs []bool) bool {
	for _, b := range bs {
		if !b {
			return false
		}
	}
	return len(bs) > 0
}

func TestPECLStomp(t *testing.T) {
	t.Parallel()
	b := startBroker(t, yamlConfig(""))
	c := phpClient

	t.Run("connect", func(t *testing.T) {
		var out struct {
			Session12 any `json:"session_12"`
			Session10 any `json:"session_10"`
		}
		c.run(t, b, "connect", nil, &out)
		for _, s := range []any{out.Session12, out.Session10} {
			if str, ok := s.(string); !ok || !strings.HasPrefix(str, "titan-") {
				t.Errorf("session %v, want titan-…", s)
			}
		}
	})

	t.Run("burst of queued messages to an auto-ack subscriber", func(t *testing.T) {
		var out struct {
			phpReads
			Sent       []bool `json:"sent"`
			Subscribed bool   `json:"subscribed"`
		}
		const n = 10
		c.run(t, b, "burst", map[string]any{"dest": "/queue/php-burst", "count": n}, &out)
		checkEqual(t, true, allTrue(out.Sent), "every SEND's receipt matched: %v", out.Sent)
		checkEqual(t, true, out.Subscribed, "SUBSCRIBE's receipt matched")
		want := make([]string, n)
		for i := range want {
			want[i] = fmt.Sprintf("burst-%d", i)
		}
		checkStrings(t, "bodies", want, phpBodies(out.Messages))
		for _, m := range out.Messages {
			checkEqual(t, "/queue/php-burst", m.Headers["destination"], "destination")
			checkEqual(t, "burst", m.Headers["subscription"], "subscription")
		}
		out.checkClean(t)
	})

	t.Run("receipts right after MESSAGEs", func(t *testing.T) {
		var out struct {
			phpReads
			Subscribed bool   `json:"subscribed"`
			Receipted  []bool `json:"receipted"`
		}
		c.run(t, b, "receipts", map[string]any{"dest": "/queue/php-receipts", "other_dest": "/queue/php-receipts-other"}, &out)
		checkEqual(t, true, out.Subscribed, "SUBSCRIBE's receipt matched")
		checkEqual(t, true, allTrue(out.Receipted) && len(out.Receipted) == 3, "every receipt matched: %v", out.Receipted)
		var want []string
		for r := range 3 {
			for i := range 4 {
				want = append(want, fmt.Sprintf("r%d-%d", r, i))
			}
		}
		checkStrings(t, "bodies", want, phpBodies(out.Messages))
		out.checkClean(t)
	})

	t.Run("transaction committed and aborted", func(t *testing.T) {
		var out struct {
			phpReads
			Subscribed  bool `json:"subscribed"`
			SentBefore  bool `json:"sent_before"`
			BeginCommit bool `json:"begin_commit"`
			Commit      bool `json:"commit"`
			BeginAbort  bool `json:"begin_abort"`
			Abort       bool `json:"abort"`
			SentAfter   bool `json:"sent_after"`
		}
		c.run(t, b, "transaction", map[string]any{"dest": "/queue/php-tx"}, &out)
		checkEqual(t, true, out.Subscribed && out.SentBefore && out.BeginCommit && out.BeginAbort && out.SentAfter, "receipts matched: %+v", out)
		checkEqual(t, true, out.Commit, "COMMIT with a receipt after a MESSAGE returns true")
		checkEqual(t, true, out.Abort, "ABORT with a receipt returns true")
		checkStrings(t, "bodies", []string{"before", "racing", "committed-1", "committed-2", "after"}, phpBodies(out.Messages))
		out.checkClean(t)
	})

	t.Run("client-individual ACK and NACK", func(t *testing.T) {
		var out struct {
			phpReads
			Subscribed bool       `json:"subscribed"`
			Acks       [][]any    `json:"acks"`
			After      []phpFrame `json:"after"`
		}
		c.run(t, b, "ack", map[string]any{"dest": "/queue/php-ack"}, &out)
		checkEqual(t, true, out.Subscribed, "SUBSCRIBE's receipt matched")
		checkEqual(t, 4, len(out.Acks), "ACK/NACK calls: %v", out.Acks)
		for _, a := range out.Acks {
			if len(a) != 3 || a[2] != true {
				t.Errorf("%v did not return true", a)
			}
		}
		checkStrings(t, "bodies", []string{"ack-0", "ack-1", "ack-2", "ack-1"}, phpBodies(out.Messages))
		if len(out.Messages) == 4 {
			checkEqual(t, "true", out.Messages[3].Headers["redelivered"], "the NACKed message is redelivered")
		}
		for _, m := range out.Messages {
			if m.Headers["ack"] == "" {
				t.Errorf("MESSAGE %q has no ack header", m.body())
			}
		}
		checkStrings(t, "after every ACK only the marker is left", []string{"marker"}, phpBodies(out.After))
		out.checkClean(t)
	})

	t.Run("binary body", func(t *testing.T) {
		var out struct {
			phpReads
			Sent    bool   `json:"sent"`
			SentHex string `json:"sent_hex"`
		}
		c.run(t, b, "binary", map[string]any{"dest": "/queue/php-binary"}, &out)
		checkEqual(t, true, out.Sent, "SEND's receipt matched")
		checkEqual(t, 1, len(out.Messages), "messages")
		if len(out.Messages) == 1 {
			checkEqual(t, out.SentHex, out.Messages[0].BodyHex, "body byte-exact")
			checkEqual(t, "512", out.Messages[0].Headers["content-length"], "content-length")
		}
		out.checkClean(t)
	})

	t.Run("ERROR body reaches the application", func(t *testing.T) {
		var out struct {
			Errors []struct {
				Message string `json:"message"`
				Details string `json:"details"`
			} `json:"errors"`
		}
		c.run(t, b, "error", map[string]any{"dest": "/queue/php-error"}, &out)
		requireEqual(t, 1, len(out.Errors), "StompExceptions")
		checkEqual(t, "undefined escape sequence", out.Errors[0].Message, "message header")
		if d := out.Errors[0].Details; !strings.Contains(d, `the value of header "note" has "\\t"`) {
			t.Errorf("details %q do not say what was wrong", d)
		}
	})

	t.Run("request/response through a temp-queue", func(t *testing.T) {
		var out struct {
			FailedReads         int              `json:"failed_reads"`
			Errors              []map[string]any `json:"errors"`
			ResponderSubscribed bool             `json:"responder_subscribed"`
			RequesterSubscribed bool             `json:"requester_subscribed"`
			Requested           []bool           `json:"requested"`
			Answered            []bool           `json:"answered"`
			Requests            []phpFrame       `json:"requests"`
			Responses           []phpFrame       `json:"responses"`
		}
		c.run(t, b, "rpc", map[string]any{"channel": "/query/php-rpc"}, &out)
		checkEqual(t, true, out.ResponderSubscribed && out.RequesterSubscribed, "SUBSCRIBE receipts matched")
		checkEqual(t, true, allTrue(out.Requested) && allTrue(out.Answered), "request %v and response %v receipts matched", out.Requested, out.Answered)
		for _, r := range out.Requests {
			if !strings.HasPrefix(r.Headers["reply-to"], "/temp-queue/titan-") {
				t.Errorf("request reply-to %q, want the owner-qualified /temp-queue/<session>/replies", r.Headers["reply-to"])
			}
		}
		got := map[string]string{}
		for _, r := range out.Responses {
			got[r.Headers["correlation-id"]] = r.body()
		}
		for i := range 3 {
			corr := fmt.Sprintf("corr-%d", i)
			checkEqual(t, fmt.Sprintf("answer:question-%d", i), got[corr], "response to %s", corr)
		}
		checkEqual(t, 0, out.FailedReads, "failed reads")
		checkEqual(t, 0, len(out.Errors), "ERROR frames: %v", out.Errors)
	})
}

// ---------------------------------------------------------------- go-stomp

// goStompTimeout bounds every wait of the go-stomp tests.
const goStompTimeout = scenarioWait * time.Second

// dialGoStomp connects go-stomp to b at version v; cleanup disconnects it.
func dialGoStomp(t *testing.T, b *broker, v stomp.Version) *stomp.Conn {
	t.Helper()
	c, err := stomp.Dial("tcp", b.stompAddr,
		stomp.ConnOpt.AcceptVersion(v), stomp.ConnOpt.Host("/"),
		stomp.ConnOpt.RcvReceiptTimeout(goStompTimeout))
	requireNoError(t, err, "go-stomp dial")
	t.Cleanup(func() { _ = c.MustDisconnect() })
	return c
}

func subscribeGoStomp(t *testing.T, c *stomp.Conn, dest string, ack stomp.AckMode) *stomp.Subscription {
	t.Helper()
	sub, err := c.Subscribe(dest, ack)
	requireNoError(t, err, "go-stomp SUBSCRIBE %s", dest)
	// go-stomp's SUBSCRIBE waits for no RECEIPT: a receipted SEND on the same connection
	// proves it was handled (a connection's frames are handled in order) before another
	// connection sends to dest (a request sent first is answered "no responder").
	sendGoStomp(t, c, "/queue/go-subscribe-barrier", "barrier")
	return sub
}

// recvGoStomp returns the next MESSAGE of sub, failing the test after goStompTimeout or on an
// ERROR.
func recvGoStomp(t *testing.T, sub *stomp.Subscription, what string) *stomp.Message {
	t.Helper()
	select {
	case m, ok := <-sub.C:
		if !ok {
			t.Fatalf("%s: subscription %s closed", what, sub.Destination())
		}
		requireNoError(t, m.Err, what)
		return m
	case <-time.After(goStompTimeout):
		t.Fatalf("%s: no MESSAGE on %s within %v", what, sub.Destination(), goStompTimeout)
	}
	return nil
}

// recvBodies reads n MESSAGEs of sub and returns their bodies.
func recvBodies(t *testing.T, sub *stomp.Subscription, n int) []string {
	t.Helper()
	var out []string
	for i := range n {
		out = append(out, string(recvGoStomp(t, sub, fmt.Sprintf("message %d of %d", i+1, n)).Body))
	}
	return out
}

func sendGoStomp(t *testing.T, c *stomp.Conn, dest, body string, opts ...func(*gsframe.Frame) error) {
	t.Helper()
	opts = append(opts, stomp.SendOpt.Receipt)
	requireNoError(t, c.Send(dest, "text/plain", []byte(body), opts...), "go-stomp SEND %s with a receipt", dest)
}

func TestGoStomp(t *testing.T) {
	t.Parallel()
	b := startBroker(t, yamlConfig(""))

	t.Run("connect", func(t *testing.T) {
		for _, v := range []stomp.Version{stomp.V12, stomp.V11, stomp.V10} {
			c := dialGoStomp(t, b, v)
			checkEqual(t, v, c.Version(), "negotiated version")
			checkEqual(t, true, strings.HasPrefix(c.Session(), "titan-"), "session %q", c.Session())
			checkEqual(t, true, strings.HasPrefix(c.Server(), "Titan/"), "server %q", c.Server())
		}
	})

	t.Run("burst of queued messages to an auto-ack subscriber", func(t *testing.T) {
		const dest, n = "/queue/go-burst", 10
		p := dialGoStomp(t, b, stomp.V12)
		var want []string
		for i := range n {
			want = append(want, fmt.Sprintf("burst-%d", i))
			sendGoStomp(t, p, dest, want[i])
		}
		c := dialGoStomp(t, b, stomp.V12)
		sub := subscribeGoStomp(t, c, dest, stomp.AckAuto)
		checkStrings(t, "bodies", want, recvBodies(t, sub, n))
	})

	t.Run("receipts right after MESSAGEs", func(t *testing.T) {
		const dest = "/queue/go-receipts"
		c := dialGoStomp(t, b, stomp.V12)
		sub := subscribeGoStomp(t, c, dest, stomp.AckAuto)
		p := dialGoStomp(t, b, stomp.V12)
		var want []string
		for r := range 3 {
			for i := range 4 {
				want = append(want, fmt.Sprintf("r%d-%d", r, i))
				sendGoStomp(t, p, dest, want[len(want)-1])
			}
			// Four MESSAGEs are on their way to c; its RECEIPT comes right after them.
			sendGoStomp(t, c, "/queue/go-receipts-other", "x")
		}
		checkStrings(t, "bodies", want, recvBodies(t, sub, len(want)))
	})

	t.Run("transaction committed and aborted", func(t *testing.T) {
		const dest = "/queue/go-tx"
		c := dialGoStomp(t, b, stomp.V12)
		sub := subscribeGoStomp(t, c, dest, stomp.AckAuto)
		sendGoStomp(t, c, dest, "before")
		checkStrings(t, "first", []string{"before"}, recvBodies(t, sub, 1))
		sendGoStomp(t, c, dest, "racing") // a MESSAGE queued to us before the COMMIT's RECEIPT
		tx, err := c.BeginWithError()
		requireNoError(t, err, "BEGIN")
		requireNoError(t, tx.Send(dest, "text/plain", []byte("committed-1")), "transactional SEND")
		requireNoError(t, tx.Send(dest, "text/plain", []byte("committed-2")), "transactional SEND")
		requireNoError(t, tx.CommitWithReceipt(), "COMMIT with a receipt")
		tx, err = c.BeginWithError()
		requireNoError(t, err, "BEGIN")
		requireNoError(t, tx.Send(dest, "text/plain", []byte("aborted")), "transactional SEND")
		requireNoError(t, tx.AbortWithReceipt(), "ABORT with a receipt")
		sendGoStomp(t, c, dest, "after")
		checkStrings(t, "bodies", []string{"racing", "committed-1", "committed-2", "after"}, recvBodies(t, sub, 4))
	})

	t.Run("client-individual ACK and NACK", func(t *testing.T) {
		const dest = "/queue/go-ack"
		p := dialGoStomp(t, b, stomp.V12)
		for i := range 3 {
			sendGoStomp(t, p, dest, fmt.Sprintf("ack-%d", i))
		}
		c, err := stomp.Dial("tcp", b.stompAddr, stomp.ConnOpt.AcceptVersion(stomp.V12), stomp.ConnOpt.Host("/"),
			stomp.ConnOpt.RcvReceiptTimeout(goStompTimeout))
		requireNoError(t, err, "go-stomp dial")
		sub := subscribeGoStomp(t, c, dest, stomp.AckClientIndividual)
		var got []string
		for i := range 3 {
			m := recvGoStomp(t, sub, fmt.Sprintf("message %d", i))
			got = append(got, string(m.Body))
			checkEqual(t, true, m.Header.Get("ack") != "", "MESSAGE %q has an ack header", m.Body)
			if string(m.Body) == "ack-1" {
				requireNoError(t, c.Nack(m), "NACK")
			} else {
				requireNoError(t, c.Ack(m), "ACK")
			}
		}
		checkStrings(t, "first deliveries", []string{"ack-0", "ack-1", "ack-2"}, got)
		m := recvGoStomp(t, sub, "the NACKed message again")
		checkEqual(t, "ack-1", string(m.Body), "redelivered body")
		checkEqual(t, "true", m.Header.Get("redelivered"), "redelivered header")
		requireNoError(t, c.Ack(m), "ACK")
		requireNoError(t, c.Disconnect(), "DISCONNECT (waits for its RECEIPT, after the ACKs)")
		sendGoStomp(t, p, dest, "marker")
		d := dialGoStomp(t, b, stomp.V12)
		checkStrings(t, "after every ACK only the marker is left", []string{"marker"}, recvBodies(t, subscribeGoStomp(t, d, dest, stomp.AckAuto), 1))
	})

	t.Run("binary body", func(t *testing.T) {
		const dest = "/queue/go-binary"
		body := make([]byte, 512)
		for i := range body {
			body[i] = byte(i)
		}
		c := dialGoStomp(t, b, stomp.V12)
		sub := subscribeGoStomp(t, c, dest, stomp.AckAuto)
		requireNoError(t, c.Send(dest, "application/octet-stream", body, stomp.SendOpt.Receipt), "SEND")
		m := recvGoStomp(t, sub, "the binary message")
		checkEqual(t, hex.EncodeToString(body), hex.EncodeToString(m.Body), "body byte-exact")
		checkEqual(t, "512", m.Header.Get("content-length"), "content-length")
		checkEqual(t, "application/octet-stream", m.ContentType, "content-type")
	})

	t.Run("ERROR body reaches the application", func(t *testing.T) {
		c := dialGoStomp(t, b, stomp.V12)
		err := c.Send("/command/go-error", "text/plain", []byte("no reply-to"), stomp.SendOpt.Receipt)
		var se stomp.Error
		if !errors.As(err, &se) || se.Frame == nil {
			t.Fatalf("SEND without reply-to to a command channel: got %v, want a stomp.Error with the ERROR frame", err)
		}
		checkEqual(t, "missing reply-to header", se.Frame.Header.Get("message"), "message header")
		checkEqual(t, true, strings.Contains(string(se.Frame.Body), "reply-to"), "body %q says what was wrong", se.Frame.Body)
	})

	t.Run("request/response through a temp-queue", func(t *testing.T) {
		const channel = "/query/go-rpc"
		r := dialGoStomp(t, b, stomp.V12)
		requests := subscribeGoStomp(t, r, channel, stomp.AckAuto)
		q := dialGoStomp(t, b, stomp.V12)
		replies := subscribeGoStomp(t, q, "/temp-queue/replies", stomp.AckAuto)
		for i := range 3 {
			sendGoStomp(t, q, channel, fmt.Sprintf("question-%d", i),
				stomp.SendOpt.Header("reply-to", "/temp-queue/replies"),
				stomp.SendOpt.Header("correlation-id", fmt.Sprintf("corr-%d", i)),
				stomp.SendOpt.Header("timeout", "10000"))
		}
		for i := range 3 {
			m := recvGoStomp(t, requests, fmt.Sprintf("request %d", i))
			replyTo := m.Header.Get("reply-to")
			checkEqual(t, true, strings.HasPrefix(replyTo, "/temp-queue/"+q.Session()+"/"), "reply-to %q names the requester's session", replyTo)
			sendGoStomp(t, r, replyTo, "answer:"+string(m.Body), stomp.SendOpt.Header("correlation-id", m.Header.Get("correlation-id")))
		}
		got := map[string]string{}
		for i := range 3 {
			m := recvGoStomp(t, replies, fmt.Sprintf("response %d", i))
			got[m.Header.Get("correlation-id")] = string(m.Body)
		}
		for i := range 3 {
			corr := fmt.Sprintf("corr-%d", i)
			checkEqual(t, fmt.Sprintf("answer:question-%d", i), got[corr], "response to %s", corr)
		}
	})
}

// ---------------------------------------------------------------- WebSocket framing

// TestWebSocketMessagesCarryWholeFramesEndingNULLF reads titan's WebSocket output raw: every
// WebSocket message holds whole frames (CONNECTED, RECEIPTs, MESSAGEs), each ending with
// NUL LF, which stompjs (see the WebSocket tests) takes as a frame end plus a heart-beat EOL.
func TestWebSocketMessagesCarryWholeFramesEndingNULLF(t *testing.T) {
	t.Parallel()
	n := newTitanNode(t, wsConfig(t))
	p := n.start()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ws, _, err := websocket.Dial(ctx, wsURL(p), &websocket.DialOptions{Subprotocols: []string{"v12.stomp"}})
	requireNoError(t, err, "WebSocket dial")
	defer ws.CloseNow()
	send := func(s string) {
		t.Helper()
		requireNoError(t, ws.Write(ctx, websocket.MessageText, []byte(s)), "WebSocket write")
	}
	send("CONNECT\naccept-version:1.2\nhost:/\n\n\x00")
	send("SUBSCRIBE\nid:0\ndestination:/queue/ws-framing\nreceipt:sub\n\n\x00")
	for i := range 3 {
		send(fmt.Sprintf("SEND\ndestination:/queue/ws-framing\nreceipt:s%d\n\nbody-%d\x00", i, i))
	}
	counts := map[string]int{}
	for counts["MESSAGE"] < 3 || counts["RECEIPT"] < 4 {
		typ, msg, err := ws.Read(ctx)
		requireNoError(t, err, "WebSocket read (so far %v)", counts)
		checkEqual(t, websocket.MessageBinary, typ, "message type")
		if !strings.HasSuffix(string(msg), stompframe.Terminator) {
			t.Fatalf("WebSocket message %q does not end with NUL LF", msg)
		}
		fp := stompframe.NewParser(bytes.NewReader(msg), stompframe.Limits{})
		for {
			f, err := fp.ReadFrame()
			if err == io.EOF {
				break
			}
			requireNoError(t, err, "WebSocket message %q is not whole frames", msg)
			counts[f.Command.String()]++
		}
	}
	checkEqual(t, 1, counts["CONNECTED"], "CONNECTED frames")
}
