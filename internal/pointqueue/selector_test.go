package pointqueue

import (
	"testing"

	"github.com/titan-broker/titan/internal/address"
	"github.com/titan-broker/titan/internal/delivery"
	"github.com/titan-broker/titan/internal/dest"
	"github.com/titan-broker/titan/internal/dispatch"
	"github.com/titan-broker/titan/internal/frame"
	"github.com/titan-broker/titan/internal/message"
	"github.com/titan-broker/titan/internal/selector"
)

// TestSelectorConsumers: a consumer with a selector receives only the messages it selects,
// whether it subscribed before its queue existed (the factory hands it over) or after; a
// message no consumer selects keeps its place, in order, for a consumer that takes it.
func TestSelectorConsumers(t *testing.T) {
	for _, early := range []bool{true, false} {
		d := dispatch.New(dispatch.Options{})
		p := New(d, Options{})
		create := func() {
			if _, _, err := d.Create(jobs, address.Settings{}); err != nil {
				t.Fatal(err)
			}
		}
		if !early {
			create()
		}
		sel, err := selector.Compile("color = 'red'")
		if err != nil {
			t.Fatal(err)
		}
		red := &fakeWriter{}
		if err := p.Subscribe(&delivery.Subscription{ID: "red", Conn: delivery.NewConn(red, nil), Group: "default",
			Dest: dest.Destination{Pattern: dest.PatternQueues, Channel: "jobs"}, Ack: delivery.AckAuto, Selector: sel}); err != nil {
			t.Fatal(err)
		}
		if early {
			create()
		}
		for i, color := range []string{"blue", "red", "blue", "red"} {
			m := message.Pack(&message.Parts{IDPrefix: "t", Group: "default", Destination: []byte("/queue/jobs"),
				Headers: []frame.Header{{Key: "color", Value: color}}, Body: []byte(color + string(rune('1'+i)))})
			if _, err := p.Publish(jobs, m, nil); err != nil {
				t.Fatal(err)
			}
		}
		if red.got() != "red2 red4" {
			t.Fatalf("early=%v: the red consumer got %q, want red2 red4", early, red.got())
		}
		plain := &fakeWriter{}
		if err := p.Subscribe(&delivery.Subscription{ID: "any", Conn: delivery.NewConn(plain, nil), Group: "default",
			Dest: dest.Destination{Pattern: dest.PatternQueues, Channel: "jobs"}, Ack: delivery.AckAuto}); err != nil {
			t.Fatal(err)
		}
		if plain.got() != "blue1 blue3" {
			t.Fatalf("early=%v: a consumer without a selector got %q, want blue1 blue3", early, plain.got())
		}
		p.Close()
		d.Close()
	}
}
