package client_test

import (
	"context"
	"testing"
	"time"

	"github.com/titan-broker/titan/client"
	"github.com/titan-broker/titan/internal/brokertest"
)

// BenchmarkSend measures Send against an in-process broker over loopback TCP: with a
// RECEIPT per message (a round trip each) and pipelined without one.
func BenchmarkSend(b *testing.B) {
	cfg := brokertest.DefaultTestConfig()
	br := brokertest.Run(b, cfg)
	ctx := context.Background()
	c, err := client.Dial(ctx, br.Addrs()[0])
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	body := make([]byte, 256)
	for _, tc := range []struct {
		name string
		opts []client.SendOption
	}{
		{"receipt", nil},
		{"no-receipt", []client.SendOption{client.WithoutReceipt()}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			start := time.Now()
			for b.Loop() {
				if _, err := c.Send(ctx, "", "/topic/bench", body, tc.opts...); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "msgs/s")
		})
	}
}

// BenchmarkDeliver measures MESSAGE frames read, parsed and handed to a handler.
func BenchmarkDeliver(b *testing.B) {
	cfg := brokertest.DefaultTestConfig()
	br := brokertest.Run(b, cfg)
	ctx := context.Background()
	c, err := client.Dial(ctx, br.Addrs()[0])
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	got := make(chan struct{}, 1024)
	if _, err := c.Subscribe("", "/topic/deliver", func(*client.Message) { got <- struct{}{} }); err != nil {
		b.Fatal(err)
	}
	body := make([]byte, 256)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := c.Send(ctx, "", "/topic/deliver", body, client.WithoutReceipt()); err != nil {
			b.Fatal(err)
		}
		<-got
	}
}
