package router

import (
	"fmt"
	"testing"

	"github.com/titan-broker/titan/internal/frame"
)

// finalCase is one frame of a route, as the final-answer invariant sees it.
type finalCase struct {
	name  string
	route Route
	// setup are frames handled first (a BEGIN before COMMIT, say); their answers are not
	// counted.
	setup []*frame.Frame
	// frame builds the frame under test, with the receipt header when receipt is not "".
	frame func(receipt string) *frame.Frame
	// arm, when set, runs just before the frame (it makes the engine fail the next call).
	arm func(e *fakeEngine)
	// fails says the frame is refused: it gets exactly one ERROR, receipt or not.
	fails bool
}

// withReceipt appends the receipt header to hdrs when receipt is not "".
func withReceipt(receipt string, hdrs ...string) []string {
	if receipt != "" {
		hdrs = append(hdrs, "receipt", receipt)
	}
	return hdrs
}

// finalCases are, for every route of the route table, a frame that succeeds and one (or more)
// that fails — every SEND route per pattern it serves.
func finalCases() []finalCase {
	var cs []finalCase
	add := func(name string, rt Route, fails bool, arm func(*fakeEngine), setup []*frame.Frame, cmd frame.Command, body string, hdrs ...string) {
		cs = append(cs, finalCase{name: name, route: rt, fails: fails, arm: arm, setup: setup, frame: func(receipt string) *frame.Frame {
			return fr(cmd, body, withReceipt(receipt, hdrs...)...)
		}})
	}
	full := func(e *fakeEngine) { e.failNext = ErrQueueFull }
	begin := []*frame.Frame{fr(frame.CmdBegin, "", "transaction", "t")}
	sends := []struct {
		rt   Route
		dest string
	}{
		{RouteSendEvents, "/topic/a"},
		{RouteSendEvents, "/events/a"},
		{RouteSendQueue, "/queue/a"},
		{RouteSendEventsStore, "/events-store/a"},
		{RouteSendRequest, "/command/a"},
		{RouteSendRequest, "/query/a"},
		{RouteSendTempQueue, "/temp-queue/a"},
	}
	for _, s := range sends {
		hdrs := []string{"destination", s.dest}
		if s.rt == RouteSendRequest {
			hdrs = append(hdrs, "reply-to", "/temp-queue/r")
		}
		add("SEND "+s.dest, s.rt, false, nil, nil, frame.CmdSend, "b", hdrs...)
		add("SEND "+s.dest+" in a transaction", s.rt, false, nil, begin, frame.CmdSend, "b", append(hdrs, "transaction", "t")...)
		add("SEND "+s.dest+" in an unknown transaction", s.rt, true, nil, nil, frame.CmdSend, "b", append(hdrs, "transaction", "nope")...)
		if s.rt != RouteSendRequest && s.rt != RouteSendTempQueue {
			add("SEND "+s.dest+" refused by its pattern", s.rt, true, full, nil, frame.CmdSend, "b", hdrs...)
		}
	}
	add("SEND to an invalid destination", RouteReject, true, nil, nil, frame.CmdSend, "b", "destination", "/queue//a")
	add("SEND without destination", RouteReject, true, nil, nil, frame.CmdSend, "b")
	add("SUBSCRIBE to an unsupported wildcard", RouteReject, true, nil, nil, frame.CmdSubscribe, "", "destination", "/queue/a/*", "id", "1")
	for _, d := range []string{"/topic/a", "/topic/a/*", "/queue/a", "/events-store/a", "/command/a", "/temp-queue/a"} {
		add("SUBSCRIBE "+d, RouteSubscribe, false, nil, nil, frame.CmdSubscribe, "", "destination", d, "id", "1")
		add("SUBSCRIBE "+d+" without id", RouteSubscribe, true, nil, nil, frame.CmdSubscribe, "", "destination", d)
	}
	add("UNSUBSCRIBE", RouteUnsubscribe, false, nil, nil, frame.CmdUnsubscribe, "", "id", "1")
	add("UNSUBSCRIBE without id", RouteUnsubscribe, true, nil, nil, frame.CmdUnsubscribe, "")
	for _, a := range []struct {
		rt  Route
		cmd frame.Command
	}{{RouteAck, frame.CmdAck}, {RouteNack, frame.CmdNack}} {
		add(a.cmd.String(), a.rt, false, nil, nil, a.cmd, "", "id", "7")
		add(a.cmd.String()+" in a transaction", a.rt, false, nil, begin, a.cmd, "", "id", "7", "transaction", "t")
		add(a.cmd.String()+" of an unknown ack id", a.rt, true, nil, nil, a.cmd, "", "id", "bad")
		add(a.cmd.String()+" without id", a.rt, true, nil, nil, a.cmd, "")
	}
	add("BEGIN", RouteBegin, false, nil, nil, frame.CmdBegin, "", "transaction", "t")
	add("BEGIN of an open transaction", RouteBegin, true, nil, begin, frame.CmdBegin, "", "transaction", "t")
	add("BEGIN without transaction", RouteBegin, true, nil, nil, frame.CmdBegin, "")
	sendInTx := append(append([]*frame.Frame(nil), begin...), fr(frame.CmdSend, "one", "destination", "/queue/a", "transaction", "t"))
	add("COMMIT", RouteCommit, false, nil, sendInTx, frame.CmdCommit, "", "transaction", "t")
	add("COMMIT of an unknown transaction", RouteCommit, true, nil, nil, frame.CmdCommit, "", "transaction", "nope")
	add("COMMIT whose SEND fails", RouteCommit, true, full, sendInTx, frame.CmdCommit, "", "transaction", "t")
	add("ABORT", RouteAbort, false, nil, sendInTx, frame.CmdAbort, "", "transaction", "t")
	add("ABORT of an unknown transaction", RouteAbort, true, nil, nil, frame.CmdAbort, "", "transaction", "nope")
	add("DISCONNECT", RouteDisconnect, false, nil, nil, frame.CmdDisconnect, "")
	add("DISCONNECT with an open transaction", RouteDisconnect, false, nil, sendInTx, frame.CmdDisconnect, "")
	return cs
}

