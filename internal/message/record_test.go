package message

import (
	"bytes"
	"encoding/hex"
	"reflect"
	"testing"

	"github.com/titan-broker/titan/internal/frame"
)

func sample() *Message {
	return &Message{
		ID: "titan-1", Group: "market", Destination: "/queue/orders", Persistent: true,
		TimestampMs: 1700000000000, ExpiresMs: 0, DeliverAtMs: 1700000000500,
		Headers: []frame.Header{{Key: "content-type", Value: "text/plain"}},
		Body:    []byte("a\x00b"),
	}
}

func TestRecordGolden(t *testing.T) {
	got := hex.EncodeToString(Encode(nil, sample()))
	const want = "010107746974616e2d31066d61726b65740d2f71756575652f6f7264657273" +
		"80a0abfef962" + "00" + "e8a7abfef962" + "01" + "0c636f6e74656e742d74797065" + "0a746578742f706c61696e" + "610062"
	if got != want {
		t.Fatalf("record layout changed:\n got %s\nwant %s", got, want)
	}
}

func TestRecordRoundTrip(t *testing.T) {
	m := sample()
	d, err := Decode(Encode(nil, m))
	if err != nil {
		t.Fatal(err)
	}
	if d.ID != m.ID || d.Group != m.Group || d.Destination != m.Destination || d.Persistent != m.Persistent ||
		d.TimestampMs != m.TimestampMs || d.ExpiresMs != m.ExpiresMs || d.DeliverAtMs != m.DeliverAtMs ||
		!reflect.DeepEqual(d.Headers, m.Headers) || !bytes.Equal(d.Body, m.Body) {
		t.Fatalf("round trip: %+v != %+v", d, m)
	}
}

func TestDecodeRejectsTruncatedRecords(t *testing.T) {
	rec := Encode(nil, sample())
	bodyStart := len(rec) - 3
	for i := 0; i < bodyStart; i++ {
		if _, err := Decode(rec[:i]); err == nil {
			t.Fatalf("truncated at %d decoded without error", i)
		}
	}
}
