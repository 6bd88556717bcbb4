package session

import (
	"testing"
	"time"

	"github.com/titan-broker/titan/internal/flow"
	"github.com/titan-broker/titan/internal/frame"
)

// A frame trickled one byte at a time, each byte well within any read timeout, is closed
// with ERROR "frame timeout" and CloseFrameTimeout once FrameTimeout has passed since its
// first byte; frames sent whole before it are unaffected.
func TestFrameTimeoutClosesATrickledFrame(t *testing.T) {
	o := DefaultOptions()
	o.FrameTimeout = 300 * time.Millisecond
	c, p, link, _ := serve(t, o)
	_, _ = c.Write([]byte("CONNECT\naccept-version:1.2\n\n\x00"))
	if f := read(t, c, p); f.Command != frame.CmdConnected {
		t.Fatalf("%s", f)
	}
	_, _ = c.Write([]byte("SEND\ndestination:/queue/a\nreceipt:r1\n\n\x00"))
	if f := read(t, c, p); f.Command != frame.CmdReceipt {
		t.Fatalf("%s", f)
	}
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		for _, b := range []byte("SEND\ndestination:/queue/a\n\n" + string(make([]byte, 1000))) {
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
			if _, err := c.Write([]byte{b}); err != nil {
				return
			}
		}
	}()
	f := read(t, c, p)
	if f.Command != frame.CmdError || f.Value("message") != ReasonFrameTimeout {
		t.Fatalf("want ERROR message:%s, got %s", ReasonFrameTimeout, f)
	}
	select {
	case r := <-link.closed:
		if r != CloseFrameTimeout {
			t.Fatalf("close reason %s, want frame_timeout", r)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("connection not closed")
	}
}

// Without negotiated heart-beats and without a ConnectionTTL a connection is never closed
// for silence: the read deadline is cleared after CONNECT, and a frame sent afterwards is
// answered.
func TestNoHeartBeatsNoSilenceClose(t *testing.T) {
	o := DefaultOptions()
	o.ConnectTimeout = 100 * time.Millisecond
	c, p, _, _ := serve(t, o)
	_, _ = c.Write([]byte("CONNECT\naccept-version:1.2\nheart-beat:0,0\n\n\x00"))
	if f := read(t, c, p); f.Command != frame.CmdConnected {
		t.Fatalf("%s", f)
	}
	time.Sleep(300 * time.Millisecond) // past the CONNECT deadline, which must be gone
	_, _ = c.Write([]byte("SEND\ndestination:/queue/a\nreceipt:r1\n\n\x00"))
	if f := read(t, c, p); f.Command != frame.CmdReceipt {
		t.Fatalf("%s", f)
	}
}

// Every close with reason slow_consumer is counted in FlowStats, whatever found it (here a
// client-ack subscription's stall), and only once.
func TestSlowConsumerCountedWithTheReason(t *testing.T) {
	o := DefaultOptions()
	o.FlowStats = new(flow.Stats)
	c, p, link, s := serve(t, o)
	_, _ = c.Write([]byte("CONNECT\naccept-version:1.2\n\n\x00"))
	if f := read(t, c, p); f.Command != frame.CmdConnected {
		t.Fatalf("%s", f)
	}
	s.CloseSlowConsumer("stalled")
	s.CloseSlowConsumer("stalled again")
	if f := read(t, c, p); f.Command != frame.CmdError || f.Value("message") != ReasonSlowConsumer {
		t.Fatalf("%s", f)
	}
	if r := <-link.closed; r != CloseSlowConsumer {
		t.Fatalf("reason %s", r)
	}
	if n := o.FlowStats.SlowConsumers.Load(); n != 1 {
		t.Fatalf("slow consumers counted %d, want 1", n)
	}
}
