package delivery

import (
	"testing"

	"github.com/titan-broker/titan/internal/frame"
	"github.com/titan-broker/titan/internal/message"
	"github.com/titan-broker/titan/internal/selector"
)

// TestSelectsReadsTheMessage: a subscription's selector reads the message's headers and its
// broker-set fields, allocates nothing, and shows in the operator view.
func TestSelectsReadsTheMessage(t *testing.T) {
	m := message.Pack(&message.Parts{
		IDPrefix: "t", Group: "default", Destination: []byte("/queue/a"), Body: []byte("hi"),
		Headers:     []frame.Header{{Key: "color", Value: "red"}, {Key: "priority", Value: "7"}},
		TimestampMs: 1000, Persistent: true,
	})
	zero := message.Pack(&message.Parts{IDPrefix: "t", Group: "default", Destination: []byte("/queue/a"),
		Headers: []frame.Header{{Key: "priority", Value: "09"}}})
	for _, c := range []struct {
		sel  string
		want bool
	}{
		{"color = 'red'", true},
		{"color = 'blue'", false},
		{"JMSPriority = 7", true},
		{"JMSTimestamp = 1000", true},
		{"JMSMessageID LIKE 't-%'", true},
		{"JMSDeliveryMode = 'PERSISTENT'", true},
	} {
		sel, err := selector.Compile(c.sel)
		if err != nil {
			t.Fatal(err)
		}
		s := &Subscription{ID: "1", Selector: sel}
		if got := s.Selects(m); got != c.want {
			t.Errorf("%q selects = %v, want %v", c.sel, got, c.want)
		}
		if n := testing.AllocsPerRun(100, func() { s.Selects(m) }); n != 0 {
			t.Errorf("%q: %v allocations per Selects", c.sel, n)
		}
	}
	// The queue orders priority:09 as 9 (message.ParsePriority); the selector reads it so.
	if sel, _ := selector.Compile("JMSPriority = 9"); !(&Subscription{ID: "1", Selector: sel}).Selects(zero) {
		t.Error("JMSPriority of priority:09 is not 9")
	}
	if !(&Subscription{}).Selects(m) {
		t.Error("a subscription without a selector must select every message")
	}
	sel, _ := selector.Compile("color = 'red'")
	c := NewConn(&recWriter{v: frame.V12}, nil)
	if err := c.Add(&Subscription{ID: "1", Conn: c, Selector: sel, Prefetch: 1}); err != nil {
		t.Fatal(err)
	}
	if got := c.Subscriptions(); len(got) != 1 || got[0].Selector != "color = 'red'" {
		t.Errorf("operator view %+v, want the selector", got)
	}
}
