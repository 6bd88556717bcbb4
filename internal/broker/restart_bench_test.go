package broker_test

import (
	"context"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/titan-broker/titan/internal/broker"
	"github.com/titan-broker/titan/internal/dest"
	"github.com/titan-broker/titan/internal/durable"
	"github.com/titan-broker/titan/internal/message"
	"github.com/titan-broker/titan/internal/store/pebblestore"
)

// fillQueues stores one message on each of n queues (q0 … q<n-1>) in dir's Pebble store,
// 1,000 queues per atomic batch, and closes the store.
func fillQueues(tb testing.TB, dir string, n int) {
	tb.Helper()
	st, err := pebblestore.Open(dir, pebblestore.Options{})
	if err != nil {
		tb.Fatal(err)
	}
	l := durable.New(st, nil)
	const batch = 1000
	ids := make([]dest.Identity, 0, batch)
	ms := make([]*message.Message, 0, batch)
	for i := range n {
		ch := "q" + strconv.Itoa(i)
		ids = append(ids, dest.Identity{Group: "default", Pattern: dest.PatternQueues, Channel: ch})
		ms = append(ms, &message.Message{ID: strconv.Itoa(i), Destination: "/queue/" + ch, Body: []byte("stored")})
		if len(ids) == batch || i == n-1 {
			if err := l.PersistAll(ids, ms); err != nil {
				tb.Fatal(err)
			}
			ids, ms = ids[:0], ms[:0]
		}
	}
	if err := st.Close(); err != nil {
		tb.Fatal(err)
	}
}

// BenchmarkRestartStoredQueues measures a broker start (New and Start: store open, recovery,
// listeners) over a data directory holding 100,000 queues of one stored message each, the
// issue-30 case. ms/start is the wall time to ready; heap-MB the live heap after the start
// (after a GC), the part of RSS the broker controls.
func BenchmarkRestartStoredQueues(b *testing.B) {
	const queues = 100_000
	dir := b.TempDir()
	fillQueues(b, dir, queues)
	cfg := durableConfig(dir)
	b.ReportAllocs()
	b.ResetTimer()
	var heap uint64
	for range b.N {
		t0 := time.Now()
		br, err := broker.New(cfg, broker.Options{})
		if err != nil {
			b.Fatal(err)
		}
		if err := br.Start(); err != nil {
			b.Fatal(err)
		}
		el := time.Since(t0)
		b.StopTimer()
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		heap = max(heap, ms.HeapAlloc)
		b.ReportMetric(float64(el.Milliseconds()), "ms/start")
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		if err := br.Shutdown(ctx); err != nil {
			b.Fatal(err)
		}
		cancel()
		b.StartTimer()
	}
	b.ReportMetric(float64(heap)/(1<<20), "heap-MB")
}
