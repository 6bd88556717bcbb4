package broker_test

import (
	"strings"
	"testing"
	"time"

	"github.com/titan-broker/titan/internal/broker"
	"github.com/titan-broker/titan/internal/brokertest"
	"github.com/titan-broker/titan/internal/frame"
	"github.com/titan-broker/titan/internal/store/pebblestore"
)

// BenchmarkDurableAck measures ACKs on a durable events-store subscription (durable-name,
// ack:client-individual) on the Pebble store: b.N messages are stored first, then the timed
// part reads each MESSAGE and ACKs it at once, without a receipt, the last ACK with one (it
// waits for the positions to be durable). One op is one MESSAGE read and acknowledged;
// fsyncs/ack counts the store's WAL syncs per ACK.
func BenchmarkDurableAck(b *testing.B) {
	st, err := pebblestore.Open(b.TempDir(), pebblestore.Options{})
	if err != nil {
		b.Fatal(err)
	}
	br := brokertest.Run(b, brokertest.DefaultTestConfig(), broker.Options{Store: st})
	addr := br.Addrs()[0]
	p := brokertest.Connect(b, addr)
	send := "SEND\ndestination:/events-store/acks\ncontent-length:100\n\n" + strings.Repeat("x", 100) + "\x00"
	p.Send(strings.Repeat(send, b.N))
	p.SendFrame("SEND", "last", "destination:/events-store/acks", "receipt:stored")
	p.Expect(frame.CmdReceipt)
	c := brokertest.Connect(b, addr)
	c.SendFrame("SUBSCRIBE", "", "destination:/events-store/acks", "id:a", "ack:client-individual",
		"durable-name:bench", "start-position:first")
	syncs := st.WALSyncs()
	b.ReportAllocs()
	b.ResetTimer()
	var ack []byte
	for i := range b.N {
		m, err := c.Read(10 * time.Second)
		if err != nil {
			b.Fatalf("MESSAGE %d: %v", i, err)
		}
		ack = append(ack[:0], "ACK\nid:"...)
		ack = append(ack, m.Value(frame.HdrAck)...)
		if i == b.N-1 {
			ack = append(ack, "\nreceipt:acked"...)
		}
		ack = append(ack, "\n\n\x00"...)
		if _, err := c.Conn.Write(ack); err != nil {
			b.Fatal(err)
		}
	}
	for {
		f, err := c.Read(10 * time.Second)
		if err != nil {
			b.Fatal(err)
		}
		if f.Command == frame.CmdReceipt {
			break
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(st.WALSyncs()-syncs)/float64(b.N), "fsyncs/ack")
}
