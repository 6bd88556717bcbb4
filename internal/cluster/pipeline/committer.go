// Package pipeline stores cluster-mode SENDs for the router: the Persister (the store
// stage's pipelined publisher, router.Persister) and the Committer (transactions as
// JetStream atomic batches, router.BatchPublisher), over the queues and events-store
// adapters' Store port.
package pipeline

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/titan-broker/titan/internal/cluster"
	"github.com/titan-broker/titan/internal/dest"
	"github.com/titan-broker/titan/internal/message"
)

// Atomic batch publish headers (nats-server 2.12+, ADR-50; server/stream.go JSBatchId,
// JSBatchSeq, JSBatchCommit in v2.15.2).
const (
	batchIDHeader     = "Nats-Batch-Id"
	batchSeqHeader    = "Nats-Batch-Sequence"
	batchCommitHeader = "Nats-Batch-Commit"
)

// MaxAtomicBatch is the most messages one stream takes in one atomic batch: nats-server's
// default (streamDefaultMaxAtomicBatchSize, server/stream.go). A transaction with more
// SENDs to one stream is refused whole by the stream leader.
const MaxAtomicBatch = 1000

// JetStream error codes of atomic batches (server/errors.json).
const (
	errCodeBatchDuplicate = 10201 // atomic publish batch contains duplicate message id
	errCodeBatchTooLarge  = 10199 // atomic publish batch is too large
	errCodeBatchInflight  = 10210 // atomic publish too many inflight (50 per stream, 1000 per server)
)

// ErrTransactionTooLarge is returned by PublishBatch for a transaction with more than
// MaxAtomicBatch SENDs to one stream: the stream leader refused the batch, nothing of
// that stream's part was stored. Its Refusal (the ERROR frame's message header) is
// "transaction too large".
var ErrTransactionTooLarge error = tooLargeError{}

type tooLargeError struct{}

func (tooLargeError) Error() string {
	return "a transaction stores at most " + strconv.Itoa(MaxAtomicBatch) + " messages per stream in cluster mode"
}

// Refusal implements router.Refusal.
func (tooLargeError) Refusal() string { return "transaction too large" }

// PartialCommitError is returned by PublishBatch when a transaction spanning several
// streams failed after some streams' parts were stored: each stream's part is stored all
// or none, but parts of different streams are separate atomic batches.
type PartialCommitError struct {
	// Stored is the number of messages stored (the parts committed before the failure).
	Stored int
	// Err is the failure of the first part that was not stored.
	Err error
}

// Error says how many messages were stored before the failure, and the failure.
func (e *PartialCommitError) Error() string {
	return fmt.Sprintf("cluster: transaction partly stored (%d messages in earlier streams): %v", e.Stored, e.Err)
}

// Unwrap returns Err, so errors.Is and errors.As see the failure of the part not stored.
func (e *PartialCommitError) Unwrap() error { return e.Err }

// Committer publishes a STOMP transaction's SENDs to queues and events-store logs at
// COMMIT (the router's BatchPublisher port in cluster mode). The messages of one stream
// (a group's queues; a group's logs of one retention class; one ring size's queues) are
// one JetStream atomic batch: the stream leader stages them and proposes them to the
// stream's Raft group as one entry list, so they are stored all or none, in order, and
// the PubAck of the commit means all were stored by a quorum. Streams are committed one
// after the other in the order of their first SEND: across streams the COMMIT is not
// atomic (PartialCommitError).
//
// A batch whose Nats-Msg-Id was already stored (a SEND repeating an _AMQ_DUPL_ID seen
// through another node, or the broker's retry of a batch whose commit answer was lost) is
// refused whole by JetStream; the Committer then stores that stream's part message by
// message, each deduplicated by its id, so the repeat is stored once and the rest once.
// That fallback is not atomic: a crash in it leaves a prefix, which a retry completes.
type Committer struct {
	life context.Context // the node's Context: bounds every publish and its retries
	// DuplicateIDs (nil: the streams' windows only) recognises client duplicate ids beyond
	// the streams' Nats-Msg-Id window; set before the first use.
	DuplicateIDs *cluster.Duplicates

	q   Store
	e   Store
	js  jetstream.JetStream
	nc  *nats.Conn
	log *slog.Logger

	// hook, when set (tests), is called before each batch's commit message.
	hook func(stream string, n int)
}

// NewCommitter returns the committer over the node's queues and events-store adapters.
func NewCommitter(n *cluster.Node, q, e Store, log *slog.Logger) *Committer {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Committer{q: q, e: e, js: n.JetStream(), nc: n.Conn(), life: n.Context(), log: log}
}

