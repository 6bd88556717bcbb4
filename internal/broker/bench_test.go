package broker_test

import (
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/titan-broker/titan/internal/address"
	"github.com/titan-broker/titan/internal/broker"
	"github.com/titan-broker/titan/internal/brokertest"
	"github.com/titan-broker/titan/internal/frame"
	"github.com/titan-broker/titan/internal/store/pebblestore"
)

func p99(lat []time.Duration) float64 {
	slices.Sort(lat)
	return float64(lat[len(lat)*99/100].Microseconds()) / 1000
}

// BenchmarkDurablePublish measures persistent SENDs with receipts to a queue on the embedded
// Pebble store, with 1, 4 and 16 producer connections each waiting for its RECEIPT before the
// next SEND. fsyncs/msg below 1 is group commit at work.
func BenchmarkDurablePublish(b *testing.B) {
	for _, producers := range []int{1, 4, 16} {
		b.Run("producers="+strconv.Itoa(producers), func(b *testing.B) {
			st, err := pebblestore.Open(b.TempDir(), pebblestore.Options{})
			if err != nil {
				b.Fatal(err)
			}
			br := brokertest.Run(b, brokertest.DefaultTestConfig(), broker.Options{Store: st})
			clients := make([]*brokertest.Client, producers)
			for i := range clients {
				clients[i] = brokertest.Connect(b, br.Addrs()[0])
			}
			body := strings.Repeat("x", 256)
			var mu sync.Mutex
			var lat []time.Duration
			per := max(b.N/producers, 1)
			syncs0 := st.WALSyncs()
			b.ResetTimer()
			start := time.Now()
			var wg sync.WaitGroup
			for _, c := range clients {
				wg.Add(1)
				go func() {
					defer wg.Done()
					local := make([]time.Duration, 0, per)
					for i := range per {
						t0 := time.Now()
						c.SendFrame("SEND", body, "destination:/queue/bench", "receipt:"+strconv.Itoa(i))
						if f, err := c.Read(10 * time.Second); err != nil || f.Command != frame.CmdReceipt {
							b.Errorf("receipt %d: %v %v", i, f, err)
							return
						}
						local = append(local, time.Since(t0))
					}
					mu.Lock()
					lat = append(lat, local...)
					mu.Unlock()
				}()
			}
			wg.Wait()
			el := time.Since(start).Seconds()
			b.StopTimer()
			n := float64(per * producers)
			syncs := float64(st.WALSyncs() - syncs0)
			b.ReportMetric(n/el, "msgs/s")
			b.ReportMetric(syncs/el, "fsyncs/s")
			b.ReportMetric(syncs/n, "fsyncs/msg")
			b.ReportMetric(p99(lat), "p99-ms")
		})
	}
}

// BenchmarkRequestResponse measures command round trips (requester SEND → responder MESSAGE →
// responder SEND → requester MESSAGE on its temp-queue) with 1 and 8 concurrent requesters
// served by 2 responders.
func BenchmarkRequestResponse(b *testing.B) {
	for _, requesters := range []int{1, 8} {
		b.Run("requesters="+strconv.Itoa(requesters), func(b *testing.B) {
			br := brokertest.Run(b, brokertest.DefaultTestConfig())
			addr := br.Addrs()[0]
			stop := make(chan struct{})
			var rwg sync.WaitGroup
			for i := range 2 {
				r := brokertest.Connect(b, addr)
				r.SendFrame("SUBSCRIBE", "", "destination:/command/bench", "id:r"+strconv.Itoa(i), "receipt:r")
				r.Expect(frame.CmdReceipt)
				rwg.Add(1)
				go func() {
					defer rwg.Done()
					for {
						f, err := r.Read(100 * time.Millisecond)
						select {
						case <-stop:
							return
						default:
						}
						if err != nil {
							continue
						}
						r.SendFrame("SEND", "", "destination:"+f.Value("reply-to"), "correlation-id:"+f.Value("correlation-id"), "executed:true")
					}
				}()
			}
			clients := make([]*brokertest.Client, requesters)
			for i := range clients {
				c := brokertest.Connect(b, addr)
				c.SendFrame("SUBSCRIBE", "", "destination:/temp-queue/r", "id:r", "receipt:r")
				c.Expect(frame.CmdReceipt)
				clients[i] = c
			}
			per := max(b.N/requesters, 1)
			var mu sync.Mutex
			var lat []time.Duration
			b.ResetTimer()
			start := time.Now()
			var wg sync.WaitGroup
			for ci, c := range clients {
				wg.Add(1)
				go func() {
					defer wg.Done()
					local := make([]time.Duration, 0, per)
					for i := range per {
						corr := strconv.Itoa(ci) + "-" + strconv.Itoa(i)
						t0 := time.Now()
						c.SendFrame("SEND", "", "destination:/command/bench", "reply-to:/temp-queue/r", "correlation-id:"+corr)
						f, err := c.Read(10 * time.Second)
						if err != nil || f.Value("correlation-id") != corr || f.Value("executed") != "true" {
							b.Errorf("response %s: %v %v", corr, f, err)
							return
						}
						local = append(local, time.Since(t0))
					}
					mu.Lock()
					lat = append(lat, local...)
					mu.Unlock()
				}()
			}
			wg.Wait()
			el := time.Since(start).Seconds()
			b.StopTimer()
			close(stop)
			rwg.Wait()
			b.ReportMetric(float64(per*requesters)/el, "roundtrips/s")
			b.ReportMetric(p99(lat), "p99-ms")
		})
	}
}

