package router

import (
	"errors"

	"github.com/titan-broker/titan/internal/dest"
	"github.com/titan-broker/titan/internal/message"
)

// BatchPublisher is the transaction port of a pattern adapter that can store several
// messages at once (cluster mode: cluster.Committer, JetStream atomic batches per stream).
// When Options.Batch is set, COMMIT hands every buffered SEND whose destination Batches to
// one PublishBatch call, after the SENDs' admission stages (duplicate detection,
// destination limits) and before any other effect of the transaction (ACK/NACKs, events):
// when it fails, none of the transaction's effects happen and the COMMIT gets an ERROR.
type BatchPublisher interface {
	// Batches reports whether SENDs to id are committed through PublishBatch.
	Batches(id dest.Identity) bool
	// PublishBatch stores ms[i] on ids[i] and returns once stored (what "all or none"
	// covers is the implementation's: cluster.Committer's is per stream). An error that
	// has a Partial() bool method returning true says some messages were stored. cancel
	// closes when the producer's connection does.
	PublishBatch(ids []dest.Identity, ms []*message.Message, cancel <-chan struct{}) error
}

// batchedSends collects a COMMIT's SENDs for Options.Batch.
type batchedSends struct {
	ids  []dest.Identity
	msgs []*message.Message
}

// take adds the SEND to the batch when b Batches its destination.
func (s *batchedSends) take(b BatchPublisher, id dest.Identity, m *message.Message) bool {
	if b == nil || !b.Batches(id) {
		return false
	}
	s.ids = append(s.ids, id)
	s.msgs = append(s.msgs, m)
	return true
}

// commit publishes the batch (if any); on failure it records the COMMIT's ERROR and
// returns false.
func (s *batchedSends) commit(c *Context, b BatchPublisher) bool {
	if len(s.msgs) == 0 {
		return true
	}
	err := b.PublishBatch(s.ids, s.msgs, c.Conn.Client.Done())
	if err == nil {
		return true
	}
	var partial interface{ Partial() bool }
	if errors.As(err, &partial) && partial.Partial() {
		c.failWith("transaction partly stored", "the broker stored the transaction's messages of some destinations only: "+err.Error(), errors.Join(ErrNotStored, err))
		return false
	}
	c.failWith(storeRefusal(err), "the broker could not store the transaction's messages; none was accepted: "+err.Error(), errors.Join(ErrNotStored, err))
	return false
}
