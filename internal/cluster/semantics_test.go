package cluster

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/titan-broker/titan/internal/address"
	"github.com/titan-broker/titan/internal/dedup"
	"github.com/titan-broker/titan/internal/dest"
	"github.com/titan-broker/titan/internal/frame"
	"github.com/titan-broker/titan/internal/message"
)

// settingsFunc adapts a function to Settings.
type settingsFunc func(dest.Identity) address.Settings

func (f settingsFunc) Settings(id dest.Identity) address.Settings { return f(id) }

// testSettings: queues "ring.*" have ring size 3; logs "ret.*" keep 2 messages per log
// and five minutes; everything else has the defaults.
var testSettings = settingsFunc(func(id dest.Identity) address.Settings {
	s := address.Defaults(id)
	if len(id.Channel) > 5 && id.Channel[:5] == "ring." {
		s.RingSize = 3
	}
	if len(id.Channel) > 4 && id.Channel[:4] == "ret." {
		s.RetentionMaxMessages, s.RetentionMaxAge = 2, 5*time.Minute
	}
	return s
})

func qid(group, ch string) dest.Identity {
	return dest.Identity{Group: group, Pattern: dest.PatternQueues, Channel: ch}
}

func msgFor(id dest.Identity, body string, hdrs ...frame.Header) *message.Message {
	return &message.Message{ID: message.NewID("unit"), Group: id.Group, Destination: id.Destination(), Body: []byte(body), Persistent: true, Headers: hdrs}
}

// bodiesOn returns the bodies stored on subject in stream, oldest first.
func bodiesOn(t *testing.T, js jetstream.JetStream, stream, subject string) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := js.Stream(ctx, stream)
	if err != nil {
		t.Fatalf("stream %s: %v", stream, err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for seq := info.State.FirstSeq; seq <= info.State.LastSeq && info.State.Msgs > 0; seq++ {
		raw, err := s.GetMsg(ctx, seq)
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		if raw.Subject != subject {
			continue
		}
		m, err := message.Decode(raw.Data)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, string(m.Body))
	}
	return out
}

func equal(a, b []string) bool { return fmt.Sprint(a) == fmt.Sprint(b) }

