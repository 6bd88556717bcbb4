package pipeline

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/titan-broker/titan/internal/cluster"
	"github.com/titan-broker/titan/internal/cluster/clustertest"
	"github.com/titan-broker/titan/internal/cluster/logs"
	"github.com/titan-broker/titan/internal/cluster/queues"
	"github.com/titan-broker/titan/internal/config"
	"github.com/titan-broker/titan/internal/dedup"
	"github.com/titan-broker/titan/internal/dest"
	"github.com/titan-broker/titan/internal/frame"
	"github.com/titan-broker/titan/internal/message"
)

// The semantics cluster mode keeps in JetStream, on three embedded R3 nodes: ring size per
// queue, events-store retention per log, _AMQ_DUPL_ID across nodes, atomic COMMIT batches.
// They hold per stream; the cluster runs with one partition so that several destinations
// share a stream here (a shared ring class, a batch over two queues) and a stream made by
// an earlier version is found (cluster.PlaceQueue places partitions; its tests show each
// partition a stream of its own with the same configuration).
func TestClusterSemantics(t *testing.T) {
	nodes := clustertest.StartNodesWith(t, func(_ int, c *config.Cluster) { c.Partitions = 1 })
	qs := make([]*queues.Pattern, 3)
	es := make([]*logs.Pattern, 3)
	cs := make([]*Committer, 3)
	for i, n := range nodes {
		qs[i] = queues.New(n, clustertest.TestSettings, nil)
		es[i] = logs.New(n, nil)
		es[i].Settings = clustertest.TestSettings
		cs[i] = NewCommitter(n, qs[i], es[i], nil)
	}
	js := nodes[0].JetStream()

	t.Run("ring size keeps the newest N per queue", func(t *testing.T) {
		ring, other := clustertest.QueueID("g", "ring.a"), clustertest.QueueID("g", "ring.b")
		for i := range 5 {
			if _, err := qs[i%3].Publish(ring, clustertest.MsgFor(ring, fmt.Sprint("r", i)), nil); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := qs[0].Publish(other, clustertest.MsgFor(other, "b0"), nil); err != nil {
			t.Fatal(err)
		}
		p := qs[0].Place(ring)
		if p.Stream != "TITAN_g_Q_R3" {
			t.Fatalf("ring queue stream = %s", p.Stream)
		}
		if got := clustertest.BodiesOn(t, js, p.Stream, p.Subject); !clustertest.Equal(got, []string{"r2", "r3", "r4"}) {
			t.Errorf("ring queue holds %q, want the newest 3", got)
		}
		// Another queue of the same ring size shares the stream, with its own ring.
		if got := clustertest.BodiesOn(t, js, p.Stream, qs[0].Place(other).Subject); !clustertest.Equal(got, []string{"b0"}) {
			t.Errorf("second ring queue holds %q", got)
		}
		// The ring is a hard cap on stored messages: a message in delivery (pulled, not
		// acknowledged) is discarded like any other when newer ones overflow the ring
		// (README "Running a cluster": reference 002's in-delivery rule is not kept).
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		cons, err := js.CreateConsumer(ctx, p.Stream, jetstream.ConsumerConfig{Durable: "probe", FilterSubject: p.Subject, AckPolicy: jetstream.AckExplicitPolicy})
		if err != nil {
			t.Fatal(err)
		}
		// A new R3 consumer may not answer pulls until its leader is elected: retry.
		var held jetstream.Msg
		for held == nil {
			held, err = cons.Next(jetstream.FetchMaxWait(time.Second))
			if err != nil {
				select {
				case <-ctx.Done():
					t.Fatal(err)
				case <-time.After(50 * time.Millisecond):
				}
			}
		}
		for i := 5; i < 8; i++ {
			if _, err := qs[0].Publish(ring, clustertest.MsgFor(ring, fmt.Sprint("r", i)), nil); err != nil {
				t.Fatal(err)
			}
		}
		if got := clustertest.BodiesOn(t, js, p.Stream, p.Subject); !clustertest.Equal(got, []string{"r5", "r6", "r7"}) {
			t.Errorf("after overflowing the ring with r2 in delivery, the queue holds %q", got)
		}
		_ = held.Ack()
		plain := clustertest.QueueID("g", "plain")
		if p := qs[0].Place(plain); p.Stream != "TITAN_g_Q" || p.Config.MaxMsgsPerSubject != 0 {
			t.Errorf("a queue without ring size is placed in %s (max per subject %d)", p.Stream, p.Config.MaxMsgsPerSubject)
		}
	})

	t.Run("events-store retention per log", func(t *testing.T) {
		log := dest.Identity{Group: "g", Pattern: dest.PatternEventsStore, Channel: "ret.x"}
		for i := range 4 {
			if _, err := es[i%3].Publish(log, clustertest.MsgFor(log, fmt.Sprint("e", i)), nil); err != nil {
				t.Fatal(err)
			}
		}
		p := es[0].Place(log)
		if got := clustertest.BodiesOn(t, js, p.Stream, p.Subject); !clustertest.Equal(got, []string{"e2", "e3"}) {
			t.Errorf("log with retention-max-messages 2 holds %q", got)
		}
		if p.Config.MaxAge != 5*time.Minute || p.Config.Duplicates != cluster.BrokerIDWindow {
			t.Errorf("retention stream max age %v, duplicates %v; want 5m, %v (the streams' broker-id window)", p.Config.MaxAge, p.Config.Duplicates, cluster.BrokerIDWindow)
		}
		if p0 := es[0].Place(dest.Identity{Group: "g", Pattern: dest.PatternEventsStore, Channel: "keep"}); p0.Stream != "TITAN_g_ES" {
			t.Errorf("log without retention placed in %s", p0.Stream)
		}
	})

	t.Run("duplicate id stored once across nodes", func(t *testing.T) {
		q := clustertest.QueueID("g", "dedup")
		h := frame.Header{Key: dedup.Header, Value: "order-7"}
		for i := range 3 {
			if _, err := qs[i].Publish(q, clustertest.MsgFor(q, fmt.Sprint("copy", i), h), nil); err != nil {
				t.Fatal(err)
			}
		}
		p := qs[0].Place(q)
		if got := clustertest.BodiesOn(t, js, p.Stream, p.Subject); !clustertest.Equal(got, []string{"copy0"}) {
			t.Errorf("queue holds %q, want only the first copy", got)
		}
		if d := qs[1].Duplicates.Load() + qs[2].Duplicates.Load(); d != 2 {
			t.Errorf("duplicates counted = %d, want 2", d)
		}
		// The same id on another destination is another message.
		q2 := clustertest.QueueID("g", "dedup2")
		if _, err := qs[0].Publish(q2, clustertest.MsgFor(q2, "other", h), nil); err != nil {
			t.Fatal(err)
		}
		if got := clustertest.BodiesOn(t, js, p.Stream, qs[0].Place(q2).Subject); !clustertest.Equal(got, []string{"other"}) {
			t.Errorf("same id on another queue: %q", got)
		}
	})

	t.Run("a stream made before is brought up to date", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "TITAN_up_Q", Subjects: cluster.QueueSubjects("up"),
			Retention: jetstream.WorkQueuePolicy, Replicas: 3, Duplicates: 2 * time.Minute, AllowMsgTTL: true}); err != nil {
			t.Fatal(err)
		}
		q := queues.New(nodes[2], nil, nil)
		q.DuplicateWindow = 30 * time.Second // below BrokerIDWindow: the stream's window is it
		c := NewCommitter(nodes[2], q, es[2], nil)
		a := clustertest.QueueID("up", "a")
		if err := c.PublishBatch([]dest.Identity{a, a}, []*message.Message{clustertest.MsgFor(a, "u1"), clustertest.MsgFor(a, "u2")}, nil); err != nil {
			t.Fatal(err)
		}
		st, err := js.Stream(ctx, "TITAN_up_Q")
		if err != nil {
			t.Fatal(err)
		}
		if cfg := st.CachedInfo().Config; !cfg.AllowAtomicPublish || cfg.Duplicates != 30*time.Second || !cfg.AllowMsgSchedules {
			t.Errorf("stream config after first use: atomic %v, duplicates %v, schedules %v", cfg.AllowAtomicPublish, cfg.Duplicates, cfg.AllowMsgSchedules)
		}
	})

	t.Run("atomic commit", func(t *testing.T) {
		a, b := clustertest.QueueID("tx", "a"), clustertest.QueueID("tx", "b")
		ids := []dest.Identity{a, b, a}
		ms := []*message.Message{clustertest.MsgFor(a, "a1"), clustertest.MsgFor(b, "b1"), clustertest.MsgFor(a, "a2")}
		if err := cs[1].PublishBatch(ids, ms, nil); err != nil {
			t.Fatal(err)
		}
		p := qs[0].Place(a)
		if got := clustertest.BodiesOn(t, js, p.Stream, p.Subject); !clustertest.Equal(got, []string{"a1", "a2"}) {
			t.Errorf("queue a holds %q", got)
		}
		// Too large for one atomic batch: refused whole by the stream leader.
		var bigIDs []dest.Identity
		var big []*message.Message
		for i := range MaxAtomicBatch + 1 {
			bigIDs = append(bigIDs, b)
			big = append(big, clustertest.MsgFor(b, fmt.Sprint("big", i)))
		}
		if err := cs[2].PublishBatch(bigIDs, big, nil); !errors.Is(err, ErrTransactionTooLarge) {
			t.Fatalf("a batch of %d: err %v, want ErrTransactionTooLarge", len(big), err)
		}
		if got := clustertest.BodiesOn(t, js, p.Stream, qs[0].Place(b).Subject); !clustertest.Equal(got, []string{"b1"}) {
			t.Errorf("after the refused batch queue b holds %d messages, want only b1", len(got))
		}
		// A batch repeating a stored duplicate id: the repeat is stored once, the rest once.
		h := frame.Header{Key: dedup.Header, Value: "tx-dup"}
		if _, err := qs[0].Publish(a, clustertest.MsgFor(a, "a3", h), nil); err != nil {
			t.Fatal(err)
		}
		if err := cs[2].PublishBatch([]dest.Identity{a, a}, []*message.Message{clustertest.MsgFor(a, "a3-again", h), clustertest.MsgFor(a, "a4")}, nil); err != nil {
			t.Fatal(err)
		}
		if got := clustertest.BodiesOn(t, js, p.Stream, p.Subject); !clustertest.Equal(got, []string{"a1", "a2", "a3", "a4"}) {
			t.Errorf("after the batch with a stored duplicate id, queue a holds %q", got)
		}
		// Across streams (a queue and an events-store log): each part is stored.
		l := dest.Identity{Group: "tx", Pattern: dest.PatternEventsStore, Channel: "log"}
		if err := cs[0].PublishBatch([]dest.Identity{a, l, l}, []*message.Message{clustertest.MsgFor(a, "a5"), clustertest.MsgFor(l, "l1"), clustertest.MsgFor(l, "l2")}, nil); err != nil {
			t.Fatal(err)
		}
		lp := es[0].Place(l)
		if got := clustertest.BodiesOn(t, js, lp.Stream, lp.Subject); !clustertest.Equal(got, []string{"l1", "l2"}) {
			t.Errorf("log holds %q", got)
		}
	})

	t.Run("a COMMIT abandoned before its commit message stores nothing", func(t *testing.T) {
		a := clustertest.QueueID("tx2", "a")
		l := dest.Identity{Group: "tx2", Pattern: dest.PatternEventsStore, Channel: "log"}
		c := NewCommitter(nodes[0], qs[0], es[0], nil)
		// The producer's connection closes just before the queue part's commit message:
		// the leader staged a1..a3 but never commits them.
		cancel := make(chan struct{})
		c.hook = func(stream string, n int) {
			if stream == "TITAN_tx2_Q" {
				close(cancel)
			}
		}
		err := c.PublishBatch([]dest.Identity{a, a, a}, []*message.Message{clustertest.MsgFor(a, "a1"), clustertest.MsgFor(a, "a2"), clustertest.MsgFor(a, "a3")}, cancel)
		if err == nil {
			t.Fatal("abandoned COMMIT succeeded")
		}
		var partial *PartialCommitError
		if errors.As(err, &partial) {
			t.Errorf("nothing was stored, yet %v", err)
		}
		p := qs[0].Place(a)
		if got := clustertest.BodiesOn(t, js, p.Stream, p.Subject); len(got) != 0 {
			t.Errorf("queue holds %q after the abandoned COMMIT", got)
		}
		// Two streams, the second abandoned: the first part stays, the error says so.
		cancel2 := make(chan struct{})
		c.hook = func(stream string, n int) {
			if stream == "TITAN_tx2_Q" {
				close(cancel2)
			}
		}
		err = c.PublishBatch([]dest.Identity{l, l, a, a}, []*message.Message{clustertest.MsgFor(l, "l1"), clustertest.MsgFor(l, "l2"), clustertest.MsgFor(a, "a4"), clustertest.MsgFor(a, "a5")}, cancel2)
		if !errors.As(err, &partial) || partial.Stored != 2 {
			t.Fatalf("err %v, want a PartialCommitError with 2 stored", err)
		}
		lp := es[0].Place(l)
		if got := clustertest.BodiesOn(t, js, lp.Stream, lp.Subject); !clustertest.Equal(got, []string{"l1", "l2"}) {
			t.Errorf("log holds %q, want the committed first part", got)
		}
		if got := clustertest.BodiesOn(t, js, p.Stream, p.Subject); len(got) != 0 {
			t.Errorf("queue holds %q after its part was abandoned", got)
		}
	})
}

