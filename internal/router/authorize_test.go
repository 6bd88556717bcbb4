package router

import (
	"slices"
	"testing"

	"github.com/titan-broker/titan/internal/dest"
	"github.com/titan-broker/titan/internal/frame"
	"github.com/titan-broker/titan/internal/message"
)

// refuseStage refuses every frame whose destination's channel is "secret", recording what
// it saw.
type refuseStage struct{ seen *[]string }

func (s refuseStage) Apply(c *Context) {
	*s.seen = append(*s.seen, c.Frame.Command.String()+" "+c.Identity.Channel)
	if c.Message != nil {
		panic("Authorize ran after the message was built")
	}
	if c.Identity.Channel == "secret" {
		c.Err = &frame.ProtocolError{Reason: "access refused", ReceiptID: c.Receipt, Fatal: true}
	}
}

// countingStore counts what reached the durable-acceptance port.
type countingStore struct{ persisted int }

func (s *countingStore) Persist(dest.Identity, *message.Message) error { s.persisted++; return nil }
func (s *countingStore) PersistAsync(dest.Identity, *message.Message) (func() error, error) {
	s.persisted++
	return func() error { return nil }, nil
}
func (s *countingStore) Forget(dest.Identity, *message.Message) {}
func (s *countingStore) PersistAll(_ []dest.Identity, ms []*message.Message) error {
	s.persisted += len(ms)
	return nil
}

// The Authorize slot runs after the group stage of SEND and SUBSCRIBE routes and before the
// message is built, buffered by a transaction or stored: a refused SEND stores nothing, in
// a transaction or not.
func TestAuthorizeRunsBeforeMessageTransactionAndStore(t *testing.T) {
	var seen []string
	st := &countingStore{}
	r, e, c, cl := newTest(Options{Authorize: refuseStage{&seen}, Store: st})
	r.Handle(c, fr(frame.CmdSend, "ok", "destination", "/queue/open", "receipt", "r1"))
	r.Handle(c, fr(frame.CmdBegin, "", "transaction", "t1"))
	r.Handle(c, fr(frame.CmdSend, "no", "destination", "/queue/secret", "transaction", "t1", "receipt", "r2"))
	if len(cl.errs) != 1 || cl.errs[0].Reason != "access refused" || cl.errs[0].ReceiptID != "r2" {
		t.Fatalf("errs %+v", cl.errs)
	}
	r.Handle(c, fr(frame.CmdSend, "no", "destination", "/queue/secret", "receipt", "r3"))
	r.Handle(c, fr(frame.CmdSubscribe, "", "destination", "/queue/secret", "id", "1"))
	r.Close(c)
	if st.persisted != 1 || len(e.published) != 1 || e.published[0].Channel != "open" {
		t.Fatalf("persisted %d, published %v: a refused SEND reached the store or the engine", st.persisted, e.published)
	}
	want := []string{"SEND open", "SEND secret", "SEND secret", "SUBSCRIBE secret"}
	if len(seen) != len(want) {
		t.Fatalf("Authorize saw %v, want %v", seen, want)
	}
	for i := range want {
		if seen[i] != want[i] {
			t.Fatalf("Authorize saw %v, want %v", seen, want)
		}
	}
}

// lazyStore is a countingStore that also takes messages lazily (LazyPersister).
type lazyStore struct {
	countingStore
	lazy []string // destinations stored through PersistLazy
	kick []string // destinations stored through PersistAsync
}

func (s *lazyStore) PersistAsync(id dest.Identity, m *message.Message) (func() error, error) {
	s.kick = append(s.kick, id.Channel)
	return s.countingStore.PersistAsync(id, m)
}

func (s *lazyStore) PersistLazy(id dest.Identity, m *message.Message) (func() error, error) {
	s.lazy = append(s.lazy, id.Channel)
	return s.countingStore.PersistAsync(id, m)
}

// A queue SEND without a receipt, published before its commit, is stored lazily (its commit
// starts when the pipeline awaits it, so a consumer that acknowledges it first spares the
// write); a SEND that asked for a receipt, and any events-store SEND (published only after
// its commit), starts its commit at once.
func TestStoreStageIsLazyOnlyForQueueSendsWithoutReceipt(t *testing.T) {
	st := &lazyStore{}
	r, _, c, _ := newTest(Options{Store: st})
	r.Handle(c, fr(frame.CmdSend, "x", "destination", "/queue/plain"))
	r.Handle(c, fr(frame.CmdSend, "x", "destination", "/queue/receipted", "receipt", "r1"))
	r.Handle(c, fr(frame.CmdSend, "x", "destination", "/events-store/log"))
	r.Close(c)
	if len(st.lazy) != 1 || st.lazy[0] != "plain" {
		t.Fatalf("stored lazily: %v, want [plain]", st.lazy)
	}
	if len(st.kick) != 2 || st.kick[0] != "receipted" || st.kick[1] != "log" {
		t.Fatalf("stored with an immediate commit: %v, want [receipted log]", st.kick)
	}
}

