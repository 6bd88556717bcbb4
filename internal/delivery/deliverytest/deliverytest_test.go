package deliverytest_test

import (
	"slices"
	"testing"

	"github.com/titan-broker/titan/internal/delivery"
	"github.com/titan-broker/titan/internal/delivery/deliverytest"
	"github.com/titan-broker/titan/internal/frame"
)

var (
	_ delivery.Writer     = deliverytest.Null{}
	_ delivery.Writer     = (*deliverytest.Buffered)(nil)
	_ delivery.SlowCloser = (*deliverytest.Buffered)(nil)
)

// tail is a MESSAGE's shared tail of len(tail) bytes with the given body.
func tail(body string) []byte { return []byte("destination:/queue/a\n\n" + body + "\x00\n") }

// TestBuffered: writes queue up to the limit (the first one always), force passes it,
// Drain empties the buffer, a slow-consumer close refuses everything after it.
func TestBuffered(t *testing.T) {
	w := &deliverytest.Buffered{Limit: int64(2 * len(tail("a")))}
	write := func(body string, force bool) bool {
		ok, _ := w.WriteEvent(frame.GetBuf(), tail(body), force)
		return ok
	}
	if !write("a", false) || !write("b", false) || write("c", false) {
		t.Fatal("the limit did not refuse the third write")
	}
	if !write("d", true) {
		t.Fatal("force was refused")
	}
	w.Drain()
	if w.QueuedBytes() != 0 || !w.WriteMessage(frame.GetBuf(), tail("e")) {
		t.Fatal("a drained writer refused")
	}
	w.CloseSlowConsumer("too slow")
	if write("f", true) {
		t.Fatal("a closed writer accepted a forced write")
	}
	if got := w.Bodies(); !slices.Equal(got, []string{"a", "b", "d", "e"}) {
		t.Fatalf("bodies %q", got)
	}
	if got := w.SlowCloses(); !slices.Equal(got, []string{"too slow"}) {
		t.Fatalf("slow closes %q", got)
	}
}
