package auth

import (
	"testing"

	"github.com/titan-broker/titan/internal/dest"
	"github.com/titan-broker/titan/internal/frame"
	"github.com/titan-broker/titan/internal/router"
)

// stageClient is a router client with a principal; only ID and Principal are called.
type stageClient struct {
	router.Client
	id, user string
}

func (c stageClient) ID() string        { return c.id }
func (c stageClient) Principal() string { return c.user }

func stageContext(user string, cmd frame.Command, raw, group string) *router.Context {
	parse := dest.Parse
	if cmd == frame.CmdSubscribe {
		parse = dest.ParseFilter
	}
	d, err := parse(raw, dest.PatternEvents)
	if err != nil {
		panic(err)
	}
	return &router.Context{
		Conn:     &router.Conn{Client: stageClient{id: "titan-0000", user: user}},
		Frame:    &frame.Frame{Command: cmd},
		Dest:     d,
		Identity: dest.IdentityOf(group, d),
		Receipt:  "r-1",
	}
}

func TestStageDecisions(t *testing.T) {
	a := newTestAuthority(t)
	existing := map[string]bool{"orders.old": true, "audit.old": true}
	s := NewStage(a, func(id dest.Identity) bool { return existing[id.Channel] }, nil)
	cases := []struct {
		user string
		cmd  frame.Command
		dest string
		ok   bool
	}{
		{"app", frame.CmdSend, "/queue/orders.eu", true},             // send + create
		{"app", frame.CmdSubscribe, "/queue/orders.eu", false},       // no consume
		{"worker", frame.CmdSubscribe, "/queue/orders.old", true},    // consume on an existing queue
		{"worker", frame.CmdSubscribe, "/queue/orders.new", false},   // ... but may not create one
		{"app", frame.CmdSend, "/topic/prices.eu", false},            // no send on events
		{"app", frame.CmdSend, "/temp-queue/titan-0000.reply", true}, // its own temp-queue
		{"app", frame.CmdSend, "/temp-queue/titan-9999.reply", false},
		{"admin", frame.CmdSend, "/temp-queue/titan-9999.reply", true},
		{"", frame.CmdSend, "/queue/orders.eu", false},                  // a client without a principal
		{"admin", frame.CmdSend, "/command/orders/cancel", true},        // request
		{"app", frame.CmdSend, "/command/orders/cancel", false},         // no send on commands
		{"worker", frame.CmdSubscribe, "/command/orders/cancel", false}, // responder without consume
		{"admin", frame.CmdSubscribe, "/events-store/audit", true},      // replay needs consume
		{"app", frame.CmdSend, "/events-store/audit.new", true},         // send + create makes a log
		{"worker", frame.CmdSend, "/events-store/audit.new", false},     // send without create: no new log
		{"worker", frame.CmdSend, "/events-store/audit.old", true},      // ... but appends to an existing one
		{"app", frame.CmdSubscribe, "/events-store/audit", false},
	}
	for _, c := range cases {
		ctx := stageContext(c.user, c.cmd, c.dest, "")
		s.Apply(ctx)
		if (ctx.Err == nil) != c.ok {
			t.Errorf("%s %s %s: err %v, want ok=%v", c.user, c.cmd, c.dest, ctx.Err, c.ok)
		}
		if ctx.Err != nil && (ctx.Err.Reason != "access refused" || ctx.Err.ReceiptID != "r-1" || !ctx.Err.Fatal) {
			t.Errorf("refusal %+v", ctx.Err)
		}
	}
	// A wildcard SUBSCRIBE is admitted with a delivery filter.
	ctx := stageContext("app", frame.CmdSubscribe, "/topic/>", "")
	s.Apply(ctx)
	if ctx.Err != nil || ctx.Allow() == nil {
		t.Fatalf("wildcard: err %v, allow set %v", ctx.Err, ctx.Allow() != nil)
	}
	if !ctx.Allow()("prices.eu") || ctx.Allow()("secret.x") {
		t.Fatal("the wildcard filter does not follow consume permissions")
	}
	// An exact events subscription is filtered too (a reload can withdraw consume).
	ctx = stageContext("app", frame.CmdSubscribe, "/topic/prices.eu", "")
	s.Apply(ctx)
	if ctx.Err != nil || ctx.Allow() == nil || !ctx.Allow()("prices.eu") {
		t.Fatalf("exact events subscription: err %v, allow set %v", ctx.Err, ctx.Allow() != nil)
	}
	if s.Refused.Load() == 0 {
		t.Fatal("refusals not counted")
	}
}

// BenchmarkStageSend is the authorization stage's cost per SEND once the decision is cached.
func BenchmarkStageSend(b *testing.B) {
	a := newTestAuthority(b)
	s := NewStage(a, func(dest.Identity) bool { return true }, nil)
	ctx := stageContext("app", frame.CmdSend, "/queue/orders.eu.retail", "")
	b.ReportAllocs()
	for b.Loop() {
		s.Apply(ctx)
		if ctx.Err != nil {
			b.Fatal(ctx.Err)
		}
	}
}
