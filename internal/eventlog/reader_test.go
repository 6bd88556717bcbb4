package eventlog

import (
	"regexp"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/titan-broker/titan/internal/delivery"
	"github.com/titan-broker/titan/internal/dest"
	"github.com/titan-broker/titan/internal/dispatch"
	"github.com/titan-broker/titan/internal/durable"
	"github.com/titan-broker/titan/internal/frame"
	"github.com/titan-broker/titan/internal/message"
	"github.com/titan-broker/titan/internal/store/memstore"
)

var sequenceHeader = regexp.MustCompile(`\nsequence:(\d+)\n`)

// settlingWriter is a client that acknowledges each MESSAGE before its write returns: it
// settles the sequence on the reader from inside WriteMessage, which is the order a fast
// client's ACK can take (read and settled before DeliverSequenced returns to the reader).
type settlingWriter struct {
	mu      sync.Mutex
	reader  func() *reader
	written []uint64
	refuse  uint64 // a sequence refused (the connection over its outbound limit) while set
	refused int    // how many writes were refused
}

func (w *settlingWriter) Version() frame.Version { return frame.V12 }
func (w *settlingWriter) QueuedBytes() int64     { return 0 }
func (w *settlingWriter) WriteEvent(p *frame.Buf, shared []byte, _ bool) (bool, <-chan struct{}) {
	return w.WriteMessage(p, shared), nil
}

func (w *settlingWriter) WriteMessage(prefix *frame.Buf, _ []byte) bool {
	m := sequenceHeader.FindSubmatch(prefix.B)
	seq, _ := strconv.ParseUint(string(m[1]), 10, 64)
	w.mu.Lock()
	if seq == w.refuse {
		w.refused++
		w.mu.Unlock()
		return false // the caller keeps prefix
	}
	w.mu.Unlock()
	frame.PutBuf(prefix)
	w.reader().SettleOne(seq, false)
	w.mu.Lock()
	w.written = append(w.written, seq)
	w.mu.Unlock()
	return true
}

// An ACK settled before the delivery returns to the reader still counts: the durable
// position passes every acknowledged sequence (the ACK of the last MESSAGE was forgotten,
// and a resume delivered it again, when the reader recorded a sequence as pending only
// after its write).
func TestAckSettledDuringDeliveryMovesThePosition(t *testing.T) {
	const n = 5
	log, w, _ := settlingSubscription(t, n, 0)
	waitWritten(t, w, n)
	ls := w.reader()
	ls.mu.Lock()
	pending := len(ls.pending)
	ls.mu.Unlock()
	if pending != 0 {
		t.Errorf("%d sequences still pending after every one was acknowledged", pending)
	}
	checkPosition(t, log, n)
}

// A delivery the connection refuses leaves no trace: while sequence 3 is refused the saved
// position stays at 2 (3 is neither pending nor acknowledged), and once the connection
// takes it again every sequence is delivered and the position reaches the last.
func TestRefusedDeliveryIsNotCountedAsAcknowledged(t *testing.T) {
	const n = 5
	log, w, sub := settlingSubscription(t, n, 3)
	deadline := time.Now().Add(5 * time.Second)
	for {
		w.mu.Lock()
		refused, written := w.refused, len(w.written)
		w.mu.Unlock()
		if refused > 0 && written == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("written %d, refused %d", written, refused)
		}
		time.Sleep(time.Millisecond)
	}
	ls := w.reader()
	ls.mu.Lock()
	_, pending3 := ls.pending[3]
	pos := ls.positionLocked()
	ls.mu.Unlock()
	if pending3 || pos != 2 {
		t.Fatalf("after the refused write of 3: pending %v, position %d; want not pending, 2", pending3, pos)
	}
	checkPosition(t, log, 2)
	w.mu.Lock()
	w.refuse = 0
	w.mu.Unlock()
	sub.Conn.Resume()
	waitWritten(t, w, n)
	checkPosition(t, log, n)
}

// settlingSubscription stores n messages on a log and subscribes a durable client-individual
// subscription from the first through a settlingWriter that refuses sequence refuse.
func settlingSubscription(t *testing.T, n int, refuse uint64) (*durable.Log, *settlingWriter, *delivery.Subscription) {
	t.Helper()
	log := durable.New(memstore.New(), nil)
	p := New(dispatch.New(dispatch.Options{}), Options{Store: log, PollBase: time.Millisecond, PollMax: 10 * time.Millisecond})
	t.Cleanup(p.Close)
	for i := range n {
		if err := log.Persist(settleLog, &message.Message{Destination: "/events-store/fast-acks", Body: []byte{byte(i)}}); err != nil {
			t.Fatal(err)
		}
	}
	w := &settlingWriter{refuse: refuse}
	sub := &delivery.Subscription{ID: "a", Conn: delivery.NewConn(w, nil), Group: "default",
		Dest: dest.Destination{Pattern: dest.PatternEventsStore, Channel: "fast-acks"}, Ack: delivery.AckClientIndividual,
		Prefetch: 100, Start: delivery.StartPosition{Kind: delivery.StartFirst}, DurableName: "d"}
	w.reader = func() *reader {
		p.mu.Lock()
		defer p.mu.Unlock()
		return p.readers[sub]
	}
	if err := p.Subscribe(sub); err != nil {
		t.Fatal(err)
	}
	return log, w, sub
}

var settleLog = dest.Identity{Group: "default", Pattern: dest.PatternEventsStore, Channel: "fast-acks"}

// waitWritten waits until w wrote n MESSAGEs.
func waitWritten(t *testing.T, w *settlingWriter, n int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		w.mu.Lock()
		done := len(w.written) == n
		w.mu.Unlock()
		if done {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("delivered %v, want %d messages", w.written, n)
		}
		time.Sleep(time.Millisecond)
	}
}

// checkPosition checks the saved position of the subscription "d" is want, with nothing
// acknowledged above it.
func checkPosition(t *testing.T, log *durable.Log, want uint64) {
	t.Helper()
	pos, acked, ok, err := log.Position(durableKey(settleLog, "d"))
	if err != nil || !ok {
		t.Fatalf("position: ok %v, err %v", ok, err)
	}
	if pos != want || len(acked) != 0 {
		t.Errorf("saved position %d (acknowledged above it %v), want %d", pos, acked, want)
	}
}
