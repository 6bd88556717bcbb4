package queues

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/titan-broker/titan/internal/cluster"
)

// Delivery counts as on a single node (issue 27). JetStream counts a delivery
// (NumDelivered) every time it hands a message to a node's pull request, also when that
// node then gives it to no client: it pulled it for a subscription that left (a pull
// request still waiting on the server takes a message NAKed at the detach), or held it for
// a subscriber that had no room. Such a message goes back with a NAK and would come to the
// next client with a count one higher for each such trip — a consumer moving between nodes
// burnt delivery attempts, and max-deliveries dead-lettered messages clients had seen
// fewer times. Each node therefore records, before it NAKs a message it never handed out,
// one undelivered trip for it in the replicated KV bucket UndeliveredBucket (key
// <stream>.<stream sequence>); delivery-count is NumDelivered minus those trips, looked up
// only for a redelivery (NumDelivered > 1), so a first delivery costs nothing.

// UndeliveredBucket is the key-value bucket of undelivered trips.
const UndeliveredBucket = "TITAN_UNDELIVERED"

// undeliveredTTL bounds how long a trip is remembered: a message still stored after it
// counts its trips again (its count runs high, never low).
const undeliveredTTL = 24 * time.Hour

// undelivered is the trip record of one node (made on first use). Safe for concurrent use.
type undelivered struct {
	js       jetstream.JetStream
	replicas int

	mu sync.Mutex
	kv jetstream.KeyValue // guarded by mu; nil until made
}

func (u *undelivered) bucket(ctx context.Context) (jetstream.KeyValue, error) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.kv != nil {
		return u.kv, nil
	}
	var kv jetstream.KeyValue
	err := cluster.Attempt(ctx, func(ctx context.Context) error {
		var err error
		kv, err = u.js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{
			Bucket: UndeliveredBucket, TTL: undeliveredTTL, Replicas: u.replicas, Storage: jetstream.FileStorage,
			Description: "Titan: deliveries JetStream counted that no client received (delivery-count correction)",
		})
		return err
	})
	if err != nil {
		return nil, err
	}
	u.kv = kv
	return kv, nil
}

func tripKey(meta *jetstream.MsgMetadata) string {
	return meta.Stream + "." + strconv.FormatUint(meta.Sequence.Stream, 10)
}

// trips returns the undelivered trips recorded for the message of meta.
func (u *undelivered) trips(ctx context.Context, meta *jetstream.MsgMetadata) (int, error) {
	kv, err := u.bucket(ctx)
	if err != nil {
		return 0, err
	}
	var n int
	err = cluster.Attempt(ctx, func(ctx context.Context) error {
		e, err := kv.Get(ctx, tripKey(meta))
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			n = 0
			return nil
		}
		if err != nil {
			return err
		}
		n, err = strconv.Atoi(string(e.Value()))
		return err
	})
	return n, err
}

// add records one more undelivered trip of the message of meta. A message is held by one
// node at a time (it is pending on that node's delivery until its NAK), so the read and
// the write do not race with another node's.
func (u *undelivered) add(ctx context.Context, meta *jetstream.MsgMetadata) error {
	n, err := u.trips(ctx, meta)
	if err != nil {
		return err
	}
	kv, err := u.bucket(ctx)
	if err != nil {
		return err
	}
	return cluster.Attempt(ctx, func(ctx context.Context) error {
		_, err := kv.Put(ctx, tripKey(meta), []byte(strconv.Itoa(n+1)))
		return err
	})
}

// record records one undelivered trip of jm, a message this node pulled and handed to no
// client, so the next delivery's count leaves it out. Once ctx ended (a node shutting down
// without a quorum must not wait for each) it records nothing.
func (q *Pattern) record(ctx context.Context, jm jetstream.Msg) {
	meta, err := jm.Metadata()
	if err != nil || ctx.Err() != nil {
		return
	}
	if err := q.undelivered.add(ctx, meta); err != nil {
		q.log.Warn("undelivered trip not recorded; the next delivery-count includes it", "stream", meta.Stream, "stream_seq", meta.Sequence.Stream, "err", err)
	}
}

// deliveryCount is the message's delivery-count as a single node counts it: JetStream's
// NumDelivered minus the undelivered trips (looked up for a redelivery only).
func (q *Pattern) deliveryCount(meta *jetstream.MsgMetadata) int {
	count := int(meta.NumDelivered)
	if count <= 1 {
		return count
	}
	ctx, cancel := context.WithTimeout(context.Background(), cluster.AttemptTimeout*2)
	defer cancel()
	trips, err := q.undelivered.trips(ctx, meta)
	if err != nil {
		q.log.Warn("undelivered trips not read; delivery-count is JetStream's", "stream", meta.Stream, "stream_seq", meta.Sequence.Stream, "err", err)
		return count
	}
	return max(count-trips, 1)
}
