package router

import (
	"errors"
	"testing"

	"github.com/titan-broker/titan/internal/dest"
	"github.com/titan-broker/titan/internal/frame"
	"github.com/titan-broker/titan/internal/message"
)

// fakeBatch records PublishBatch calls; it batches queues only.
type fakeBatch struct {
	calls [][]string // bodies per call
	err   error
}

func (b *fakeBatch) Batches(id dest.Identity) bool { return id.Pattern == dest.PatternQueues }
func (b *fakeBatch) PublishBatch(ids []dest.Identity, ms []*message.Message, _ <-chan struct{}) error {
	var bodies []string
	for _, m := range ms {
		bodies = append(bodies, string(m.Body))
	}
	b.calls = append(b.calls, bodies)
	return b.err
}

type partialErr struct{}

func (partialErr) Error() string { return "part stored" }
func (partialErr) Partial() bool { return true }

// With a BatchPublisher, a COMMIT's SENDs to the destinations it batches are one
// PublishBatch call, in order; the other SENDs and the ACKs take effect only after it
// succeeds; a failure is the COMMIT's ERROR and nothing else takes effect.
func TestCommitUsesBatchPublisher(t *testing.T) {
	b := &fakeBatch{}
	r, e, c, cl := newTest(Options{Batch: b})
	tx := func(name string) {
		r.Handle(c, fr(frame.CmdBegin, "", "transaction", name))
		r.Handle(c, fr(frame.CmdSend, "q1", "destination", "/queue/a", "transaction", name))
		r.Handle(c, fr(frame.CmdSend, "ev", "destination", "/topic/x", "transaction", name))
		r.Handle(c, fr(frame.CmdAck, "", "id", "7", "transaction", name))
		r.Handle(c, fr(frame.CmdSend, "q2", "destination", "/queue/b", "transaction", name))
		r.Handle(c, fr(frame.CmdCommit, "", "transaction", name, "receipt", "r-"+name))
	}
	tx("ok")
	if len(b.calls) != 1 || len(b.calls[0]) != 2 || b.calls[0][0] != "q1" || b.calls[0][1] != "q2" {
		t.Fatalf("PublishBatch calls = %q, want one with q1, q2", b.calls)
	}
	if len(e.published) != 1 || string(e.msgs[0].Body) != "ev" || len(e.acks) != 1 {
		t.Fatalf("after the batch: published %v, acks %v; want the event and the ACK", e.published, e.acks)
	}
	if cl.frames[len(cl.frames)-1].Value("receipt-id") != "r-ok" {
		t.Fatal("COMMIT receipt missing")
	}

	b.err = errors.New("leader gone")
	tx("fails")
	if len(e.published) != 1 || len(e.acks) != 1 {
		t.Errorf("a failed batch let other effects happen: published %v, acks %v", e.published, e.acks)
	}
	if len(cl.errs) != 1 || cl.errs[0].Reason != "message not stored" {
		t.Fatalf("failed COMMIT errors = %+v", cl.errs)
	}

	b.err = partialErr{}
	r2, _, c2, cl2 := newTest(Options{Batch: b})
	r2.Handle(c2, fr(frame.CmdBegin, "", "transaction", "p"))
	r2.Handle(c2, fr(frame.CmdSend, "q", "destination", "/queue/a", "transaction", "p"))
	r2.Handle(c2, fr(frame.CmdCommit, "", "transaction", "p"))
	if len(cl2.errs) != 1 || cl2.errs[0].Reason != "transaction partly stored" {
		t.Fatalf("partly stored COMMIT errors = %+v", cl2.errs)
	}
}
