package broker_test

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/titan-broker/titan/internal/broker"
	"github.com/titan-broker/titan/internal/brokertest"
	"github.com/titan-broker/titan/internal/config"
	"github.com/titan-broker/titan/internal/frame"
	"github.com/titan-broker/titan/internal/store/pebblestore"
	"github.com/titan-broker/titan/internal/testwait"
)

// A producer that does not wait for each RECEIPT gets its persistent SENDs committed in
// shared fsyncs, published in order, and its RECEIPTs in order, with frames of other kinds
// never overtaking them.
func TestPipelinedPersistentSendsKeepOrder(t *testing.T) {
	st, err := pebblestore.Open(t.TempDir(), pebblestore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	b := brokertest.Run(t, brokertest.DefaultTestConfig(), broker.Options{Store: st})
	sub := brokertest.Connect(t, b.Addrs()[0])
	sub.SendFrame("SUBSCRIBE", "", "destination:/queue/p", "id:q", "receipt:s1")
	sub.Expect(frame.CmdReceipt)
	sub.SendFrame("SUBSCRIBE", "", "destination:/topic/after", "id:t", "receipt:s2")
	sub.Expect(frame.CmdReceipt)
	p := brokertest.Connect(t, b.Addrs()[0])
	const n = 500
	var raw strings.Builder
	for i := range n {
		raw.WriteString("SEND\ndestination:/queue/p\nreceipt:" + strconv.Itoa(i) + "\n\n" + strconv.Itoa(i) + "\x00")
	}
	raw.WriteString("SEND\ndestination:/topic/after\nreceipt:topic\n\nlast\x00")
	syncs0 := st.WALSyncs()
	p.Send(raw.String())
	for i := range n {
		p.Expect(frame.CmdReceipt, "receipt-id:"+strconv.Itoa(i))
	}
	p.Expect(frame.CmdReceipt, "receipt-id:topic")
	if syncs := st.WALSyncs() - syncs0; syncs >= n { // how many share one depends on the machine; at least one fsync covers several
		t.Errorf("%d fsyncs for %d pipelined messages: no group commit within the connection", syncs, n)
	}
	for i := range n {
		m := sub.Expect(frame.CmdMessage, "subscription:q")
		if string(m.Body) != strconv.Itoa(i) {
			t.Fatalf("message %d carries %q", i, m.Body)
		}
	}
	sub.Expect(frame.CmdMessage, "subscription:t") // the topic SEND waited for the queue SENDs
}

// When a pipelined SEND fails (queue full under FAIL), the ERROR names it, the connection
// closes, and the SENDs after it were never accepted: they are not delivered.
func TestPipelineStopsAtFirstFailure(t *testing.T) {
	one := 1
	cfg := brokertest.DefaultTestConfig()
	cfg.AddressSettings = []config.AddressSetting{{Match: "small", DefaultMaxPendingMessages: &one, AddressFullPolicy: "FAIL"}}
	st, err := pebblestore.Open(t.TempDir(), pebblestore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	b := brokertest.Run(t, cfg, broker.Options{Store: st})
	p := brokertest.Connect(t, b.Addrs()[0])
	p.Send("SEND\ndestination:/queue/small\nreceipt:1\n\na\x00SEND\ndestination:/queue/small\nreceipt:2\n\nb\x00" +
		"SEND\ndestination:/queue/small\nreceipt:3\n\nc\x00")
	p.Expect(frame.CmdReceipt, "receipt-id:1")
	p.Expect(frame.CmdError, "message:queue full", "receipt-id:2")
	p.ExpectClosed(5 * time.Second)
	c := brokertest.Connect(t, b.Addrs()[0])
	c.SendFrame("SUBSCRIBE", "", "destination:/queue/small", "id:1")
	if m := c.Expect(frame.CmdMessage); string(m.Body) != "a" {
		t.Fatalf("got %q", m.Body)
	}
	c.ExpectQuiet() // the SUBSCRIBE dispatched all the queue held
	testwait.Eventually(t, 5*time.Second, `streamCount(t, b, "queue/default/p/small") <= 1`, func() bool { return streamCount(t, b, "queue/default/p/small") <= 1 })
}