// BenchmarkDurablePublishPipelined measures one producer connection that sends persistent
// SENDs with receipts without waiting for each RECEIPT (it reads them as they come), as
// stomp.py and stompjs do when the application does not block on receipts.
func BenchmarkDurablePublishPipelined(b *testing.B) {
	st, err := pebblestore.Open(b.TempDir(), pebblestore.Options{})
	if err != nil {
		b.Fatal(err)
	}
	br := brokertest.Run(b, brokertest.DefaultTestConfig(), broker.Options{Store: st})
	c := brokertest.Connect(b, br.Addrs()[0])
	frameBytes := []byte("SEND\ndestination:/queue/bench\nreceipt:r\n\n" + strings.Repeat("x", 256) + "\x00")
	syncs0 := st.WALSyncs()
	b.ResetTimer()
	start := time.Now()
	done := make(chan error, 1)
	n := b.N
	go func() {
		for range n {
			f, err := c.Read(30 * time.Second)
			if err != nil || f.Command != frame.CmdReceipt {
				done <- err
				return
			}
		}
		done <- nil
	}()
	for range n {
		if _, err := c.Conn.Write(frameBytes); err != nil {
			b.Fatal(err)
		}
	}
	if err := <-done; err != nil {
		b.Fatal(err)
	}
	el := time.Since(start).Seconds()
	b.StopTimer()
	b.ReportMetric(float64(n)/el, "msgs/s")
	b.ReportMetric(float64(st.WALSyncs()-syncs0)/float64(n), "fsyncs/msg")
}

// BenchmarkSendIntoRing compares SEND throughput into a full ring of 1,000 with an
// unbounded queue (issue 6: a ring must not be more than 20% slower). One pipelining
// producer, memory store, no consumer; the ring removes one message per SEND.
func BenchmarkSendIntoRing(b *testing.B) {
	for _, ring := range []int{0, 1000} {
		name := "unbounded"
		if ring > 0 {
			name = "ring=1000"
		}
		b.Run(name, func(b *testing.B) {
			br := brokertest.Run(b, brokertest.DefaultTestConfig())
			id := dispatchIdentity("ringbench")
			br.Engine().Create(id, address.Settings{RingSize: ring})
			c := brokertest.Connect(b, br.Addrs()[0])
			one := "SEND\ndestination:/queue/ringbench\n\n" + strings.Repeat("x", 100) + "\x00"
			if ring > 0 { // fill the ring first: every measured SEND then removes one
				c.Send(strings.Repeat(one, ring))
			}
			batch := []byte(strings.Repeat(one, 100))
			b.ResetTimer()
			start := time.Now()
			n := 0
			for n < b.N {
				if _, err := c.Conn.Write(batch); err != nil {
					b.Fatal(err)
				}
				n += 100
			}
			c.SendFrame("SEND", "", "destination:/queue/ringbench", "receipt:end")
			c.Expect(frame.CmdReceipt, "receipt-id:end")
			el := time.Since(start).Seconds()
			b.StopTimer()
			b.ReportMetric(float64(n)/el, "msgs/s")
		})
	}
}
