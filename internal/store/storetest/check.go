package storetest

import (
	"errors"
	"fmt"

	"github.com/titan-broker/titan/internal/store"
)

// Checker is implemented by adapters that can verify their internal invariants (counters
// against records, persisted high-water marks, key layout). CheckInvariants calls it.
type Checker interface {
	// Check returns a description of the first violated invariant, or nil.
	Check() error
}

// CheckInvariants verifies what every Store must satisfy at rest, through the port only, and
// then calls s.Check when s implements Checker. It returns every violation found, joined.
//
// For each stream listed by Streams: names are unique and sorted; Scan from 0 yields
// ascending sequences in [First, Last]; the number and total size of the records equal Count
// and Bytes; First is the first record's seq, or Last+1 when the stream is empty.
//
// It must not run concurrently with writes to s. It is O(records).
func CheckInvariants(s store.Store) error {
	infos, err := s.Streams()
	if err != nil {
		return fmt.Errorf("store streams: %w", err)
	}
	var errs []error
	for i, in := range infos {
		if i > 0 && infos[i-1].Name >= in.Name {
			errs = append(errs, fmt.Errorf("streams not sorted/unique at %q, %q", infos[i-1].Name, in.Name))
		}
		var (
			count, bytes int64
			prev, first  uint64
			bad          error
		)
		err := s.Scan(in.Name, 0, func(seq uint64, data []byte) bool {
			if seq <= prev || seq > in.Last {
				bad = fmt.Errorf("stream %q: seq %d after %d (last %d)", in.Name, seq, prev, in.Last)
				return false
			}
			if first == 0 {
				first = seq
			}
			prev = seq
			count++
			bytes += int64(len(data))
			return true
		})
		if err != nil {
			errs = append(errs, fmt.Errorf("stream %q: Scan: %w", in.Name, err))
			continue
		}
		if bad != nil {
			errs = append(errs, bad)
			continue
		}
		if count != in.Count || bytes != in.Bytes {
			errs = append(errs, fmt.Errorf("stream %q: scanned %d records / %d bytes, Streams says %d / %d",
				in.Name, count, bytes, in.Count, in.Bytes))
		}
		wantFirst := in.Last + 1
		if count > 0 {
			wantFirst = first
		}
		if in.First != wantFirst {
			errs = append(errs, fmt.Errorf("stream %q: First = %d, want %d", in.Name, in.First, wantFirst))
		}
	}
	if c, ok := s.(Checker); ok {
		if err := c.Check(); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
