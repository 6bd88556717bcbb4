package broker

import (
	"fmt"
	"log/slog"
	"os"

	"github.com/titan-broker/titan/internal/config"
	"github.com/titan-broker/titan/internal/store"
	"github.com/titan-broker/titan/internal/store/memstore"
	"github.com/titan-broker/titan/internal/store/pebblestore"
)

// openStore opens the configured store: the embedded Pebble store in DataDir (created when
// missing) or the in-memory store.
func openStore(c config.Store, log *slog.Logger) (store.Store, error) {
	if c.Type == "memory" {
		return memstore.New(), nil
	}
	if err := os.MkdirAll(c.DataDir, 0o750); err != nil && !store.IsDiskFault(err) {
		// A full or read-only file system is not fatal: the store starts down and recovers.
		return nil, fmt.Errorf("broker: data directory %s: %w", c.DataDir, err)
	}
	st, err := pebblestore.Open(c.DataDir, pebblestore.Options{Logger: log.With("component", "pebble"), AcceptDataLoss: c.AcceptDataLoss,
		MinFreeBytes: c.MinFreeBytes, ResumeFreeBytes: c.ResumeFreeBytes})
	if err != nil {
		// The store's errors say what to do (store.ErrLocked names the other process).
		return nil, fmt.Errorf("broker: opening store in %s: %w", c.DataDir, err)
	}
	return st, nil
}
