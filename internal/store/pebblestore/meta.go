package pebblestore

import (
	"fmt"

	"github.com/cockroachdb/pebble/v2"

	"github.com/titan-broker/titan/internal/store"
)

// ScanMeta calls fn, in ascending key order, for every metadata key that starts with prefix
// ("" means every key), until fn returns false. value is valid only during fn. It reads
// one Pebble iterator over the 'm' key range, so its cost is proportional to the keys under
// prefix, not to the store's records. Metadata set or deleted meanwhile may or may not be
// seen. Durable subscriptions (durable.Log) are listed this way.
//
// Errors: store.ErrClosed, store.ErrUnavailable while the store reopens, or a read error.
func (s *Store) ScanMeta(prefix string, fn func(key string, value []byte) bool) error {
	if len(prefix) > store.MaxNameBytes {
		return store.CheckName(prefix)
	}
	if err := s.enter(false); err != nil {
		return err
	}
	defer s.exit()
	lower := metaKey(prefix)
	upper := prefixUpperBound(lower)
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: upper})
	if err != nil {
		return wrapErr("scan meta", err)
	}
	for ok := it.First(); ok; ok = it.Next() {
		v, err := it.ValueAndErr()
		if err != nil {
			_ = it.Close()
			return wrapErr("scan meta", err)
		}
		if !fn(string(it.Key()[1:]), v) {
			break
		}
	}
	return wrapErr("scan meta", it.Close())
}

// DeleteMeta removes the metadata keys, in one synced batch (durable on return, like
// SetMeta). A missing key is not an error.
//
// Errors: store.ErrClosed, store.ErrInvalidName, or a sticky write error (the store goes
// down; an *store.UnavailableError).
func (s *Store) DeleteMeta(keys ...string) error {
	for _, k := range keys {
		if err := store.CheckName(k); err != nil {
			return err
		}
	}
	if len(keys) == 0 {
		return nil
	}
	if err := s.enter(true); err != nil {
		return err
	}
	defer s.exit()
	b := s.db.NewBatch()
	defer b.Close()
	for _, k := range keys {
		if err := b.Delete(metaKey(k), nil); err != nil {
			return wrapErr("delete meta", err)
		}
	}
	s.claimSync()
	if err := s.db.Apply(b, pebble.Sync); err != nil {
		return s.fail(wrapErr("delete meta", err))
	}
	if err := s.wal.faultErr(); err != nil {
		return s.fail(wrapErr("delete meta", err))
	}
	return nil
}

// prefixUpperBound returns the smallest key greater than every key starting with p: p with
// its last byte below 0xff incremented (and the rest dropped). p starts with prefixMeta, so
// the result is never nil.
func prefixUpperBound(p []byte) []byte {
	end := append([]byte(nil), p...)
	for i := len(end) - 1; i >= 0; i-- {
		if end[i] < 0xff {
			end[i]++
			return end[:i+1]
		}
	}
	panic(fmt.Sprintf("pebblestore: no upper bound for key prefix %q", p))
}
