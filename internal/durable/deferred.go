package durable

import (
	"errors"

	"github.com/titan-broker/titan/internal/store"
)

// Deletes the store refused while it was down, kept and applied once it is back (issue 30).

// deleteFailed handles a failed delete of seqs from stream. A store that is down refused it
// (and logged its state change once): the delete is kept, up to MaxDeferredDeletes, and
// retried once the store is OK again, so acknowledged messages do not come back after a
// later restart; it is logged at Debug. Any other failure is logged at Warn (the messages
// are delivered again after a restart).
func (l *Log) deleteFailed(stream string, seqs []uint64, err error) {
	if !errors.Is(err, store.ErrUnavailable) {
		l.log.Warn("delete failed", "stream", stream, "err", err)
		return
	}
	l.log.Debug("delete deferred: store unavailable", "stream", stream, "seqs", len(seqs), "err", err)
	l.deferMu.Lock()
	defer l.deferMu.Unlock()
	keep := min(len(seqs), MaxDeferredDeletes-l.deferredN)
	if keep > 0 {
		if l.deferred == nil {
			l.deferred = make(map[string][]uint64)
		}
		l.deferred[stream] = append(l.deferred[stream], seqs[:keep]...)
		l.deferredN += keep
		l.hasDeferred.Store(true)
		l.DeferredDeletes.Add(uint64(keep))
	}
	l.DroppedDeletes.Add(uint64(len(seqs) - keep))
}

// retryDeferred applies the deletes a down store refused, once it is OK again. It costs one
// atomic load when none are pending; it runs on the next delete.
func (l *Log) retryDeferred() {
	if !l.hasDeferred.Load() || l.st.Health().State != store.StateOK {
		return
	}
	l.deferMu.Lock()
	pending := l.deferred
	l.deferred, l.deferredN = nil, 0
	l.hasDeferred.Store(false)
	l.deferMu.Unlock()
	for stream, seqs := range pending {
		if err := l.st.Delete(stream, seqs...); err != nil {
			l.deleteFailed(stream, seqs, err)
			continue
		}
		l.Deleted.Add(uint64(len(seqs)))
	}
}

// WatchStore applies the deletes a down store refused (acknowledged, dropped or expired
// messages, kept up to MaxDeferredDeletes) as soon as the store is OK again, and syncs them,
// rather than with the next delete: an ACK taken while the store was down stays taken after a
// later restart, clean or not, even when no other message is acknowledged meanwhile. It waits
// on the store's Health().Changed and returns when stop is closed, or at once for a store
// whose state never changes. Run it on one goroutine.
func (l *Log) WatchStore(stop <-chan struct{}) {
	for {
		h := l.st.Health()
		if h.State == store.StateOK && l.hasDeferred.Load() {
			l.retryDeferred()
			if err := l.Sync(); err != nil {
				l.log.Debug("sync of deferred deletes", "err", err)
			}
		}
		if h.Changed == nil {
			return
		}
		select {
		case <-stop:
			return
		case <-h.Changed:
		}
	}
}

// FlushDeferred applies the deletes a down store refused, if it is OK now (a clean shutdown
// calls it before closing the store, which syncs them).
func (l *Log) FlushDeferred() { l.retryDeferred() }