// flipStage refuses SENDs to channel "later" once *refuse is set (a users-file reload in
// between), recording every check.
type flipStage struct {
	refuse *bool
	seen   *[]string
}

func (s flipStage) Apply(c *Context) {
	*s.seen = append(*s.seen, c.Frame.Command.String()+" "+c.Identity.Channel)
	if *s.refuse && c.Identity.Channel == "later" {
		c.Err = &frame.ProtocolError{Reason: "access refused", ReceiptID: c.Receipt, Fatal: true}
	}
}

// Issue #29: COMMIT authorizes the transaction's SENDs again, so a right withdrawn after
// the SEND aborts the transaction with nothing stored or published.
func TestCommitAuthorizesAgain(t *testing.T) {
	var seen []string
	refuse := false
	st := &countingStore{}
	r, e, c, cl := newTest(Options{Authorize: flipStage{&refuse, &seen}, Store: st})
	r.Handle(c, fr(frame.CmdBegin, "", "transaction", "t1"))
	r.Handle(c, fr(frame.CmdSend, "a", "destination", "/queue/open", "transaction", "t1"))
	r.Handle(c, fr(frame.CmdSend, "b", "destination", "/queue/later", "transaction", "t1"))
	refuse = true
	r.Handle(c, fr(frame.CmdCommit, "", "transaction", "t1", "receipt", "c1"))
	if len(cl.errs) != 1 || cl.errs[0].Reason != "access refused" || cl.errs[0].ReceiptID != "c1" {
		t.Fatalf("errs %+v", cl.errs)
	}
	if st.persisted != 0 || len(e.published) != 0 {
		t.Fatalf("persisted %d, published %v after a refused COMMIT", st.persisted, e.published)
	}
}

// Issue #29: the broker answers a request on its reply-to for the requester, so the
// requester needs send on the reply-to (and create for a queue it would make).
func TestRequestReplyToIsAuthorized(t *testing.T) {
	var seen []string
	r, _, c, cl := newTest(Options{Authorize: refuseStage{&seen}})
	r.Handle(c, fr(frame.CmdSend, "req", "destination", "/command/do", "reply-to", "/queue/secret", "receipt", "r1"))
	if len(cl.errs) != 1 || cl.errs[0].Reason != "access refused" || cl.errs[0].ReceiptID != "r1" {
		t.Fatalf("errs %+v (Authorize saw %v)", cl.errs, seen)
	}
	if len(seen) != 2 || seen[1] != "SEND secret" {
		t.Fatalf("Authorize saw %v, want the request and then its reply-to", seen)
	}
}

// everyQueueStore is a countingStore that is the only storage of queue messages
// (QueueStorer, as cluster mode's Persister), recording the destinations it was given.
type everyQueueStore struct {
	countingStore
	every bool
	got   []string
}

func (s *everyQueueStore) StoresEveryQueueSend() bool { return s.every }

func (s *everyQueueStore) PersistAsync(id dest.Identity, m *message.Message) (func() error, error) {
	s.got = append(s.got, id.Channel)
	return s.countingStore.PersistAsync(id, m)
}

func (s *everyQueueStore) Persist(id dest.Identity, m *message.Message) error {
	s.got = append(s.got, id.Channel)
	return s.countingStore.Persist(id, m)
}

// Issue 28: a Persister that stores every queue SEND (cluster mode) gets a queue's
// persistent:false SENDs through the store stage too, so they are pipelined like
// persistent ones; a single node's store does not, and topics are never stored.
func TestStoreStageTakesEveryQueueSendWhenThePersisterAsks(t *testing.T) {
	for _, every := range []bool{true, false} {
		st := &everyQueueStore{every: every}
		r, e, c, _ := newTest(Options{Store: st})
		r.Handle(c, fr(frame.CmdSend, "x", "destination", "/queue/plain", "persistent", "false"))
		r.Handle(c, fr(frame.CmdSend, "x", "destination", "/queue/receipted", "persistent", "false", "receipt", "r1"))
		r.Handle(c, fr(frame.CmdSend, "x", "destination", "/queue/durable"))
		r.Handle(c, fr(frame.CmdSend, "x", "destination", "/topic/news", "persistent", "false"))
		r.Close(c)
		want := []string{"durable"}
		if every {
			want = []string{"plain", "receipted", "durable"}
		}
		if !slices.Equal(st.got, want) {
			t.Fatalf("every=%v: stored %v, want %v", every, st.got, want)
		}
		if len(e.published) != 4 {
			t.Fatalf("every=%v: published %v, want all 4 SENDs", every, e.published)
		}
	}
}
