package broker_test

import (
	"bytes"
	"net"
	"runtime"
	"testing"
	"time"

	"github.com/titan-broker/titan/internal/brokertest"
)

// BenchmarkIdleConnection opens b.N STOMP connections (CONNECT with heart-beat:10000,10000,
// then silence) to a broker in this process and reports what the process holds per idle
// connection: heap-B/conn (Go heap in use after a GC, client side included: one net.Conn
// and its read buffer) and stack-B/conn (goroutine stacks, the broker's alone: the client
// side runs no goroutine per connection). scripts/idle-memory measures the same against a
// real titan process (issue 13: ≤ 8 KiB per idle connection at 10,000 connections).
func BenchmarkIdleConnection(b *testing.B) {
	cfg := brokertest.DefaultTestConfig()
	cfg.Limits.MaxConnectionsPerAddress = -1 // every connection comes from 127.0.0.1
	br := brokertest.Run(b, cfg)
	addr := br.Addrs()[0]
	connect := []byte("CONNECT\naccept-version:1.2\nhost:localhost\nheart-beat:10000,10000\n\n\x00")
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	b.ReportAllocs()
	b.ResetTimer()
	conns := make([]net.Conn, 0, b.N)
	buf := make([]byte, 512)
	for range b.N {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			b.Fatal(err)
		}
		conns = append(conns, c)
		if _, err := c.Write(connect); err != nil {
			b.Fatal(err)
		}
		_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
		var got []byte
		for !bytes.Contains(got, []byte{0}) {
			k, err := c.Read(buf)
			if err != nil {
				b.Fatal(err)
			}
			got = append(got, buf[:k]...)
		}
		if !bytes.HasPrefix(got, []byte("CONNECTED\n")) {
			b.Fatalf("CONNECT answered with %q", got)
		}
	}
	b.StopTimer()
	time.Sleep(100 * time.Millisecond) // the sessions' writers finish writing CONNECTED
	runtime.GC()
	runtime.ReadMemStats(&after)
	n := float64(b.N)
	b.ReportMetric(float64(after.HeapInuse-before.HeapInuse)/n, "heap-B/conn")
	b.ReportMetric(float64(after.StackInuse-before.StackInuse)/n, "stack-B/conn")
	for _, c := range conns {
		_ = c.Close()
	}
}
