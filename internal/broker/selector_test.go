package broker_test

import (
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/titan-broker/titan/internal/brokertest"
	"github.com/titan-broker/titan/internal/frame"
)

// send sends body to d with extra "k:v" headers and waits for its RECEIPT.
func send(t *testing.T, c *brokertest.Client, d, body string, hdrs ...string) {
	t.Helper()
	r := "r-" + body
	c.SendFrame("SEND", body, append([]string{"destination:" + d, "receipt:" + r}, hdrs...)...)
	c.Expect(frame.CmdReceipt, "receipt-id:"+r)
}

// subscribeReceipted subscribes with extra headers and waits for the RECEIPT (for a
// subscription that receives nothing before it).
func subscribeReceipted(t *testing.T, c *brokertest.Client, d, id string, hdrs ...string) {
	t.Helper()
	c.SendFrame("SUBSCRIBE", "", append([]string{"destination:" + d, "id:" + id, "receipt:sub-" + id}, hdrs...)...)
	c.Expect(frame.CmdReceipt, "receipt-id:sub-"+id)
}

// subscribeAndCollect subscribes with extra headers, then reads until it has n MESSAGE
// bodies and a DISCONNECT's RECEIPT, which the broker writes after every frame queued
// before it: what was delivered before the barrier is exactly what it returns.
func subscribeAndCollect(t *testing.T, c *brokertest.Client, d string, n int, hdrs ...string) []string {
	t.Helper()
	c.SendFrame("SUBSCRIBE", "", append([]string{"destination:" + d, "id:1"}, hdrs...)...)
	var got []string
	for len(got) < n {
		got = append(got, string(c.Expect(frame.CmdMessage).Body))
	}
	c.SendFrame("DISCONNECT", "", "receipt:bye")
	for {
		f, err := c.Read(5 * time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if f.Command == frame.CmdReceipt {
			return got
		}
		got = append(got, string(f.Body))
	}
}

// TestQueueSelectorLeavesOthersForOtherConsumers: a client-ack consumer selecting red, with
// prefetch 1, gets the reds one at a time as it acknowledges; the blues behind and between
// them go, in order, to a blue consumer; nothing is given to a consumer that does not select
// it, even when the one that does is at its prefetch limit.
func TestQueueSelectorLeavesOthersForOtherConsumers(t *testing.T) {
	b := brokertest.Run(t, brokertest.DefaultTestConfig())
	addr := b.Addrs()[0]
	red := brokertest.Connect(t, addr)
	subscribeReceipted(t, red, "/queue/sel", "1", "selector:color = 'red'", "ack:client-individual", "prefetch-count:1")
	p := brokertest.Connect(t, addr)
	for i, c := range []string{"red", "blue", "red", "blue", "red", "green"} {
		send(t, p, "/queue/sel", c+"-"+strconv.Itoa(i), "color:"+c)
	}
	blue := brokertest.Connect(t, addr)
	if got, want := subscribeAndCollect(t, blue, "/queue/sel", 2, "selector:color = 'blue'"), []string{"blue-1", "blue-3"}; !slices.Equal(got, want) {
		t.Fatalf("blue consumer got %q, want %q", got, want)
	}
	for _, want := range []string{"red-0", "red-2", "red-4"} {
		m := red.Expect(frame.CmdMessage)
		if string(m.Body) != want {
			t.Fatalf("red consumer got %q, want %q", m.Body, want)
		}
		red.SendFrame("ACK", "", "id:"+m.Value("ack"))
	}
	// The green message is selected by nobody: it stays, and a plain consumer gets it.
	red.SendFrame("DISCONNECT", "", "receipt:bye")
	red.Expect(frame.CmdReceipt, "receipt-id:bye") // nothing else was delivered to red
	plain := brokertest.Connect(t, addr)
	if got := subscribeAndCollect(t, plain, "/queue/sel", 1); !slices.Equal(got, []string{"green-5"}) {
		t.Fatalf("plain consumer got %q, want [green-5]", got)
	}
}

// TestQueueSelectorWithPriority: a selective consumer takes the messages it selects highest
// priority first, FIFO within a priority.
func TestQueueSelectorWithPriority(t *testing.T) {
	b := brokertest.Run(t, brokertest.DefaultTestConfig())
	addr := b.Addrs()[0]
	p := brokertest.Connect(t, addr)
	for i, x := range []struct{ kind, prio string }{
		{"a", "1"}, {"b", "9"}, {"a", "9"}, {"a", "4"}, {"b", "4"}, {"a", "9"}, {"a", "0"},
	} {
		send(t, p, "/queue/selprio", x.kind+x.prio+"-"+strconv.Itoa(i), "kind:"+x.kind, "priority:"+x.prio)
	}
	c := brokertest.Connect(t, addr)
	got := subscribeAndCollect(t, c, "/queue/selprio", 4, "selector:kind = 'a' AND JMSPriority >= 1")
	if want := []string{"a9-2", "a9-5", "a4-3", "a1-0"}; !slices.Equal(got, want) {
		t.Fatalf("selective consumer got %q, want %q", got, want)
	}
}

// TestSelectorErrors: a selector that does not parse is refused with its position; one on a
// pattern that cannot filter is refused naming the header; an empty one is no selector.
func TestSelectorErrors(t *testing.T) {
	b := brokertest.Run(t, brokertest.DefaultTestConfig())
	addr := b.Addrs()[0]
	c := brokertest.Connect(t, addr)
	c.SendFrame("SUBSCRIBE", "", "destination:/topic/x", "id:1", "selector:a = 'b' OR", "receipt:s")
	e := c.Expect(frame.CmdError, "message:invalid selector", "receipt-id:s")
	if !strings.Contains(string(e.Body), "position 10") {
		t.Errorf("ERROR body %q does not name position 10", e.Body)
	}
	for _, d := range []string{"/events-store/x", "/command/x", "/query/x"} {
		c := brokertest.Connect(t, addr)
		c.SendFrame("SUBSCRIBE", "", "destination:"+d, "id:1", "selector:a = 'b'", "receipt:s")
		e := c.Expect(frame.CmdError, "message:selector not supported", "receipt-id:s")
		if !strings.Contains(string(e.Body), "selector") {
			t.Errorf("%s: ERROR body %q does not name the selector header", d, e.Body)
		}
	}
	c = brokertest.Connect(t, addr)
	subscribeReceipted(t, c, "/topic/empty-selector", "1", "selector: ")
	p := brokertest.Connect(t, addr)
	send(t, p, "/topic/empty-selector", "any")
	if m := c.Expect(frame.CmdMessage); string(m.Body) != "any" {
		t.Fatalf("got %q", m.Body)
	}
}

// TestTopicSelectorOnWildcard: a wildcard topic subscription receives, from every channel it
// covers, only the messages its selector selects (a header read as a number).
func TestTopicSelectorOnWildcard(t *testing.T) {
	b := brokertest.Run(t, brokertest.DefaultTestConfig())
	addr := b.Addrs()[0]
	c := brokertest.Connect(t, addr)
	subscribeReceipted(t, c, "/topic/t.*", "1", "selector:n > 2")
	p := brokertest.Connect(t, addr)
	for i := range 5 {
		send(t, p, "/topic/t/"+strconv.Itoa(i%2), "n"+strconv.Itoa(i), "n:"+strconv.Itoa(i))
	}
	for _, want := range []string{"n3", "n4"} {
		if m := c.Expect(frame.CmdMessage); string(m.Body) != want {
			t.Fatalf("got %q, want %q", m.Body, want)
		}
	}
	c.SendFrame("DISCONNECT", "", "receipt:bye")
	c.Expect(frame.CmdReceipt, "receipt-id:bye")
}

// TestPriorityValidation: priority must be 0-9.
func TestPriorityValidation(t *testing.T) {
	b := brokertest.Run(t, brokertest.DefaultTestConfig())
	for _, v := range []string{"10", "-1", "high", ""} {
		c := brokertest.Connect(t, b.Addrs()[0])
		c.SendFrame("SEND", "x", "destination:/queue/p", "priority:"+v, "receipt:r")
		c.Expect(frame.CmdError, "message:invalid priority header", "receipt-id:r")
	}
}

// TestQueuePriorityOrderSurvivesRestart: priorities are stored with the message, so after a
// restart the queue still delivers highest priority first, FIFO within a priority.
func TestQueuePriorityOrderSurvivesRestart(t *testing.T) {
	dir := t.TempDir()
	b, stop := startStop(t, durableConfig(dir))
	p := brokertest.Connect(t, b.Addrs()[0])
	prios := []string{"2", "", "9", "4", "2", "9", "0"}
	for i, v := range prios {
		h := []string{}
		if v != "" {
			h = append(h, "priority:"+v)
		}
		send(t, p, "/queue/prio-restart", "m"+strconv.Itoa(i), h...)
	}
	stop()
	b2, stop2 := startStop(t, durableConfig(dir))
	defer stop2()
	c := brokertest.Connect(t, b2.Addrs()[0])
	got := subscribeAndCollect(t, c, "/queue/prio-restart", len(prios))
	if want := []string{"m2", "m5", "m1", "m3", "m0", "m4", "m6"}; !slices.Equal(got, want) {
		t.Fatalf("after restart got %q, want %q", got, want)
	}
}
