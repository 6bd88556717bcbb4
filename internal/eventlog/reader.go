package eventlog

import (
	"sync"

	"github.com/titan-broker/titan/internal/delivery"
	"github.com/titan-broker/titan/internal/dest"
	"github.com/titan-broker/titan/internal/message"
	"github.com/titan-broker/titan/internal/outbox"
)

// autoSaveEvery is how many auto-acknowledged deliveries a durable subscription makes between
// position saves; after a crash at most this many are delivered again.
const autoSaveEvery = 64

// busyBytes is the outbound backlog above which a log subscription's sink counts as busy.
const busyBytes = 256 << 10

// reader reads one events-store subscription's log through an outbox poller. It is the
// poller's Sink.
type reader struct {
	sub    *delivery.Subscription
	id     dest.Identity
	p      *Pattern
	poller *outbox.Poller
	key    string           // durable position key; "" when not durable
	tail   *tail            // the log's shared live tail
	next   *message.Message // the tail message being delivered (poller goroutine only)

	mu            sync.Mutex          // guards the fields below
	pending       map[uint64]struct{} // delivered, unacknowledged sequences (client modes)
	lastDelivered uint64
	saved         uint64
	sinceSave     int
}

func (p *Pattern) newReader(sub *delivery.Subscription, id dest.Identity, t *tail) (*reader, error) {
	st := p.opts.Store
	ls := &reader{sub: sub, id: id, p: p, tail: t, pending: map[uint64]struct{}{}}
	first, last, err := st.Bounds(id)
	if err != nil {
		return nil, err
	}
	var from uint64
	switch sub.Start.Kind {
	case delivery.StartNew:
		from = last + 1
	case delivery.StartFirst:
		from = first
	case delivery.StartLast:
		from = max(last, first)
	case delivery.StartSeq:
		from = sub.Start.Seq
	case delivery.StartTime:
		if from, err = st.SeekTime(id, sub.Start.Time); err != nil {
			return nil, err
		}
	}
	if from == 0 {
		from = 1
	}
	if sub.DurableName != "" {
		ls.key = durableKey(id, sub.DurableName)
		if from, err = p.attachDurable(ls.key, from); err != nil {
			ls.key = ""
			return nil, err
		}
		ls.saved = from - 1
	}
	ls.lastDelivered = from - 1
	src := func(from uint64, fn func(uint64, []byte) bool) error {
		// Caught up: take the next messages from the shared tail while it has them.
		fromTail := false
		for m := t.get(from); m != nil; m = t.get(from) {
			ls.next = m
			ok := fn(from, nil)
			ls.next = nil
			if !ok {
				return nil
			}
			from++
			fromTail = true
		}
		if fromTail && from > t.published() {
			return nil // nothing newer was published: the next publish kicks the poller
		}
		return st.Scan(id, from, fn)
	}
	ls.poller = outbox.NewPoller(src, ls, outbox.NewRegulator(p.opts.PollBase, p.opts.PollMax), from, 256)
	return ls, nil
}

// Busy implements outbox.Sink: skip fetching while the connection still has a backlog or the
// subscription has no credit.
func (ls *reader) Busy() bool {
	return ls.sub.Conn.Writer().QueuedBytes() > busyBytes || !ls.sub.HasCredit()
}

// Deliver implements outbox.Sink.
// A message from the shared tail (ls.next) is delivered as it is, shared with every other
// reader; a record from the store is decoded.
func (ls *reader) Deliver(seq uint64, data []byte) bool {
	m := ls.next
	if m == nil || m.Sequence != seq {
		var err error
		if m, err = message.Decode(data); err != nil {
			ls.p.log.Error("skipping unreadable events-store record", "log", ls.id.String(), "seq", seq, "err", err)
			return true
		}
		m.Sequence = seq
	}
	if !ls.sub.Conn.DeliverSequenced(ls.sub, m, ls, seq) {
		return false // shed: the record stays in the log; the poller fetches it again
	}
	ls.p.d.LogDelivered.Add(1)
	ls.mu.Lock()
	ls.lastDelivered = seq
	if ls.sub.Ack != delivery.AckAuto {
		ls.pending[seq] = struct{}{}
		ls.mu.Unlock()
		return true
	}
	ls.sinceSave++
	save := ls.key != "" && ls.sinceSave >= autoSaveEvery
	ls.mu.Unlock()
	if save {
		ls.savePosition()
	}
	return true
}

// Settle implements delivery.Source: acknowledged (or, for nack, abandoned-for-now)
// sequences.
func (ls *reader) Settle(seqs []uint64, nack bool) {
	if nack {
		// The log keeps the message; a NACKed sequence holds the durable position back so that a
		// later resume delivers it again.
		ls.poller.Kick()
		return
	}
	ls.mu.Lock()
	for _, s := range seqs {
		delete(ls.pending, s)
	}
	ls.mu.Unlock()
	ls.savePosition()
	ls.poller.Kick()
}

// SettleOne implements delivery.Source for one sequence.
func (ls *reader) SettleOne(seq uint64, nack bool) {
	seqs := [1]uint64{seq}
	ls.Settle(seqs[:], nack)
}

// position is the highest sequence below which everything delivered was acknowledged.
func (ls *reader) position() uint64 {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	if len(ls.pending) == 0 {
		return ls.lastDelivered
	}
	low := uint64(0)
	for s := range ls.pending {
		if low == 0 || s < low {
			low = s
		}
	}
	return low - 1
}

func (ls *reader) savePosition() {
	if ls.key == "" {
		return
	}
	pos := ls.position()
	ls.mu.Lock()
	if pos <= ls.saved {
		ls.mu.Unlock()
		return
	}
	ls.saved = pos
	ls.sinceSave = 0
	ls.mu.Unlock()
	if err := ls.p.opts.Store.SavePosition(ls.key, pos); err != nil {
		ls.p.log.Error("saving durable position", "key", ls.key, "err", err)
	}
}

// stop ends the reader: its poller stops, a durable subscription's position is saved
// (always, so that the save time records when it went offline, for idle expiry) and its key
// is released.
func (ls *reader) stop() {
	ls.poller.Stop()
	if ls.key == "" {
		return
	}
	pos := ls.position()
	ls.mu.Lock()
	pos = max(pos, ls.saved)
	ls.saved, ls.sinceSave = pos, 0
	ls.mu.Unlock()
	if err := ls.p.opts.Store.SavePosition(ls.key, pos); err != nil {
		ls.p.log.Error("saving durable position", "key", ls.key, "err", err)
	}
	ls.p.releaseDurable(ls.key)
}