// BenchmarkQueuesBuild measures the per-SEND placement and message building of a queue
// SEND carrying a duplicate id (address-settings lookup, subject, Nats-Msg-Id hash,
// encoding), without JetStream.
func BenchmarkQueuesBuild(b *testing.B) {
	q := queues.New(clustertest.StartNodes(b)[0], clustertest.TestSettings, nil)
	id := clustertest.QueueID("bench", "ring.jobs")
	m := clustertest.MsgFor(id, "payload-of-a-job", frame.Header{Key: dedup.Header, Value: "job-123456"})
	b.ReportAllocs()
	for b.Loop() {
		if _, msg, _ := q.Build(id, m); msg == nil {
			b.Fatal("no message")
		}
	}
}

// BenchmarkCommitterPublishBatch measures a COMMIT of 10 queue SENDs to one group (one
// atomic batch) on a three-node R3 sync-always cluster in this process.
func BenchmarkCommitterPublishBatch(b *testing.B) {
	nodes := clustertest.StartNodes(b)
	q := queues.New(nodes[1], nil, nil)
	c := NewCommitter(nodes[1], q, logs.New(nodes[1], nil), nil)
	id := clustertest.QueueID("bench", "tx")
	ids := make([]dest.Identity, 10)
	for i := range ids {
		ids[i] = id
	}
	b.ReportAllocs()
	for b.Loop() {
		ms := make([]*message.Message, len(ids))
		for i := range ms {
			ms[i] = clustertest.MsgFor(id, "payload")
		}
		if err := c.PublishBatch(ids, ms, nil); err != nil {
			b.Fatal(err)
		}
	}
}
