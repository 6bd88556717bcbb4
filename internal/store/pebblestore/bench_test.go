package pebblestore

import (
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// BenchmarkAppend measures durable appends on the OS file system: producers goroutines each
// Append one 256-byte record at a time and wait for its fsync. It reports throughput
// (msgs/s), WAL fsyncs per message (group commit: below 1 means shared fsyncs) and the
// 99th-percentile Append latency in milliseconds (p99-ms).
func BenchmarkAppend(b *testing.B) {
	const recordBytes = 256
	for _, producers := range []int{1, 4, 16} {
		b.Run(fmt.Sprintf("producers=%d", producers), func(b *testing.B) {
			cfs := newCountingFS(vfs.Default)
			s, err := Open(b.TempDir(), Options{FS: cfs})
			if err != nil {
				b.Fatal(err)
			}
			rec := make([]byte, recordBytes)
			lat := make([][]time.Duration, producers)
			var next atomic.Int64
			var wg sync.WaitGroup
			b.SetBytes(recordBytes)
			b.ReportAllocs()
			b.ResetTimer()
			syncs0 := cfs.walSyncs.Load()
			start := time.Now()
			for p := range producers {
				wg.Go(func() {
					for next.Add(1) <= int64(b.N) {
						t0 := time.Now()
						if _, err := s.Append("bench", rec); err != nil {
							b.Error(err)
							return
						}
						lat[p] = append(lat[p], time.Since(t0))
					}
				})
			}
			wg.Wait()
			elapsed := time.Since(start)
			b.StopTimer()
			syncs := cfs.walSyncs.Load() - syncs0
			all := slices.Concat(lat...)
			slices.Sort(all)
			b.ReportMetric(float64(b.N)/elapsed.Seconds(), "msgs/s")
			b.ReportMetric(float64(syncs)/float64(b.N), "fsyncs/msg")
			if len(all) > 0 {
				b.ReportMetric(float64(all[len(all)*99/100].Microseconds())/1000, "p99-ms")
			}
			if err := s.Close(); err != nil {
				b.Fatal(err)
			}
		})
	}
}

// BenchmarkAppendLazyDelete measures the write-behind path of a queue message acknowledged
// before its group commit: AppendAsyncLazy of one 100-byte record, then Delete of it while
// it still waits in the current group (dropped: no write, no delete), with the waits of
// every 256 records called together (which commits what is left of their group). One op is
// one record; it is the store's per-message cost in a busy queue.
func BenchmarkAppendLazyDelete(b *testing.B) {
	s, err := Open(b.TempDir(), Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = s.Close() }()
	rec := make([]byte, 100)
	waits := make([]func() error, 0, 256)
	flush := func() {
		for _, w := range waits {
			if err := w(); err != nil {
				b.Fatal(err)
			}
		}
		waits = waits[:0]
	}
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		seq, w, err := s.AppendAsyncLazy("queue/default/bench", rec)
		if err != nil {
			b.Fatal(err)
		}
		if err := s.Delete("queue/default/bench", seq); err != nil {
			b.Fatal(err)
		}
		if waits = append(waits, w); len(waits) == cap(waits) {
			flush()
		}
	}
	flush()
}
