package memstore_test

import (
	"sync"
	"testing"

	"github.com/titan-broker/titan/internal/store"
	"github.com/titan-broker/titan/internal/store/memstore"
	"github.com/titan-broker/titan/internal/store/storetest"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func TestConformance(t *testing.T) {
	var mu sync.Mutex
	last := map[*testing.T]*memstore.Store{}
	storetest.Run(t, func(t *testing.T) store.Store {
		mu.Lock()
		defer mu.Unlock()
		s := memstore.New()
		if prev := last[t]; prev != nil {
			var err error
			if s, err = prev.Reopen(); err != nil {
				t.Fatal(err)
			}
		}
		last[t] = s
		return s
	})
}

func TestReopenRequiresClose(t *testing.T) {
	s := memstore.New()
	if _, err := s.Reopen(); err == nil {
		t.Fatal("Reopen of an open store succeeded")
	}
}
