package cluster

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Duplicate windows by need (issue 28). Every stored message carries a Nats-Msg-Id, so
// JetStream keeps an entry for it in its stream's duplicate table for the stream's
// Duplicates window, on every replica. A broker-generated id only has to survive the
// broker's own retry of a publish whose PubAck was lost (PublishTimeout, through a leader
// change), so the streams' window is BrokerIDWindow. A client's duplicate id
// (_AMQ_DUPL_ID, Artemis's duplicate detection) must be recognised for
// titan.duplicate-detection.window: beyond the stream's short window it is recognised by
// Duplicates, a replicated key-value bucket that holds one key per client duplicate id
// for that window, and nothing for any other message.

// BrokerIDWindow is the streams' Nats-Msg-Id window: PublishTimeout (the longest a
// publish is retried) with room to spare. A configured duplicate-detection window shorter
// than it is used as is.
const BrokerIDWindow = 2 * PublishTimeout

// StreamWindow returns the streams' duplicate window for a configured
// duplicate-detection window (0: DefaultDuplicateWindow).
func StreamWindow(configured time.Duration) time.Duration {
	if configured <= 0 {
		configured = DefaultDuplicateWindow
	}
	return min(configured, BrokerIDWindow)
}

// clientIDPrefix starts the Nats-Msg-Id of a message with a client duplicate id (MsgID).
const clientIDPrefix = "dupl:"

// DuplicateKey returns the key of msg's client duplicate id, ok false when msg carries
// none (its Nats-Msg-Id is broker-generated).
func DuplicateKey(msg *nats.Msg) (key string, ok bool) {
	if msg == nil || msg.Header == nil {
		return "", false
	}
	return strings.CutPrefix(msg.Header.Get(jetstream.MsgIDHeader), clientIDPrefix)
}

// DuplicatesBucket is the key-value bucket of client duplicate ids.
const DuplicatesBucket = "TITAN_DUPL"

// Duplicates recognises client duplicate ids (_AMQ_DUPL_ID) for the configured window,
// cluster-wide: a key per id in DuplicatesBucket (replicated like the streams, keys expire
// after the window). The bucket is made on first use. Safe for concurrent use.
type Duplicates struct {
	js       jetstream.JetStream
	replicas int
	window   time.Duration

	mu sync.Mutex
	kv jetstream.KeyValue // guarded by mu; nil until made
}

// NewDuplicates returns the client duplicate id store of n for window (0:
// DefaultDuplicateWindow).
func NewDuplicates(n *Node, window time.Duration) *Duplicates {
	if window <= 0 {
		window = DefaultDuplicateWindow
	}
	return &Duplicates{js: n.js, replicas: n.cfg.Replicas, window: window}
}

// Long reports whether client ids need the bucket: the window is longer than the streams'.
func (d *Duplicates) Long() bool { return d != nil && d.window > StreamWindow(d.window) }

func (d *Duplicates) bucket(ctx context.Context) (jetstream.KeyValue, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.kv != nil {
		return d.kv, nil
	}
	var kv jetstream.KeyValue
	err := Attempt(ctx, func(ctx context.Context) error {
		var err error
		kv, err = d.js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{
			Bucket: DuplicatesBucket, TTL: d.window, Replicas: d.replicas, Storage: jetstream.FileStorage,
			Description: "Titan: client duplicate ids (_AMQ_DUPL_ID) within duplicate-detection.window",
		})
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("cluster: duplicate id bucket: %w", err)
	}
	d.kv = kv
	return kv, nil
}

// Seen reports whether the client duplicate id key was stored within the window.
// Errors: the bucket's, after retries until ctx ends.
func (d *Duplicates) Seen(ctx context.Context, key string) (bool, error) {
	if !d.Long() {
		return false, nil
	}
	kv, err := d.bucket(ctx)
	if err != nil {
		return false, err
	}
	err = Attempt(ctx, func(ctx context.Context) error {
		_, err := kv.Get(ctx, key)
		return err
	})
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("cluster: duplicate id lookup: %w", err)
	}
	return true, nil
}

// Record notes that the message with client duplicate id key is stored (a quorum of the
// bucket's replicas has the key when Record returns). Errors: the bucket's, after retries
// until ctx ends.
func (d *Duplicates) Record(ctx context.Context, key string) error {
	if !d.Long() {
		return nil
	}
	kv, err := d.bucket(ctx)
	if err != nil {
		return err
	}
	err = Attempt(ctx, func(ctx context.Context) error {
		_, err := kv.Put(ctx, key, nil)
		return err
	})
	if err != nil {
		return fmt.Errorf("cluster: duplicate id record: %w", err)
	}
	return nil
}

// SeenMsg is Seen for msg's client duplicate id (false when it has none).
func (d *Duplicates) SeenMsg(ctx context.Context, msg *nats.Msg) (bool, error) {
	key, ok := DuplicateKey(msg)
	if !ok {
		return false, nil
	}
	return d.Seen(ctx, key)
}

// RecordMsg is Record for msg's client duplicate id (nothing when it has none).
func (d *Duplicates) RecordMsg(ctx context.Context, msg *nats.Msg) error {
	key, ok := DuplicateKey(msg)
	if !ok {
		return nil
	}
	return d.Record(ctx, key)
}