// The semantics cluster mode keeps in JetStream, on three embedded R3 nodes: ring size per
// queue, events-store retention per log, _AMQ_DUPL_ID across nodes, atomic COMMIT batches.
func TestClusterSemantics(t *testing.T) {
	nodes := startNodes(t)
	qs := make([]*Queues, 3)
	es := make([]*EventsStore, 3)
	cs := make([]*Committer, 3)
	for i, n := range nodes {
		qs[i] = NewQueues(n, testSettings, nil)
		es[i] = NewEventsStore(n, nil)
		es[i].Settings = testSettings
		cs[i] = NewCommitter(n, qs[i], es[i], nil)
	}
	js := nodes[0].JetStream()

	t.Run("ring size keeps the newest N per queue", func(t *testing.T) {
		ring, other := qid("g", "ring.a"), qid("g", "ring.b")
		for i := range 5 {
			if _, err := qs[i%3].Publish(ring, msgFor(ring, fmt.Sprint("r", i)), nil); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := qs[0].Publish(other, msgFor(other, "b0"), nil); err != nil {
			t.Fatal(err)
		}
		p := qs[0].place(ring)
		if p.stream != "TITAN_g_Q_R3" {
			t.Fatalf("ring queue stream = %s", p.stream)
		}
		if got := bodiesOn(t, js, p.stream, p.subject); !equal(got, []string{"r2", "r3", "r4"}) {
			t.Errorf("ring queue holds %q, want the newest 3", got)
		}
		// Another queue of the same ring size shares the stream, with its own ring.
		if got := bodiesOn(t, js, p.stream, qs[0].place(other).subject); !equal(got, []string{"b0"}) {
			t.Errorf("second ring queue holds %q", got)
		}
		// The ring is a hard cap on stored messages: a message in delivery (pulled, not
		// acknowledged) is discarded like any other when newer ones overflow the ring
		// (README "Running a cluster": reference 002's in-delivery rule is not kept).
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		cons, err := js.CreateConsumer(ctx, p.stream, jetstream.ConsumerConfig{Durable: "probe", FilterSubject: p.subject, AckPolicy: jetstream.AckExplicitPolicy})
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
			if _, err := qs[0].Publish(ring, msgFor(ring, fmt.Sprint("r", i)), nil); err != nil {
				t.Fatal(err)
			}
		}
		if got := bodiesOn(t, js, p.stream, p.subject); !equal(got, []string{"r5", "r6", "r7"}) {
			t.Errorf("after overflowing the ring with r2 in delivery, the queue holds %q", got)
		}
		_ = held.Ack()
		plain := qid("g", "plain")
		if p := qs[0].place(plain); p.stream != "TITAN_g_Q" || p.cfg.MaxMsgsPerSubject != 0 {
			t.Errorf("a queue without ring size is placed in %s (max per subject %d)", p.stream, p.cfg.MaxMsgsPerSubject)
		}
	})

	t.Run("events-store retention per log", func(t *testing.T) {
		log := dest.Identity{Group: "g", Pattern: dest.PatternEventsStore, Channel: "ret.x"}
		for i := range 4 {
			if _, err := es[i%3].Publish(log, msgFor(log, fmt.Sprint("e", i)), nil); err != nil {
				t.Fatal(err)
			}
		}
		p := es[0].place(log)
		if got := bodiesOn(t, js, p.stream, p.subject); !equal(got, []string{"e2", "e3"}) {
			t.Errorf("log with retention-max-messages 2 holds %q", got)
		}
		if p.cfg.MaxAge != 5*time.Minute || p.cfg.Duplicates != 5*time.Minute {
			t.Errorf("retention stream max age %v, duplicates %v; want 5m, 5m (the 10m window capped by max age)", p.cfg.MaxAge, p.cfg.Duplicates)
		}
		if p0 := es[0].place(dest.Identity{Group: "g", Pattern: dest.PatternEventsStore, Channel: "keep"}); p0.stream != "TITAN_g_ES" {
			t.Errorf("log without retention placed in %s", p0.stream)
		}
	})

	t.Run("duplicate id stored once across nodes", func(t *testing.T) {
		q := qid("g", "dedup")
		h := frame.Header{Key: dedup.Header, Value: "order-7"}
		for i := range 3 {
			if _, err := qs[i].Publish(q, msgFor(q, fmt.Sprint("copy", i), h), nil); err != nil {
				t.Fatal(err)
			}
		}
		p := qs[0].place(q)
		if got := bodiesOn(t, js, p.stream, p.subject); !equal(got, []string{"copy0"}) {
			t.Errorf("queue holds %q, want only the first copy", got)
		}
		if d := qs[1].Duplicates.Load() + qs[2].Duplicates.Load(); d != 2 {
			t.Errorf("duplicates counted = %d, want 2", d)
		}
		// The same id on another destination is another message.
		q2 := qid("g", "dedup2")
		if _, err := qs[0].Publish(q2, msgFor(q2, "other", h), nil); err != nil {
			t.Fatal(err)
		}
		if got := bodiesOn(t, js, p.stream, qs[0].place(q2).subject); !equal(got, []string{"other"}) {
			t.Errorf("same id on another queue: %q", got)
		}
	})

	t.Run("a stream made before is brought up to date", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "TITAN_up_Q", Subjects: queueSubjects("up"),
			Retention: jetstream.WorkQueuePolicy, Replicas: 3, Duplicates: 2 * time.Minute, AllowMsgTTL: true}); err != nil {
			t.Fatal(err)
		}
		q := NewQueues(nodes[2], nil, nil)
		q.DuplicateWindow = 3 * time.Minute
		c := NewCommitter(nodes[2], q, es[2], nil)
		a := qid("up", "a")
		if err := c.PublishBatch([]dest.Identity{a, a}, []*message.Message{msgFor(a, "u1"), msgFor(a, "u2")}, nil); err != nil {
			t.Fatal(err)
		}
		st, err := js.Stream(ctx, "TITAN_up_Q")
		if err != nil {
			t.Fatal(err)
		}
		if cfg := st.CachedInfo().Config; !cfg.AllowAtomicPublish || cfg.Duplicates != 3*time.Minute || !cfg.AllowMsgSchedules {
			t.Errorf("stream config after first use: atomic %v, duplicates %v, schedules %v", cfg.AllowAtomicPublish, cfg.Duplicates, cfg.AllowMsgSchedules)
		}
	})

	t.Run("atomic commit", func(t *testing.T) {
		a, b := qid("tx", "a"), qid("tx", "b")
		ids := []dest.Identity{a, b, a}
		ms := []*message.Message{msgFor(a, "a1"), msgFor(b, "b1"), msgFor(a, "a2")}
		if err := cs[1].PublishBatch(ids, ms, nil); err != nil {
			t.Fatal(err)
		}
		p := qs[0].place(a)
		if got := bodiesOn(t, js, p.stream, p.subject); !equal(got, []string{"a1", "a2"}) {
			t.Errorf("queue a holds %q", got)
		}
		// Too large for one atomic batch: refused whole by the stream leader.
		var bigIDs []dest.Identity
		var big []*message.Message
		for i := range MaxAtomicBatch + 1 {
			bigIDs = append(bigIDs, b)
			big = append(big, msgFor(b, fmt.Sprint("big", i)))
		}
		if err := cs[2].PublishBatch(bigIDs, big, nil); !errors.Is(err, ErrTransactionTooLarge) {
			t.Fatalf("a batch of %d: err %v, want ErrTransactionTooLarge", len(big), err)
		}
		if got := bodiesOn(t, js, p.stream, qs[0].place(b).subject); !equal(got, []string{"b1"}) {
			t.Errorf("after the refused batch queue b holds %d messages, want only b1", len(got))
		}
		// A batch repeating a stored duplicate id: the repeat is stored once, the rest once.
		h := frame.Header{Key: dedup.Header, Value: "tx-dup"}
		if _, err := qs[0].Publish(a, msgFor(a, "a3", h), nil); err != nil {
			t.Fatal(err)
		}
		if err := cs[2].PublishBatch([]dest.Identity{a, a}, []*message.Message{msgFor(a, "a3-again", h), msgFor(a, "a4")}, nil); err != nil {
			t.Fatal(err)
		}
		if got := bodiesOn(t, js, p.stream, p.subject); !equal(got, []string{"a1", "a2", "a3", "a4"}) {
			t.Errorf("after the batch with a stored duplicate id, queue a holds %q", got)
		}
		// Across streams (a queue and an events-store log): each part is stored.
		l := dest.Identity{Group: "tx", Pattern: dest.PatternEventsStore, Channel: "log"}
		if err := cs[0].PublishBatch([]dest.Identity{a, l, l}, []*message.Message{msgFor(a, "a5"), msgFor(l, "l1"), msgFor(l, "l2")}, nil); err != nil {
			t.Fatal(err)
		}
		lp := es[0].place(l)
		if got := bodiesOn(t, js, lp.stream, lp.subject); !equal(got, []string{"l1", "l2"}) {
			t.Errorf("log holds %q", got)
		}
	})

	t.Run("a COMMIT abandoned before its commit message stores nothing", func(t *testing.T) {
		a := qid("tx2", "a")
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
		err := c.PublishBatch([]dest.Identity{a, a, a}, []*message.Message{msgFor(a, "a1"), msgFor(a, "a2"), msgFor(a, "a3")}, cancel)
		if err == nil {
			t.Fatal("abandoned COMMIT succeeded")
		}
		var partial *PartialCommitError
		if errors.As(err, &partial) {
			t.Errorf("nothing was stored, yet %v", err)
		}
		p := qs[0].place(a)
		if got := bodiesOn(t, js, p.stream, p.subject); len(got) != 0 {
			t.Errorf("queue holds %q after the abandoned COMMIT", got)
		}
		// Two streams, the second abandoned: the first part stays, the error says so.
		cancel2 := make(chan struct{})
		c.hook = func(stream string, n int) {
			if stream == "TITAN_tx2_Q" {
				close(cancel2)
			}
		}
		err = c.PublishBatch([]dest.Identity{l, l, a, a}, []*message.Message{msgFor(l, "l1"), msgFor(l, "l2"), msgFor(a, "a4"), msgFor(a, "a5")}, cancel2)
		if !errors.As(err, &partial) || partial.Stored != 2 {
			t.Fatalf("err %v, want a PartialCommitError with 2 stored", err)
		}
		lp := es[0].place(l)
		if got := bodiesOn(t, js, lp.stream, lp.subject); !equal(got, []string{"l1", "l2"}) {
			t.Errorf("log holds %q, want the committed first part", got)
		}
		if got := bodiesOn(t, js, p.stream, p.subject); len(got) != 0 {
			t.Errorf("queue holds %q after its part was abandoned", got)
		}
	})
}

