package broker_test

import (
	"testing"

	"github.com/titan-broker/titan/internal/broker"
	"github.com/titan-broker/titan/internal/brokertest"
	"github.com/titan-broker/titan/internal/frame"
	"github.com/titan-broker/titan/internal/store/pebblestore"
)

// A COMMIT stores its SENDs to several destinations with one store commit (one fsync), and
// all of them survive a restart.
func TestTransactionCommitIsOneStoreCommit(t *testing.T) {
	dir := t.TempDir()
	st, err := pebblestore.Open(dir, pebblestore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	b := brokertest.Run(t, brokertest.DefaultTestConfig(), broker.Options{Store: st})
	p := brokertest.Connect(t, b.Addrs()[0])
	p.SendFrame("BEGIN", "", "transaction:t1")
	for _, d := range []string{"/queue/tx-a", "/queue/tx-b", "/queue/tx-c", "/events-store/tx-log"} {
		p.SendFrame("SEND", "in "+d, "destination:"+d, "transaction:t1")
	}
	syncs := st.WALSyncs()
	p.SendFrame("COMMIT", "", "transaction:t1", "receipt:c")
	p.Expect(frame.CmdReceipt, "receipt-id:c")
	if got := st.WALSyncs() - syncs; got != 1 {
		t.Fatalf("COMMIT of 4 durable SENDs to 4 destinations took %d WAL syncs, want 1", got)
	}
	infos, err := st.Streams()
	if err != nil {
		t.Fatal(err)
	}
	if len(infos) != 4 {
		t.Fatalf("streams after COMMIT: %+v, want 4", infos)
	}
	for _, in := range infos {
		if in.Count != 1 {
			t.Fatalf("stream %s holds %d records, want 1", in.Name, in.Count)
		}
	}
	// The messages are delivered after the COMMIT, in order, with their sequences.
	c := brokertest.Connect(t, b.Addrs()[0])
	c.SendFrame("SUBSCRIBE", "", "id:1", "destination:/queue/tx-b")
	c.Expect(frame.CmdMessage, "destination:/queue/tx-b")
	c.SendFrame("SUBSCRIBE", "", "id:2", "destination:/events-store/tx-log", "start-position:first")
	c.Expect(frame.CmdMessage, "sequence:1")
}
