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
func openTimed(t *testing.T, fs vfs.FS) (*Store, time.Duration) {
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
func usedNames(t *testing.T, fs vfs.FS, n, keep int) {
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

// TestOpenCostPerEmptyStream checks that Open's per-stream check is cheap: with 5,000 empty
// streams it is not more than a small factor slower than with 10 (a fresh iterator per
// stream made it ~100x). Loose on purpose: no absolute timings.
func TestOpenCostPerEmptyStream(t *testing.T) {
	// Pebble's in-memory file system: no fsync cost while making the names, and Open's cost
	// is the adapter's own per-stream work.
	few, many := vfs.NewMem(), vfs.NewMem()
	usedNames(t, few, 10, 5)
	usedNames(t, many, 5000, 5)
	best := func(fs vfs.FS) time.Duration {
		var min time.Duration
		for range 3 {
			s, d := openTimed(t, fs)
			_ = s.Close()
			if min == 0 || d < min {
				min = d
			}
		}
		return min
	}
	tFew, tMany := best(few), best(many)
	t.Logf("Open: 10 used names %v, 5000 used names %v", tFew, tMany)
	if tMany > 20*tFew+200*time.Millisecond {
		t.Fatalf("Open with 5000 used names took %v, against %v with 10", tMany, tFew)
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
