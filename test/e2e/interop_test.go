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
	"encoding/hex"
	"fmt"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
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
