package pebblestore

import (
	"fmt"
	"slices"
	"strings"
	"testing"
)

// ScanStreams visits exactly the streams under its prefix, each once with its count, then
// its records in sequence order as Scan gives them (checkpoints and deleted records left
// out); a declined stream's records are skipped; the result survives a reopen.
func TestScanStreamsMatchesScan(t *testing.T) {
	lowCheckpoints(t, 3) // checkpoint keys sort among the records
	dir := t.TempDir()
	s, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	names := []string{"queue/a", "queue/bb", "queue/a\x00b", "events/x", "queue/empty", "queue/skip"}
	for i := range 30 { // with these, "queue/" streams are sought one by one, "" walks all
		names = append(names, fmt.Sprintf("other/%d", i))
	}
	for i, n := range names {
		for j := range 2 + i*3 {
			if _, err := s.Append(n, fmt.Appendf(nil, "%s-%d", n, j)); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := s.Delete("queue/bb", 2, 5); err != nil {
		t.Fatal(err)
	}
	if err := s.Delete("queue/empty", 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14); err != nil {
		t.Fatal(err)
	}
	check := func(s *Store, prefix string) {
		t.Helper()
		type rec struct {
			seq  uint64
			data string
		}
		got := map[string][]rec{}
		counts := map[string]int64{}
		var cur string
		err := s.ScanStreams(prefix, func(name string, count int64) bool {
			if !strings.HasPrefix(name, "queue/") {
				return false
			}
			if _, dup := counts[name]; dup {
				t.Errorf("stream %q visited twice", name)
			}
			counts[name], cur = count, name
			return name != "queue/skip"
		}, func(seq uint64, data []byte) bool {
			got[cur] = append(got[cur], rec{seq, string(data)})
			return true
		})
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range []string{"queue/a", "queue/bb", "queue/a\x00b"} {
			var want []rec
			if err := s.Scan(n, 1, func(seq uint64, data []byte) bool {
				want = append(want, rec{seq, string(data)})
				return true
			}); err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got[n], want) || counts[n] != int64(len(want)) {
				t.Errorf("%q: scanned %v (count %d), Scan gives %v", n, got[n], counts[n], want)
			}
		}
		if _, ok := counts["events/x"]; ok {
			t.Error("a stream outside the prefix was visited")
		}
		if len(got["queue/skip"]) != 0 || len(got["queue/empty"]) != 0 {
			t.Errorf("declined or empty stream gave records: %v %v", got["queue/skip"], got["queue/empty"])
		}
		if c, ok := counts["queue/empty"]; ok && c != 0 {
			t.Errorf("empty stream count %d", c)
		}
	}
	check(s, "queue/")
	check(s, "")
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s, err = Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = s.Close() }()
	check(s, "queue/")
	check(s, "")
	var logs []string
	if err := s.ScanStreams("events/", func(name string, _ int64) bool { logs = append(logs, name); return false },
		func(uint64, []byte) bool { t.Error("declined stream's record"); return true }); err != nil || !slices.Equal(logs, []string{"events/x"}) {
		t.Fatalf("events/ streams %q, %v", logs, err)
	}
	n := 0 // a record callback returning false ends the scan
	if err := s.ScanStreams("", func(string, int64) bool { return true }, func(uint64, []byte) bool { n++; return false }); err != nil || n != 1 {
		t.Fatalf("stopped scan: %d records, %v", n, err)
	}
}