// TestFinalAnswersExactlyOnceEveryRoute holds the final-answer invariant for every route of
// the route table: a frame with a receipt header gets exactly one answer, a RECEIPT echoing it
// when it succeeds or an ERROR echoing it when it fails; a frame without one gets nothing when
// it succeeds and exactly one ERROR when it fails (STOMP 1.2: "RECEIPT", "ERROR").
func TestFinalAnswersExactlyOnceEveryRoute(t *testing.T) {
	covered := map[Route]bool{}
	for _, tc := range finalCases() {
		for _, receipt := range []string{"", "r-1"} {
			t.Run(fmt.Sprintf("%s/receipt=%q", tc.name, receipt), func(t *testing.T) {
				r, e, c, cl := newTest(Options{})
				for _, f := range tc.setup {
					r.Handle(c, f)
				}
				if len(cl.errs) != 0 {
					t.Fatalf("setup failed: %+v", cl.errs)
				}
				frames0 := len(cl.frames)
				f := tc.frame(receipt)
				if got := r.Resolve(&Context{Conn: c, Frame: f}); got != tc.route {
					t.Fatalf("%s resolves to route %s, want %s", f, got, tc.route)
				}
				covered[tc.route] = true
				if tc.arm != nil {
					tc.arm(e)
				}
				r.Handle(c, f)
				if p := c.pipe; p != nil && p.pending() {
					p.drain() // a deferred SEND is answered by the pipeline
				}
				frames, errs := cl.frames[frames0:], cl.errs
				switch {
				case tc.fails:
					if len(frames) != 0 || len(errs) != 1 {
						t.Fatalf("want exactly one ERROR, got frames %v errors %+v", frames, errs)
					}
					if errs[0].ReceiptID != receipt {
						t.Fatalf("ERROR receipt-id %q, want %q", errs[0].ReceiptID, receipt)
					}
				case receipt != "":
					if len(errs) != 0 || len(frames) != 1 || frames[0].Command != frame.CmdReceipt || frames[0].Value("receipt-id") != receipt {
						t.Fatalf("want exactly one RECEIPT %s, got frames %v errors %+v", receipt, frames, errs)
					}
				default:
					if len(frames) != 0 || len(errs) != 0 {
						t.Fatalf("no receipt asked and no failure: want no answer, got frames %v errors %+v", frames, errs)
					}
				}
			})
		}
	}
	for rt := range numRoutes {
		if !covered[rt] {
			t.Errorf("route %s has no case: add one to finalCases", rt)
		}
	}
}