// Batches reports whether id's SENDs are committed by PublishBatch (queues and
// events-store; events and requests are not stored).
func (c *Committer) Batches(id dest.Identity) bool {
	return id.Pattern == dest.PatternQueues || id.Pattern == dest.PatternEventsStore
}

type streamPart struct {
	p    cluster.Placement
	msgs []*nats.Msg
	eq   bool // events-store part (count on e)
}

// PublishBatch stores ms[i] on ids[i] (every id Batches), one atomic batch per stream,
// and returns once every part was acknowledged. Already-expired queue messages are
// dropped. cancel (the producer's connection closed) abandons the wait. Errors:
// ErrTransactionTooLarge, *PartialCommitError, or the first part's failure (nothing
// stored).
func (c *Committer) PublishBatch(ids []dest.Identity, ms []*message.Message, cancel <-chan struct{}) error {
	var parts []*streamPart
	index := make(map[string]*streamPart)
	for i, id := range ids {
		es := id.Pattern == dest.PatternEventsStore
		st := c.q
		if es {
			st = c.e
		}
		p, msg, dropped := st.Build(id, ms[i])
		if dropped {
			continue
		}
		sp := index[p.Stream]
		if sp == nil {
			sp = &streamPart{p: p, eq: es}
			index[p.Stream] = sp
			parts = append(parts, sp)
		}
		sp.msgs = append(sp.msgs, msg)
	}
	ctx, stop := cluster.WithCancel(c.life, cluster.PublishTimeout, cancel)
	defer stop()
	stored := 0
	for _, sp := range parts {
		if err := c.publishPart(ctx, sp, cancel); err != nil {
			c.log.Warn("transaction part not stored", "stream", sp.p.Stream, "messages", len(sp.msgs), "err", err)
			if stored > 0 {
				return &PartialCommitError{Stored: stored, Err: err}
			}
			return err
		}
		stored += len(sp.msgs)
	}
	return nil
}

// publishPart stores one stream's part: a single message as a plain publish, more as an
// atomic batch (retried whole with a new batch id through leader changes).
func (c *Committer) publishPart(ctx context.Context, sp *streamPart, cancel <-chan struct{}) error {
	st := c.q
	if sp.eq {
		st = c.e
	}
	if err := st.Streams().Ensure(ctx, sp.p.Config); err != nil {
		return err
	}
	// Client duplicate ids stored before, beyond the stream's own window, are left out
	// (acknowledged as duplicates); the part's others are recorded once it is stored.
	fresh := sp.msgs[:0:0]
	for _, msg := range sp.msgs {
		seen, err := c.DuplicateIDs.SeenMsg(ctx, msg)
		if err != nil {
			return err
		}
		if seen {
			c.count(sp, &jetstream.PubAck{Duplicate: true})
			continue
		}
		fresh = append(fresh, msg)
	}
	if len(fresh) < len(sp.msgs) {
		sp = &streamPart{p: sp.p, msgs: fresh, eq: sp.eq}
	}
	if err := c.publishFresh(ctx, sp, cancel); err != nil {
		return err
	}
	for _, msg := range sp.msgs {
		if err := c.DuplicateIDs.RecordMsg(ctx, msg); err != nil {
			return err
		}
	}
	return nil
}

