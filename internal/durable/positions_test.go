package durable

import (
	"fmt"
	"testing"
	"time"
)

// TestPositionValueAcked: a saved position keeps the sequences acknowledged individually
// above it, and values saved before they existed (8 and 16 bytes) still parse.
func TestPositionValueAcked(t *testing.T) {
	at := time.UnixMilli(1_700_000_000_123)
	for _, acked := range [][]uint64{nil, {7}, {7, 9, 1 << 40}} {
		v := positionValue(5, at, acked)
		seq, got, ok := parsePosition(v)
		if !ok || seq != 5 || !got.Equal(at) {
			t.Fatalf("parsePosition(%x) = %d, %v, %v", v, seq, got, ok)
		}
		if a := parseAcked(v); fmt.Sprint(a) != fmt.Sprint(acked) && (len(a) != 0 || len(acked) != 0) {
			t.Fatalf("acked: got %v, want %v", a, acked)
		}
	}
	if seq, _, ok := parsePosition(positionValue(5, at, nil)[:8]); !ok || seq != 5 {
		t.Fatalf("8-byte value: %d %v", seq, ok)
	}
	if _, _, ok := parsePosition(make([]byte, 20)); ok {
		t.Fatal("a 20-byte value parsed")
	}
}
