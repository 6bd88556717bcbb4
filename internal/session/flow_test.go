package session

import (
	"bytes"
	"testing"
	"time"

	"github.com/titan-broker/titan/internal/flow"
	"github.com/titan-broker/titan/internal/frame"
)

func eventFrame(body []byte) (*frame.Buf, []byte) {
	b := frame.GetBuf()
	b.B = append(b.B, "MESSAGE\ndestination:/topic/t\n"...)
	return b, append(append([]byte("\n"), body...), 0, '\n')
}

// A forced events write passes the high watermark (a message larger than it included) and
// congests the connection; the channel closes once the client read it down to the low one.
func TestWriteEventPassesTheLimitAndCongests(t *testing.T) {
	o := DefaultOptions()
	o.MaxOutboundBytes, o.ResumeOutboundBytes = 1024, 512
	c, p, _, s := serve(t, o)
	_, _ = c.Write([]byte("CONNECT\naccept-version:1.2\n\n\x00"))
	read(t, c, p)
	big := bytes.Repeat([]byte("x"), 4096)
	head, tail := eventFrame(big)
	// Forced: a non-forced write over the limit is refused when the CONNECTED frame is still
	// queued, and then the client would have nothing to read (a race the test must not have).
	if ok, _ := s.WriteEvent(head, tail, true); !ok {
		t.Fatal("forced write refused on an open connection")
	}
	if s.QueuedBytes() > o.MaxOutboundBytes && s.Congested() == nil {
		t.Fatal("over the limit but not congested")
	}
	read(t, c, p) // the client reads: congestion ends
	deadline := time.Now().Add(5 * time.Second)
	for s.Congested() != nil {
		if time.Now().After(deadline) {
			t.Fatal("still congested after the client read everything")
		}
		time.Sleep(time.Millisecond)
	}
}

// A client that stays over the high watermark without reading is closed with ERROR
// message:slow consumer; the producers waiting on it are released at once.
func TestSlowConsumerGetsErrorAndIsClosed(t *testing.T) {
	o := DefaultOptions()
	o.MaxOutboundBytes, o.ResumeOutboundBytes = 64<<10, 32<<10
	o.SlowConsumerTimeout = 200 * time.Millisecond
	o.FlowStats = new(flow.Stats)
	c, p, link, s := serve(t, o)
	_, _ = c.Write([]byte("CONNECT\naccept-version:1.2\n\n\x00"))
	read(t, c, p)
	body := bytes.Repeat([]byte("y"), 64<<10)
	// Fill the socket buffers, then the queue: stop once the connection stays congested.
	var congested <-chan struct{}
	for i := 0; ; i++ {
		if i == 4096 {
			t.Fatal("never stayed congested")
		}
		head, tail := eventFrame(body)
		ok, ch := s.WriteEvent(head, tail, true)
		if !ok {
			t.Fatal("forced write refused on an open connection")
		}
		if ch == nil {
			continue
		}
		select {
		case <-ch: // the kernel took it after all
		case <-time.After(20 * time.Millisecond):
			congested = ch
		}
		if congested != nil {
			break
		}
	}
	select {
	case <-congested:
	case <-time.After(10 * time.Second):
		t.Fatal("slow consumer not released its producers")
	}
	if o.FlowStats.SlowConsumers.Load() != 1 {
		t.Fatalf("slow consumers counted %d", o.FlowStats.SlowConsumers.Load())
	}
	// Reading now: MESSAGEs already on the socket, then the ERROR, then the close.
	for {
		_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
		f, err := p.ReadFrame()
		if err != nil {
			t.Fatalf("no ERROR before the close: %v", err)
		}
		if f.Command == frame.CmdError {
			if got := f.Value(frame.HdrMessage); got != ReasonSlowConsumer {
				t.Fatalf("ERROR message %q", got)
			}
			break
		}
	}
	select {
	case r := <-link.closed:
		if r != CloseSlowConsumer {
			t.Fatalf("close reason %v", r)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("connection not closed")
	}
}
