package broker

import (
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/titan-broker/titan/internal/delivery"
	"github.com/titan-broker/titan/internal/dest"
	"github.com/titan-broker/titan/internal/testwait"
)

// A subscription's Allow filter (set by authorization) skips the channels it refuses, in
// direct and fanout mode, without counting them as dropped.
func TestSubscriptionAllowFiltersEventsFanout(t *testing.T) {
	for _, fanout := range []bool{false, true} {
		e := newEngine(engineOptions{FanoutMode: fanout})
		w := &recordingWriter{}
		s := &delivery.Subscription{ID: "s", Conn: delivery.NewConn(w, nil), Group: "default",
			Dest:  dest.Destination{Pattern: dest.PatternEvents, Channel: ">", Wildcard: true},
			Allow: func(ch string) bool { return strings.HasPrefix(ch, "prices.") }}
		if err := e.Subscribe(s); err != nil {
			t.Fatal(err)
		}
		for _, ch := range []string{"secret.a", "prices.eu", "other", "prices.us"} {
			if _, err := e.Publish(events(ch), msg(ch)); err != nil {
				t.Fatal(err)
			}
		}
		testwait.Eventually(t, 5*time.Second, `len(w.got()) == 2`, func() bool { return len(w.got()) == 2 })
		got := w.got()
		sort.Strings(got) // fanout mode: one queue per channel, no order across channels
		if strings.Join(got, ",") != "prices.eu,prices.us" {
			t.Fatalf("fanout %v: delivered %v", fanout, got)
		}
		if s.Dropped.Load() != 0 {
			t.Fatalf("filtered messages counted as dropped: %d", s.Dropped.Load())
		}
		e.Close()
	}
}
