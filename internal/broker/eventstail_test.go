package broker_test

import (
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/titan-broker/titan/internal/broker"
	"github.com/titan-broker/titan/internal/brokertest"
	"github.com/titan-broker/titan/internal/frame"
	"github.com/titan-broker/titan/internal/store"
	"github.com/titan-broker/titan/internal/store/memstore"
)

// scanCountingStore counts Scans of the store under the broker.
type scanCountingStore struct {
	store.Store
	scans atomic.Int64
}

func (s *scanCountingStore) Scan(name string, from uint64, fn func(uint64, []byte) bool) error {
	s.scans.Add(1)
	return s.Store.Scan(name, from, fn)
}

// Live subscribers of an events-store log take new messages from its shared tail: every
// subscriber gets every message, in sequence, and a caught-up subscriber never scans the
// store (neither per message nor when woken with nothing new).
func TestEventsStoreLiveTailIsShared(t *testing.T) {
	st := &scanCountingStore{Store: memstore.New()}
	b := brokertest.Run(t, brokertest.DefaultTestConfig(), broker.Options{Store: st})
	subs := make([]*brokertest.Client, 3)
	for i := range subs {
		subs[i] = brokertest.Connect(t, b.Addrs()[0])
		subs[i].SendFrame("SUBSCRIBE", "", "id:1", "destination:/events-store/tail", "receipt:s")
		subs[i].Expect(frame.CmdReceipt)
	}
	p := brokertest.Connect(t, b.Addrs()[0])
	const n = 50
	before := st.scans.Load()
	for i := 1; i <= n; i++ {
		p.SendFrame("SEND", "m"+strconv.Itoa(i), "destination:/events-store/tail", "receipt:r"+strconv.Itoa(i))
		p.Expect(frame.CmdReceipt)
		for _, c := range subs {
			m := c.Expect(frame.CmdMessage, "sequence:"+strconv.Itoa(i))
			if string(m.Body) != "m"+strconv.Itoa(i) {
				t.Fatalf("message %d: body %q", i, m.Body)
			}
		}
	}
	if scans := st.scans.Load() - before; scans != 0 {
		t.Fatalf("%d store scans for %d messages to %d caught-up subscribers: the tail is not shared", scans, n, len(subs))
	}
}

// A subscriber woken with nothing new to read (its ACKs wake its reader) does not scan the
// store either: what is above the tail is not published yet, and its publish wakes it.
func TestEventsStoreCaughtUpReaderDoesNotScanOnWakeUp(t *testing.T) {
	st := &scanCountingStore{Store: memstore.New()}
	b := brokertest.Run(t, brokertest.DefaultTestConfig(), broker.Options{Store: st})
	sub := brokertest.Connect(t, b.Addrs()[0])
	sub.SendFrame("SUBSCRIBE", "", "id:1", "destination:/events-store/wake", "ack:client-individual", "durable-name:d", "receipt:s")
	sub.Expect(frame.CmdReceipt)
	p := brokertest.Connect(t, b.Addrs()[0])
	const n = 30
	before := st.scans.Load()
	for i := 1; i <= n; i++ {
		p.SendFrame("SEND", "m"+strconv.Itoa(i), "destination:/events-store/wake", "receipt:r"+strconv.Itoa(i))
		p.Expect(frame.CmdReceipt)
		m := sub.Expect(frame.CmdMessage, "sequence:"+strconv.Itoa(i))
		ack, _ := m.Get(frame.HdrAck)
		sub.SendFrame("ACK", "", "id:"+ack, "receipt:a"+strconv.Itoa(i))
		sub.Expect(frame.CmdReceipt, "receipt-id:a"+strconv.Itoa(i))
	}
	if scans := st.scans.Load() - before; scans != 0 {
		t.Fatalf("%d store scans for %d messages acknowledged one by one by a caught-up subscriber", scans, n)
	}
}
