package pull

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// GiveBack NAKs what it is given in stream order, whatever order it was given in, and
// returns once the leader processed them: the next pull gets them first, in order, as
// redeliveries.
func TestGiveBackRedeliversInStreamOrder(t *testing.T) {
	js := startJetStream(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "Q", Subjects: []string{"q.>"}}); err != nil {
		t.Fatal(err)
	}
	for i := range 6 {
		if _, err := js.Publish(ctx, "q.a", []byte(strconv.Itoa(i))); err != nil {
			t.Fatal(err)
		}
	}
	cons, err := js.CreateConsumer(ctx, "Q", jetstream.ConsumerConfig{Durable: "c", AckPolicy: jetstream.AckExplicitPolicy, AckWait: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	fetch := func(n int) []jetstream.Msg {
		b, err := cons.Fetch(n, jetstream.FetchMaxWait(5*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		var ms []jetstream.Msg
		for m := range b.Messages() {
			ms = append(ms, m)
		}
		if len(ms) != n {
			t.Fatalf("fetched %d messages, want %d", len(ms), n)
		}
		return ms
	}
	got := fetch(4) // 0..3 pulled; 4 and 5 stay in the stream
	if err := GiveBack(ctx, js.Conn(), cons, []jetstream.Msg{got[3], got[1], got[0], got[2]}); err != nil {
		t.Fatalf("GiveBack: %v", err)
	}
	again := fetch(6)
	for i, m := range again {
		meta, _ := m.Metadata()
		if string(m.Data()) != strconv.Itoa(i) {
			t.Errorf("pull %d got %q, want %d (given back in stream order, ahead of newer ones)", i, m.Data(), i)
		}
		want := uint64(1)
		if i < 4 {
			want = 2
		}
		if meta.NumDelivered != want {
			t.Errorf("message %s delivered %d times, want %d", m.Data(), meta.NumDelivered, want)
		}
	}
}
