package pebblestore

import (
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"
	"unsafe"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// groupCommitResult is what measureAppends observed.
type groupCommitResult struct {
	msgs     int
	walSyncs int64
	elapsed  time.Duration
	p99      time.Duration
}

func (r groupCommitResult) fsyncsPerMsg() float64 { return float64(r.walSyncs) / float64(r.msgs) }

// measureAppends runs producers goroutines, each appending perProducer records of size
// bytes, one per Append, on a fresh store on the OS file system, and counts WAL fsyncs.
func measureAppends(tb testing.TB, producers, perProducer, size int) groupCommitResult {
	tb.Helper()
	cfs := newCountingFS(vfs.Default)
	s, err := Open(tb.TempDir(), Options{FS: cfs})
	if err != nil {
		tb.Fatal(err)
	}
	defer func() {
		if err := s.Close(); err != nil {
			tb.Error(err)
		}
	}()
	rec := make([]byte, size)
	lat := make([][]time.Duration, producers)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for p := range producers {
		lat[p] = make([]time.Duration, 0, perProducer)
		wg.Go(func() {
			<-start
			for range perProducer {
				t0 := time.Now()
				if _, err := s.Append("bench", rec); err != nil {
					tb.Error(err)
					return
				}
				lat[p] = append(lat[p], time.Since(t0))
			}
		})
	}
	before := cfs.walSyncs.Load()
	t0 := time.Now()
	close(start)
	wg.Wait()
	r := groupCommitResult{
		msgs:     producers * perProducer,
		walSyncs: cfs.walSyncs.Load() - before,
		elapsed:  time.Since(t0),
	}
	all := slices.Concat(lat...)
	slices.Sort(all)
	if len(all) > 0 {
		r.p99 = all[(len(all)*99)/100]
	}
	return r
}

// TestGroupCommit measures how well the group commit shares WAL fsyncs between concurrent
// synced Appends. One producer needs one fsync per message; with N producers each awaiting
// its own Append, each fsync must serve (nearly) all N, not N/2: the committer holds the next
// group open for the producers the last landing released (gather), instead of splitting
// them into two alternating groups.
func TestGroupCommit(t *testing.T) {
	if testing.Short() {
		t.Skip("skipped in -short mode: measures fsyncs on the real disk")
	}
	for _, producers := range []int{1, 4, 16} {
		t.Run(fmt.Sprintf("producers=%d", producers), func(t *testing.T) {
			r := measureAppends(t, producers, 1600/producers, 256)
			t.Logf("%d producers: %d msgs, %d WAL fsyncs, %.3f fsyncs/msg, %.0f msgs/s, p99 %v",
				producers, r.msgs, r.walSyncs, r.fsyncsPerMsg(), float64(r.msgs)/r.elapsed.Seconds(), r.p99)
			switch {
			case producers == 1 && (r.fsyncsPerMsg() < 0.99 || r.fsyncsPerMsg() > 1.05):
				t.Errorf("one producer: %.3f fsyncs/msg, want 1 (every Append waits for its own fsync)", r.fsyncsPerMsg())
			case producers == 4 && r.fsyncsPerMsg() > 0.4:
				t.Errorf("4 producers: %.3f fsyncs/msg, want <= 0.4 (0.25 when every fsync serves all four; 0.5 means they alternate between two groups)", r.fsyncsPerMsg())
			case producers == 16 && r.fsyncsPerMsg() > 0.1:
				t.Errorf("16 producers: %.3f fsyncs/msg, want <= 0.1 (0.0625 when every fsync serves all sixteen; 0.125 means they alternate between two groups)", r.fsyncsPerMsg())
			}
		})
	}
}

// TestGroupBuffersReusedAcrossAnIdleCommit is the rule that every group reuses the buffers
// of an earlier one, also after a commit that landed while no group was filling (a producer
// between bursts). At most two groups are in use, one in flight and one filling: when both
// land with nothing appended meanwhile, the two groups filled next (one in flight, one
// filling behind it) must both get recycled buffers rather than new ones.
func TestGroupBuffersReusedAcrossAnIdleCommit(t *testing.T) {
	s := openT(t, t.TempDir(), Options{})
	defer closeT(t, s)
	rec := make([]byte, 100)
	filled := func() *group {
		s.gmu.Lock()
		defer s.gmu.Unlock()
		g := s.newGroupLocked()
		g.arena = append(g.arena, rec...)
		g.recs = append(g.recs, pendingRecord{n: len(rec)})
		return g
	}
	s.gmu.Lock()
	s.spares = nil // whatever Open's own writes left
	s.gmu.Unlock()
	g1, g2 := filled(), filled() // one in flight, one filling behind it
	a, b := unsafe.SliceData(g1.arena), unsafe.SliceData(g2.arena)
	s.recycle(g1) // g1 lands; g2 is taken and lands too, with nothing appended meanwhile
	s.recycle(g2)
	g3, g4 := filled(), filled() // the next burst: again one in flight, one filling
	c, d := unsafe.SliceData(g3.arena), unsafe.SliceData(g4.arena)
	if c == d || (c != a && c != b) || (d != a && d != b) {
		t.Fatalf("the next burst's groups have arenas %p and %p, want the recycled %p and %p", c, d, a, b)
	}
	// A third spare is not kept: buffers beyond two groups' are let go.
	s.recycle(g3)
	s.recycle(g4)
	s.recycle(&group{states: map[*stream]streamState{}, pend: map[*stream]*pendStream{}, arena: slices.Clone(rec)})
	s.gmu.Lock()
	n := len(s.spares)
	s.gmu.Unlock()
	if n != maxSpares {
		t.Fatalf("%d spare groups kept, want at most %d", n, maxSpares)
	}
}
