package cluster

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// replyOnly is a delivered message as Acks reads it: only its ack subject.
type replyOnly struct {
	jetstream.Msg
	reply string
}

func (m replyOnly) Reply() string { return m.reply }

// An ack whose answer does not come (a consumer leader that stepped down dropped it with
// the acks it had queued) is sent again after ackResend by the node itself, with no Sync
// waiting for it, and is answered by the next leader: its message does not come back after
// the ack wait as a duplicate.
func TestUnansweredAckIsResentWithoutSync(t *testing.T) {
	s, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: -1, NoLog: true, NoSigs: true})
	if err != nil {
		t.Fatal(err)
	}
	go s.Start()
	t.Cleanup(s.Shutdown)
	if !s.ReadyForConnections(10 * time.Second) {
		t.Fatal("nats server not ready")
	}
	nc, err := nats.Connect(s.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	// The "consumer leader": drops the first ack it hears, answers every later one.
	var heard atomic.Int32
	if _, err := nc.Subscribe("$JS.ACK.Q.c.>", func(m *nats.Msg) {
		if heard.Add(1) > 1 {
			_ = m.Respond(nil)
		}
	}); err != nil {
		t.Fatal(err)
	}
	life, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	a := newAcks(nc, life)
	start := time.Now()
	if err := a.Ack(replyOnly{reply: "$JS.ACK.Q.c.1.7.7.0.0"}); err != nil {
		t.Fatal(err)
	}
	answered := func() bool {
		a.mu.Lock()
		defer a.mu.Unlock()
		return a.base > a.next
	}
	deadline := time.Now().Add(3 * ackResend)
	for !answered() && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if !answered() {
		t.Fatalf("the ack is unanswered %v after it was sent (heard %d times); want it resent after %v and answered", time.Since(start), heard.Load(), ackResend)
	}
	if n := heard.Load(); n != 2 {
		t.Fatalf("the ack was heard %d times, want 2 (sent, then resent once)", n)
	}
	if took := time.Since(start); took < ackResend {
		t.Fatalf("the ack was resent after %v, before ackResend (%v)", took, ackResend)
	}
}
