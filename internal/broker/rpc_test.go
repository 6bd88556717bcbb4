package broker_test

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/titan-broker/titan/internal/brokertest"
	"github.com/titan-broker/titan/internal/frame"
)

func TestCommandRoundTripOverTempQueue(t *testing.T) {
	brokertest.ForEachSetup(t, func(t *testing.T, s brokertest.Setup) {
		addr := s.Start(t)
		resp := s.Connect(t, addr)
		resp.SendFrame("SUBSCRIBE", "", "destination:/command/orders/cancel", "id:r", "receipt:r")
		resp.Expect(frame.CmdReceipt)
		req := s.Connect(t, addr)
		req.SendFrame("SUBSCRIBE", "", "destination:/temp-queue/replies", "id:replies", "receipt:s")
		req.Expect(frame.CmdReceipt)
		req.SendFrame("SEND", `{"id":1}`, "destination:/command/orders/cancel", "reply-to:/temp-queue/replies", "receipt:q")
		rc := req.Expect(frame.CmdReceipt, "receipt-id:q")
		corr := rc.Value("correlation-id")
		if corr == "" {
			t.Fatal("RECEIPT lacks the generated correlation-id")
		}
		m := resp.Expect(frame.CmdMessage, "destination:/command/orders/cancel", "correlation-id:"+corr)
		replyTo := m.Value("reply-to")
		if !strings.HasPrefix(replyTo, "/temp-queue/titan-") || !strings.HasSuffix(replyTo, "/replies") {
			t.Fatalf("reply-to not qualified by its owner: %q", replyTo)
		}
		resp.SendFrame("SEND", "", "destination:"+replyTo, "correlation-id:"+corr, "executed:true", "receipt:a")
		resp.Expect(frame.CmdReceipt)
		// The reply arrives on the destination the requester subscribed to and named (issue 26).
		req.Expect(frame.CmdMessage, "subscription:replies", "destination:/temp-queue/replies", "correlation-id:"+corr, "executed:true")
		// A second response to the same correlation id answers nothing and is dropped.
		resp.SendFrame("SEND", "", "destination:"+replyTo, "correlation-id:"+corr, "executed:true", "receipt:b")
		resp.Expect(frame.CmdReceipt)
		req.ExpectQuiet() // the dropped response was routed before "b"'s RECEIPT
		// Another connection cannot consume the requester's temp-queue.
		thief := s.Connect(t, addr)
		thief.SendFrame("SUBSCRIBE", "", "destination:"+replyTo, "id:x", "receipt:t")
		thief.Expect(frame.CmdError, "message:access refused", "receipt-id:t")
	})
}

func TestRequestsLoadBalanceAcrossResponders(t *testing.T) {
	addr := start(t)
	var rs []*brokertest.Client
	for i := range 3 {
		c := brokertest.Connect(t, addr)
		c.SendFrame("SUBSCRIBE", "", "destination:/query/prices", "id:r"+strconv.Itoa(i), "receipt:r")
		c.Expect(frame.CmdReceipt)
		rs = append(rs, c)
	}
	req := brokertest.Connect(t, addr)
	req.SendFrame("SUBSCRIBE", "", "destination:/queue/my-replies", "id:rep", "receipt:s")
	req.Expect(frame.CmdReceipt)
	for i := range 6 {
		req.SendFrame("SEND", "q", "destination:/query/prices", "reply-to:/queue/my-replies", "correlation-id:c"+strconv.Itoa(i))
	}
	for i, c := range rs {
		for range 2 { // round-robin: exactly two each
			m := c.Expect(frame.CmdMessage)
			c.SendFrame("SEND", "price-"+strconv.Itoa(i), "destination:"+m.Value("reply-to"), "correlation-id:"+m.Value("correlation-id"), "content-type:text/plain")
		}
	}
	for _, c := range rs { // all six requests are delivered: no responder has a third
		c.ExpectQuiet()
	}
	got := map[string]bool{}
	for range 6 {
		m := req.Expect(frame.CmdMessage, "content-type:text/plain")
		got[m.Value("correlation-id")] = true
	}
	if len(got) != 6 {
		t.Fatalf("responses for %v", got)
	}
}

func TestRequestWithoutResponderOrAfterTimeout(t *testing.T) {
	b := brokertest.Run(t, brokertest.DefaultTestConfig())
	addr := b.Addrs()[0]
	req := brokertest.Connect(t, addr)
	req.SendFrame("SUBSCRIBE", "", "destination:/temp-queue/r", "id:r", "receipt:s")
	req.Expect(frame.CmdReceipt)
	req.SendFrame("SEND", "", "destination:/command/nobody", "reply-to:/temp-queue/r", "correlation-id:n1")
	req.Expect(frame.CmdMessage, "correlation-id:n1", "executed:false", "error:no responder")

	slow := brokertest.Connect(t, addr)
	slow.SendFrame("SUBSCRIBE", "", "destination:/command/slow", "id:s", "receipt:s")
	slow.Expect(frame.CmdReceipt)
	sent := time.Now()
	req.SendFrame("SEND", "", "destination:/command/slow", "reply-to:/temp-queue/r", "correlation-id:t1", "timeout:200")
	m := slow.Expect(frame.CmdMessage, "correlation-id:t1")
	req.Expect(frame.CmdMessage, "correlation-id:t1", "executed:false", "error:timeout")
	if el := time.Since(sent); el < 190*time.Millisecond {
		t.Fatalf("timed out after %v", el)
	}
	// The late response is dropped, not delivered.
	slow.SendFrame("SEND", "", "destination:"+m.Value("reply-to"), "correlation-id:t1", "executed:true", "receipt:late")
	slow.Expect(frame.CmdReceipt)
	req.ExpectQuiet() // the late response was routed before "late"'s RECEIPT
	var requests, timeouts, noResp, late uint64
	for _, st := range b.RPCStats() {
		requests += st.Requests
		timeouts += st.Timeouts
		noResp += st.NoResponder
		late += st.Late
	}
	if requests != 2 || timeouts != 1 || noResp != 1 || late != 1 {
		t.Fatalf("requests %d timeouts %d no-responder %d late %d", requests, timeouts, noResp, late)
	}
}
