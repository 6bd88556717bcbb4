package e2e

import (
	"fmt"
	"testing"
	"time"
)

// TestRequestAutoAckResponderCredit (issue 32): a responder subscribed with ack:auto is
// given at most its prefetch-count of requests awaiting their response, like a client-ack
// one; a request past that is answered executed:false error:no responder (no other
// responder), and the responder's response gives the place back. Silence on the responder
// is proved by a RECEIPT barrier on its own connection, never by waiting.
func TestRequestAutoAckResponderCredit(t *testing.T) {
	t.Parallel()
	b := startBroker(t, yamlConfig(""))
	const (
		command = "/command/credit-auto"
		replies = "/queue/credit-auto-replies"
	)
	// readUntil reads frames from c until one matches done, returning every frame read.
	readUntil := func(c *rawConn, what string, done func(*rawFrame) bool) []*rawFrame {
		t.Helper()
		var got []*rawFrame
		for {
			f, err := c.readFrame(10 * time.Second)
			requireNoError(t, err, "reading %s (so far %v)", what, got)
			got = append(got, f)
			if f.command == "ERROR" {
				t.Fatalf("%s: got %s", what, f)
			}
			if done(f) {
				return got
			}
		}
	}
	receipt := func(id string) func(*rawFrame) bool {
		return func(f *rawFrame) bool {
			rid, _ := f.get("receipt-id")
			return f.command == "RECEIPT" && rid == id
		}
	}
	messages := func(fs []*rawFrame) (corrs []string) {
		for _, f := range fs {
			if f.command == "MESSAGE" {
				c, _ := f.get("correlation-id")
				corrs = append(corrs, c)
			}
		}
		return corrs
	}

	responder := dialRaw(t, b)
	responder.connect()
	requireNoError(t, responder.write("SUBSCRIBE\nid:s\ndestination:"+command+"\nack:auto\nprefetch-count:2\nreceipt:sub\n\n\x00"))
	readUntil(responder, "the responder's SUBSCRIBE receipt", receipt("sub"))

	requester := dialRaw(t, b)
	requester.connect()
	requireNoError(t, requester.write("SUBSCRIBE\nid:r\ndestination:"+replies+"\nreceipt:sub\n\n\x00"))
	readUntil(requester, "the requester's SUBSCRIBE receipt", receipt("sub"))
	request := func(corr string) {
		t.Helper()
		requireNoError(t, requester.write(fmt.Sprintf("SEND\ndestination:%s\nreply-to:%s\ncorrelation-id:%s\ntimeout:60000\nreceipt:%s\ncontent-length:1\n\nx\x00", command, replies, corr, corr)))
	}

	// Three requests: the responder has credit for two; the third is answered by the broker.
	for _, corr := range []string{"c0", "c1", "c2"} {
		request(corr)
	}
	var receipts int
	var answer *rawFrame
	readUntil(requester, "the requests' receipts and the broker's answer", func(f *rawFrame) bool {
		switch f.command {
		case "RECEIPT":
			receipts++
		case "MESSAGE":
			answer = f
		}
		return receipts == 3 && answer != nil
	})
	if corr, _ := answer.get("correlation-id"); corr != "c2" {
		t.Fatalf("the broker answered %s, want the third request c2", answer)
	}
	if ex, _ := answer.get("executed"); ex != "false" {
		t.Fatalf("answer %s, want executed:false", answer)
	}
	if e, _ := answer.get("error"); e != "no responder" {
		t.Fatalf("answer %s, want error:no responder", answer)
	}
	// Barrier: everything the broker queued for the responder precedes this RECEIPT.
	requireNoError(t, responder.write("SEND\ndestination:/topic/credit-auto-barrier\nreceipt:b1\n\n\x00"))
	if got := messages(readUntil(responder, "the responder's requests", receipt("b1"))); fmt.Sprint(got) != "[c0 c1]" {
		t.Fatalf("the responder got requests %v, want [c0 c1] (its prefetch-count)", got)
	}

	// Its response to c0 gives a place back: the next request reaches it.
	requireNoError(t, responder.write("SEND\ndestination:"+replies+"\ncorrelation-id:c0\nreceipt:a0\ncontent-length:4\n\ndone\x00"))
	readUntil(responder, "the response's receipt", receipt("a0"))
	request("c3")
	if got := messages(readUntil(responder, "request c3", func(f *rawFrame) bool { return f.command == "MESSAGE" })); fmt.Sprint(got) != "[c3]" {
		t.Fatalf("after its response the responder got %v, want [c3]", got)
	}
	var resp []string
	receipted := false
	readUntil(requester, "the response and c3's receipt", func(f *rawFrame) bool {
		if f.command == "MESSAGE" {
			c, _ := f.get("correlation-id")
			resp = append(resp, c)
		}
		receipted = receipted || receipt("c3")(f)
		return receipted && len(resp) == 1
	})
	if fmt.Sprint(resp) != "[c0]" {
		t.Fatalf("the requester got responses %v, want [c0]", resp)
	}
}
