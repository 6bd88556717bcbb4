package memstore

import (
	"sort"
	"strings"

	"github.com/titan-broker/titan/internal/store"
)

// ScanMeta calls fn, in ascending key order, for every metadata key that starts with prefix
// ("" means every key), until fn returns false. value is valid only during fn. The keys
// are collected under the lock and fn is called without it, so fn may call the Store.
//
// Errors: store.ErrClosed.
func (s *Store) ScanMeta(prefix string, fn func(key string, value []byte) bool) error {
	if s.closed.Load() {
		return store.ErrClosed
	}
	if len(prefix) > store.MaxNameBytes {
		return store.CheckName(prefix)
	}
	type kv struct {
		k string
		v []byte
	}
	var all []kv
	s.d.mu.RLock()
	for k, v := range s.d.meta {
		if strings.HasPrefix(k, prefix) {
			all = append(all, kv{k, v})
		}
	}
	s.d.mu.RUnlock()
	sort.Slice(all, func(i, j int) bool { return all[i].k < all[j].k })
	for _, e := range all {
		if !fn(e.k, e.v) {
			break
		}
	}
	return nil
}

// DeleteMeta removes the metadata keys; a missing key is not an error.
//
// Errors: store.ErrClosed, store.ErrInvalidName.
func (s *Store) DeleteMeta(keys ...string) error {
	for _, k := range keys {
		if err := s.check(k); err != nil {
			return err
		}
	}
	s.d.mu.Lock()
	for _, k := range keys {
		delete(s.d.meta, k)
	}
	s.d.mu.Unlock()
	return nil
}
