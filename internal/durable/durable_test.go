package durable

import (
	"strconv"
	"testing"
	"time"

	"github.com/titan-broker/titan/internal/address"
	"github.com/titan-broker/titan/internal/dest"
	"github.com/titan-broker/titan/internal/message"
	"github.com/titan-broker/titan/internal/store/memstore"
)

func TestStreamNamesRoundTrip(t *testing.T) {
	for _, id := range []dest.Identity{
		{Group: "default", Pattern: dest.PatternQueues, Channel: "orders.eu"},
		{Group: "market", Pattern: dest.PatternEventsStore, Channel: "a/b.c", Bare: true},
	} {
		got, ok := ParseStream(StreamName(id))
		if !ok || got != id {
			t.Fatalf("%v -> %q -> %v", id, StreamName(id), got)
		}
	}
	for _, bad := range []string{"", "queue/x", "other/default/p/x", "queue/bad group/p/x", "queue/default/p/"} {
		if _, ok := ParseStream(bad); ok {
			t.Fatalf("%q parsed", bad)
		}
	}
}

func TestRetentionTrimsByCountBytesAndAge(t *testing.T) {
	l := New(memstore.New(), nil)
	id := dest.Identity{Group: "default", Pattern: dest.PatternEventsStore, Channel: "log"}
	now := time.UnixMilli(1_000_000)
	for i := 1; i <= 10; i++ {
		m := &message.Message{ID: strconv.Itoa(i), Destination: "/events-store/log", Body: make([]byte, 100), TimestampMs: now.Add(time.Duration(i-10) * time.Minute).UnixMilli()}
		if err := l.Persist(id, m); err != nil {
			t.Fatal(err)
		}
	}
	first := func() uint64 { f, _, _ := l.Bounds(id); return f }
	run := func(qs address.Settings) {
		t.Helper()
		if _, err := l.EnforceRetention(func(dest.Identity) address.Settings { return qs }, now); err != nil {
			t.Fatal(err)
		}
	}
	run(address.Settings{RetentionMaxMessages: 8})
	if first() != 3 {
		t.Fatalf("max messages 8: first %d, want 3", first())
	}
	run(address.Settings{RetentionMaxAge: 3*time.Minute + time.Second}) // keeps seq 7..10
	if first() != 7 {
		t.Fatalf("max age: first %d, want 7", first())
	}
	var size int64
	_ = l.Scan(id, 10, func(_ uint64, data []byte) bool { size = int64(len(data)); return false })
	run(address.Settings{RetentionMaxBytes: 2*size + size/2}) // room for two records and a half: keep 2
	if f := first(); f != 9 {
		t.Fatalf("max bytes: first %d, want 9", f)
	}
	_, last, _ := l.Bounds(id)
	if last != 10 {
		t.Fatalf("last %d", last)
	}
}

// Operator state (settings of a created queue, pause) is kept per identity, events queues
// included, and a deleted queue forgets both (issue 14: it survives restarts).
func TestOperatorQueueStateRoundTrips(t *testing.T) {
	st := memstore.New()
	l := New(st, nil)
	topic := dest.Identity{Group: "default", Pattern: dest.PatternEvents, Channel: "orders", Bare: true}
	jobs := dest.Identity{Group: "market", Pattern: dest.PatternQueues, Channel: "jobs"}
	s := address.Settings{Capacity: 7, MaxPendingBytes: 1024}
	l.SaveQueueSettings(topic, &s)
	l.SaveQueuePaused(topic, true)
	l.SaveQueuePaused(jobs, true)
	l.SaveQueuePaused(jobs, true) // idempotent

	l2 := New(st, nil) // as after a restart
	saved, err := l2.QueueSettings()
	if err != nil || len(saved) != 1 || saved[topic].Capacity != 7 || saved[topic].MaxPendingBytes != 1024 {
		t.Fatalf("settings after restart: %v %v", saved, err)
	}
	paused, err := l2.PausedQueues()
	if err != nil || len(paused) != 2 || paused[0] != jobs || paused[1] != topic {
		t.Fatalf("paused after restart: %v %v", paused, err)
	}
	l2.SaveQueuePaused(jobs, false)
	l2.SaveQueueSettings(topic, nil) // deleted: forgets its pause too
	if paused, _ := l2.PausedQueues(); len(paused) != 0 {
		t.Fatalf("paused after resume and delete: %v", paused)
	}
}
