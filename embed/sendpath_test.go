package embed_test

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/titan-broker/titan/embed"
	"github.com/titan-broker/titan/internal/brokertest"
	"github.com/titan-broker/titan/internal/frame"
)

// One SEND path (issue 10): a custom stage registered through embed runs for a STOMP SEND,
// HTTP POST /publish and embed.Publish alike, and its rejection reaches each caller with
// the same reason; nothing rejected is delivered, and what it lets through is.
func TestCustomStageRejectsOnEveryWayIn(t *testing.T) {
	const reason = "x-forbidden is not allowed"
	var seen atomic.Int64
	b := start(t, embed.Config{
		Stages: []embed.Stage{embed.StageFunc(func(s *embed.Send) {
			seen.Add(1)
			if _, ok := s.Header("x-forbidden"); ok {
				s.Reject(reason)
			}
		})},
	})
	sub := brokertest.Connect(t, b.Addr())
	sub.SendFrame("SUBSCRIBE", "", "destination:/queue/guarded", "id:1", "receipt:r")
	sub.Expect(frame.CmdReceipt)

	// STOMP SEND: ERROR with the stage's reason (and the receipt-id), then the close.
	c := brokertest.Connect(t, b.Addr())
	c.SendFrame("SEND", "stomp", "destination:/queue/guarded", "x-forbidden:1", "receipt:s")
	c.Expect(frame.CmdError, "message:"+reason, "receipt-id:s")
	c.ExpectClosed(5 * time.Second)

	// HTTP POST /publish: 403, code "rejected", the stage's reason.
	body := `{"destination":"/queue/guarded","headers":{"x-forbidden":"1"},"body":"http"}`
	hc := &http.Client{}
	defer hc.CloseIdleConnections()
	resp, err := hc.Post(b.MonitorURL()+"/publish", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var e struct{ Error, Code string }
	if err := json.Unmarshal(raw, &e); err != nil {
		t.Fatalf("body %s: %v", raw, err)
	}
	if resp.StatusCode != http.StatusForbidden || e.Code != "rejected" || !strings.Contains(e.Error, reason) {
		t.Fatalf("POST /publish: %d %s", resp.StatusCode, raw)
	}

	// embed.Publish: an error that is embed.ErrRejected and says the reason.
	_, err = b.Publish(embed.Message{Destination: "/queue/guarded", Headers: map[string]string{"x-forbidden": "1"}, Body: []byte("native")})
	if !errors.Is(err, embed.ErrRejected) || !strings.Contains(err.Error(), reason) {
		t.Fatalf("embed.Publish: %v", err)
	}

	if n := seen.Load(); n != 3 {
		t.Fatalf("the stage ran %d times for three publications", n)
	}
	// Nothing rejected was delivered; an allowed message on each way in is.
	resp, err = hc.Post(b.MonitorURL()+"/publish", "application/json", strings.NewReader(`{"destination":"/queue/guarded","body":"ok-http"}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if _, err := b.Publish(embed.Message{Destination: "/queue/guarded", Body: []byte("ok-native")}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"ok-http", "ok-native"} {
		if m := sub.Expect(frame.CmdMessage); string(m.Body) != want {
			t.Fatalf("delivered %q, want %q", m.Body, want)
		}
	}
}