// publishFresh stores the part's messages (publishPart without the duplicate id checks).
func (c *Committer) publishFresh(ctx context.Context, sp *streamPart, cancel <-chan struct{}) error {
	switch len(sp.msgs) {
	case 0:
		return nil
	case 1:
		ack, err := cluster.PublishRetrying(ctx, c.js, sp.msgs[0])
		if err == nil {
			c.count(sp, ack)
		}
		return err
	}
	for {
		err := c.atomic(ctx, sp, cancel)
		if err == nil {
			return nil
		}
		var apiErr *jetstream.APIError
		if errors.As(err, &apiErr) {
			switch apiErr.ErrorCode {
			case errCodeBatchDuplicate:
				return c.oneByOne(ctx, sp)
			case errCodeBatchTooLarge:
				return ErrTransactionTooLarge
			}
		}
		busy := errors.As(err, &apiErr) && apiErr.ErrorCode == errCodeBatchInflight
		if !busy && !cluster.Retryable(err) || ctx.Err() != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// oneByOne stores sp's messages one publish each (the duplicate fallback).
func (c *Committer) oneByOne(ctx context.Context, sp *streamPart) error {
	c.log.Info("transaction batch holds an already stored message id; storing its messages one by one", "stream", sp.p.Stream, "messages", len(sp.msgs))
	for _, msg := range sp.msgs {
		msg.Header.Del(batchIDHeader)
		msg.Header.Del(batchSeqHeader)
		msg.Header.Del(batchCommitHeader)
		ack, err := cluster.PublishRetrying(ctx, c.js, msg)
		if err != nil {
			return err
		}
		c.count(sp, ack)
	}
	return nil
}

func (c *Committer) count(sp *streamPart, ack *jetstream.PubAck) {
	if sp.eq {
		c.e.Count(ack)
	} else {
		c.q.Count(ack)
	}
}

// pubAckResponse is a JetStream publish answer (server JSPubAckResponse).
type pubAckResponse struct {
	Error *struct {
		Code        int    `json:"code"`
		ErrorCode   int    `json:"err_code"`
		Description string `json:"description"`
	} `json:"error"`
	Stream string `json:"stream"`
	Seq    uint64 `json:"seq"`
	Count  int    `json:"count"`
}

// errAbandoned is atomic's error when the producer went away before the commit message:
// the staged messages are never committed (the leader drops them after its batch timeout).
var errAbandoned = errors.New("cluster: transaction abandoned before its commit")

// atomic sends sp's messages as one atomic batch under a fresh batch id: the first as a
// request (the leader answers once it staged it, or refuses atomic batches at once), the
// middle ones as plain publishes on the same connection (ordered behind it), the last
// with Nats-Batch-Commit as a request whose answer is the batch's PubAck. A cancel or
// deadline seen before the commit message is sent abandons the batch: nothing is stored.
// Once the commit message is sent, the outcome of a lost answer is unknown (the retry of
// publishPart then settles it through the Nats-Msg-Ids).
func (c *Committer) atomic(ctx context.Context, sp *streamPart, cancel <-chan struct{}) error {
	var raw [12]byte
	_, _ = rand.Read(raw[:])
	id := hex.EncodeToString(raw[:])
	n := len(sp.msgs)
	for i, msg := range sp.msgs {
		msg.Header.Set(batchIDHeader, id)
		msg.Header.Set(batchSeqHeader, strconv.Itoa(i+1))
		msg.Header.Del(batchCommitHeader)
		switch {
		case i == n-1:
			msg.Header.Set(batchCommitHeader, "1")
			if c.hook != nil {
				c.hook(sp.p.Stream, n)
			}
			select {
			case <-cancel:
				return errAbandoned
			case <-ctx.Done():
				return errAbandoned
			default:
			}
			resp, err := c.request(ctx, msg)
			if err != nil {
				return err
			}
			if len(resp.Data) == 0 {
				return fmt.Errorf("cluster: empty answer to a batch commit")
			}
			var ack pubAckResponse
			if err := json.Unmarshal(resp.Data, &ack); err != nil {
				return fmt.Errorf("cluster: batch commit answer: %w", err)
			}
			if ack.Error != nil {
				return &jetstream.APIError{Code: ack.Error.Code, ErrorCode: jetstream.ErrorCode(ack.Error.ErrorCode), Description: ack.Error.Description}
			}
			for range n {
				c.count(sp, nil)
			}
			return nil
		case i == 0:
			resp, err := c.request(ctx, msg)
			if err != nil {
				return err
			}
			if len(resp.Data) > 0 {
				var ack pubAckResponse
				if json.Unmarshal(resp.Data, &ack) == nil && ack.Error != nil {
					return &jetstream.APIError{Code: ack.Error.Code, ErrorCode: jetstream.ErrorCode(ack.Error.ErrorCode), Description: ack.Error.Description}
				}
			}
		default:
			if err := c.nc.PublishMsg(msg); err != nil {
				return err
			}
		}
	}
	return nil
}

// request sends msg and waits for its answer, one bounded attempt.
func (c *Committer) request(ctx context.Context, msg *nats.Msg) (*nats.Msg, error) {
	actx, cancel := context.WithTimeout(ctx, cluster.PublishAttemptTimeout)
	defer cancel()
	resp, err := c.nc.RequestMsgWithContext(actx, msg)
	if err != nil {
		return nil, err
	}
	if len(resp.Data) == 0 && resp.Header.Get("Status") == "503" {
		return nil, nats.ErrNoResponders
	}
	return resp, nil
}

// Partial reports that some of the transaction's messages were stored (the router's
// BatchPublisher contract).
func (e *PartialCommitError) Partial() bool { return true }
