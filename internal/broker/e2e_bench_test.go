package broker_test

import (
	"fmt"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/titan-broker/titan/internal/broker"
	"github.com/titan-broker/titan/internal/brokertest"
	"github.com/titan-broker/titan/internal/frame"
	"github.com/titan-broker/titan/internal/store/pebblestore"
)

// BenchmarkEndToEnd runs N producers × M consumers over loopback TCP against a real broker in
// this process, for queues, topics and events-store, on the memory store and on the durable
// Pebble store. Producers write one SEND per message (100-byte body, no receipt, the default
// persistence: durable for queues and events-store on Pebble), like a normal client;
// consumers subscribe with ack:auto and read with the frame parser. One op is one message
// sent; msgs/s counts messages sent per second and deliveries/s messages received (× M for a
// topic or a log). allocs/op are the whole process's (broker and clients), per message sent.
//
// The goals of issue 13 (the ratio to the null relay) are measured by ../shared/bench/compare;
// this benchmark is the in-repo yardstick for benchstat.
func BenchmarkEndToEnd(b *testing.B) {
	for _, store := range []string{"memory", "pebble"} {
		for _, pattern := range []string{"queue", "topic", "events-store"} {
			for _, nm := range [][2]int{{1, 1}, {4, 4}} {
				name := fmt.Sprintf("%s/%s/%dx%d", pattern, store, nm[0], nm[1])
				b.Run(name, func(b *testing.B) { benchEndToEnd(b, store, pattern, nm[0], nm[1]) })
			}
		}
	}
}

func benchEndToEnd(b *testing.B, store, pattern string, producers, consumers int) {
	var opts broker.Options
	var pst *pebblestore.Store
	if store == "pebble" {
		st, err := pebblestore.Open(b.TempDir(), pebblestore.Options{})
		if err != nil {
			b.Fatal(err)
		}
		opts.Store, pst = st, st
	}
	br := brokertest.Run(b, brokertest.DefaultTestConfig(), opts)
	addr := br.Addrs()[0]
	destination := "/" + pattern + "/bench"

	per := max(b.N/producers, 1)
	sent := per * producers
	want := sent            // deliveries expected in all
	if pattern != "queue" { // every subscriber of a topic or a log gets every message
		want = sent * consumers
	}
	var got atomic.Int64
	var wg, cwg sync.WaitGroup
	done := make(chan struct{})
	var doneOnce sync.Once
	var cconns []net.Conn
	subscribed := make(chan struct{}, consumers)
	errs := make(chan error, consumers+producers)
	for i := range consumers {
		c := brokertest.Connect(b, addr)
		c.SendFrame("SUBSCRIBE", "", "id:s", "destination:"+destination, "ack:auto", "receipt:sub")
		c.Expect(frame.CmdReceipt)
		cconns = append(cconns, c.Conn)
		cwg.Add(1)
		go func() {
			defer cwg.Done()
			subscribed <- struct{}{}
			p := frame.NewParser(c.Conn, frame.Limits{MaxBodyBytes: 1 << 20})
			for got.Load() < int64(want) {
				_ = c.Conn.SetReadDeadline(time.Now().Add(5 * time.Second))
				f, err := p.ReadFrame()
				if err != nil {
					if got.Load() >= int64(want) {
						return // another consumer saw the last delivery and closed this one
					}
					errs <- fmt.Errorf("consumer %d: %w (after %d of %d deliveries)", i, err, got.Load(), want)
					return
				}
				if f.Command == frame.CmdMessage && got.Add(1) == int64(want) {
					doneOnce.Do(func() { close(done) })
				}
			}
		}()
	}
	for range consumers {
		<-subscribed
	}
	send := []byte("SEND\ndestination:" + destination + "\ncontent-length:100\n\n" + strings.Repeat("x", 100) + "\x00")
	conns := make([]net.Conn, producers)
	for i := range conns {
		conns[i] = brokertest.Connect(b, addr).Conn
	}
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	for _, conn := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range per {
				if _, err := conn.Write(send); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	select {
	case <-done:
	case err := <-errs:
		b.Fatal(err)
	}
	el := time.Since(start).Seconds()
	b.StopTimer()
	for _, c := range cconns {
		_ = c.Close()
	}
	cwg.Wait()
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
	b.ReportMetric(float64(sent)/el, "msgs/s")
	b.ReportMetric(float64(got.Load())/el, "deliveries/s")
	if pst != nil && pst.Committed.Load() > 0 {
		// Records acknowledged before their group was written: never written, never deleted.
		b.ReportMetric(float64(pst.Dropped.Load())/float64(pst.Committed.Load()), "unwritten/record")
		b.ReportMetric(float64(pst.WALSyncs())/float64(sent), "fsyncs/msg")
	}
}
