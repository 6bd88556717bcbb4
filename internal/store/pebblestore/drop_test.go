package pebblestore

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/titan-broker/titan/internal/store"
)

// openTimed opens dir and returns the store and how long Open took.
func openTimed(t testing.TB, fs vfs.FS) (*Store, time.Duration) {
	t.Helper()
	start := time.Now()
	s, err := Open("db", Options{FS: fs})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	return s, time.Since(start)
}

// usedNames makes n streams in dir that each held one record, now deleted (names used,
// nothing stored), plus keep streams that still hold one record.
func usedNames(t testing.TB, fs vfs.FS, n, keep int) {
	t.Helper()
	s, _ := openTimed(t, fs)
	var wg sync.WaitGroup
	const workers = 64 // concurrent Appends share fsyncs (group commit)
	errs := make(chan error, workers)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < n; i += workers {
				name := fmt.Sprintf("queue/default/p/used-%d", i)
				seq, err := s.Append(name, []byte("x"))
				if err == nil {
					err = s.Delete(name, seq)
				}
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	for i := range keep {
		if _, err := s.Append(fmt.Sprintf("queue/default/p/kept-%d", i), []byte("y")); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestOpenListsUsedNames: Open loads every stream whose name was used, the ones emptied by
// Delete included (Count 0, the next sequence kept), so that the broker's start-up can find
// and Drop them; BenchmarkOpenUsedNames measures what they cost Open.
func TestOpenListsUsedNames(t *testing.T) {
	fs := vfs.NewMem()
	usedNames(t, fs, 500, 5)
	s, _ := openTimed(t, fs)
	defer s.Close()
	sts, err := s.Streams()
	if err != nil {
		t.Fatal(err)
	}
	var empty, kept int
	for _, st := range sts {
		switch st.Count {
		case 0:
			empty++
		case 1:
			kept++
		}
	}
	if empty != 500 || kept != 5 || len(sts) != 505 {
		t.Fatalf("Streams after Open: %d streams, %d empty, %d holding one record; want 505, 500, 5", len(sts), empty, kept)
	}
}

// BenchmarkOpenUsedNames measures Open over Pebble's in-memory file system (no fsync cost;
// Open's cost is the adapter's own per-stream work) with 10 and with 5,000 used names that
// hold nothing: Open's per-stream check must stay cheap (a fresh iterator per stream made
// the 5,000-name Open ~100x the 10-name one). Compare the two with benchstat.
func BenchmarkOpenUsedNames(b *testing.B) {
	for _, n := range []int{10, 5000} {
		b.Run(fmt.Sprintf("names=%d", n), func(b *testing.B) {
			fs := vfs.NewMem()
			usedNames(b, fs, n, 5)
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				s, _ := openTimed(b, fs)
				b.StopTimer()
				_ = s.Close()
				b.StartTimer()
			}
		})
	}
}

// TestDrop: an empty stream is forgotten (not listed, not loaded by Open) and starts again at
// sequence 1; a stream holding records is refused with ErrNotEmpty.
func TestDrop(t *testing.T) {
	fs := vfs.NewMem()
	s, _ := openTimed(t, fs)
	seq, err := s.Append("a", []byte("1"))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Drop("a"); !errors.Is(err, store.ErrNotEmpty) {
		t.Fatalf("Drop of a stream with a record: %v, want ErrNotEmpty", err)
	}
	if err := s.Delete("a", seq); err != nil {
		t.Fatal(err)
	}
	if err := s.Drop("a"); err != nil {
		t.Fatalf("Drop: %v", err)
	}
	if err := s.Drop("never"); err != nil {
		t.Fatalf("Drop of an unknown stream: %v", err)
	}
	sts, _ := s.Streams()
	if len(sts) != 0 {
		t.Fatalf("Streams after Drop: %+v", sts)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s, _ = openTimed(t, fs)
	defer s.Close()
	sts, _ = s.Streams()
	if len(sts) != 0 {
		t.Fatalf("Streams after Drop and reopen: %+v", sts)
	}
	if seq, err = s.Append("a", []byte("2")); err != nil || seq != 1 {
		t.Fatalf("Append after Drop: seq %d, %v; want 1", seq, err)
	}
}

// TestDropMany: one Drop forgets every empty stream it names in one write, leaves a stream
// holding records (ErrNotEmpty once the others are dropped), skips unknown and repeated
// names, and the result survives a reopen.
func TestDropMany(t *testing.T) {
	fs := vfs.NewMem()
	s, _ := openTimed(t, fs)
	var names []string
	for i := range 50 {
		name := fmt.Sprintf("q%d", i)
		seq, err := s.Append(name, []byte("x"))
		if err != nil {
			t.Fatal(err)
		}
		if i%10 != 0 {
			if err := s.Delete(name, seq); err != nil {
				t.Fatal(err)
			}
		}
		names = append(names, name)
	}
	err := s.Drop(append(names, "never", "q1")...)
	if !errors.Is(err, store.ErrNotEmpty) {
		t.Fatalf("Drop of 45 empty and 5 full streams: %v, want ErrNotEmpty", err)
	}
	check := func(when string) {
		sts, err := s.Streams()
		if err != nil {
			t.Fatal(err)
		}
		var left []string
		for _, st := range sts {
			left = append(left, st.Name)
		}
		if want := []string{"q0", "q10", "q20", "q30", "q40"}; !slices.Equal(left, want) {
			t.Fatalf("streams %s: %q, want %q", when, left, want)
		}
	}
	check("after Drop")
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s, _ = openTimed(t, fs)
	defer s.Close()
	check("after reopen")
}