// BenchmarkQueuesBuild measures the per-SEND placement and message building of a queue
// SEND carrying a duplicate id (address-settings lookup, subject, Nats-Msg-Id hash,
// encoding), without JetStream.
func BenchmarkQueuesBuild(b *testing.B) {
	q := &Queues{settings: testSettings, replicas: 3}
	id := qid("bench", "ring.jobs")
	m := msgFor(id, "payload-of-a-job", frame.Header{Key: dedup.Header, Value: "job-123456"})
	b.ReportAllocs()
	for b.Loop() {
		if _, msg, _ := q.build(id, m); msg == nil {
			b.Fatal("no message")
		}
	}
}

// BenchmarkCommitterPublishBatch measures a COMMIT of 10 queue SENDs to one group (one
// atomic batch) on a three-node R3 sync-always cluster in this process.
func BenchmarkCommitterPublishBatch(b *testing.B) {
	nodes := startNodesB(b)
	q := NewQueues(nodes[1], nil, nil)
	c := NewCommitter(nodes[1], q, NewEventsStore(nodes[1], nil), nil)
	id := qid("bench", "tx")
	ids := make([]dest.Identity, 10)
	for i := range ids {
		ids[i] = id
	}
	b.ReportAllocs()
	for b.Loop() {
		ms := make([]*message.Message, len(ids))
		for i := range ms {
			ms[i] = msgFor(id, "payload")
		}
		if err := c.PublishBatch(ids, ms, nil); err != nil {
			b.Fatal(err)
		}
	}
}
