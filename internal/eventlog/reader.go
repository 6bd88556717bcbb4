package eventlog

import (
	"slices"
	"sync"

	"github.com/titan-broker/titan/internal/delivery"
	"github.com/titan-broker/titan/internal/dest"
	"github.com/titan-broker/titan/internal/message"
	"github.com/titan-broker/titan/internal/outbox"
)

// autoSaveEvery is how many auto-acknowledged deliveries a durable subscription makes between
// position saves; after a crash at most this many are delivered again.
const autoSaveEvery = 64

// maxAckedAbove bounds the individually acknowledged sequences a durable subscription keeps
// above its position (ack:client-individual past an unacknowledged or NACKed message): the
// lowest this many are saved with the position and not delivered again when it resumes;
// acknowledgements beyond them are delivered again after a resume. 8 bytes each in the
// saved value.
const maxAckedAbove = 4096

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
	log    *logState        // the log's live state (its readers and shared live tail)
	next   *message.Message // the tail message being delivered (under the poller's delivery lock)

	// saveMu serialises the position saves (savePosition, stop): each computes a position
	// under mu and writes it after releasing mu, so without it an older position computed on
	// one goroutine could be written after a newer one from another. Taken before mu.
	saveMu sync.Mutex

	mu            sync.Mutex          // guards the fields below
	pending       map[uint64]struct{} // delivered, unacknowledged sequences (client modes)
	order         []uint64            // pending's sequences ascending from order[head] (settled ones are skipped lazily)
	head          int
	lastDelivered uint64
	saved         uint64
	sinceSave     int
	// skip are the sequences above lastDelivered acknowledged individually before the durable
	// subscription resumed (ascending): they are not delivered again, and kept in the saved
	// position until the reader passes them.
	skip []uint64
	// ackedDirty is set when an acknowledgement may have changed the individually
	// acknowledged sequences to save; savedAcked are the ones last saved.
	ackedDirty bool
	savedAcked []uint64
}

func (p *Pattern) newReader(sub *delivery.Subscription, id dest.Identity, lg *logState) (*reader, error) {
	st := p.opts.Store
	t := &lg.tail
	ls := &reader{sub: sub, id: id, p: p, log: lg, pending: map[uint64]struct{}{}}
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
		var acked []uint64
		if from, acked, err = p.attachDurable(ls.key, from); err != nil {
			ls.key = ""
			return nil, err
		}
		for _, a := range acked {
			if a >= from {
				ls.skip = append(ls.skip, a)
			}
		}
		ls.saved = from - 1
	}
	ls.lastDelivered = from - 1
	// Every record above last is published after the tail was made (the tail exists before
	// Bounds is read), so it enters the tail and kicks the poller; the store holds records
	// up to last that the tail may never see.
	scanTo := last
	src := func(from uint64, fn func(uint64, []byte) bool) error {
		for {
			// Caught up: take the next messages from the shared tail while it has them.
			for m := t.get(from); m != nil; m = t.get(from) {
				ls.next = m
				ok := fn(from, nil)
				ls.next = nil
				if !ok {
					return nil
				}
				from++
			}
			if from > scanTo && from > t.published() {
				// Nothing at or above from was published yet: a record there may be committed,
				// but its publish (after its fsync) puts it on the tail and kicks the poller, so
				// the store is not read for it.
				return nil
			}
			// Behind the tail: the record left the ring, was too big for it, was published
			// before the tail was made, or is published out of order by another connection
			// (its producer's pipeline has not published it yet, while others published
			// later ones). The store is read only until the tail has the next record again:
			// a gap left by a late publication costs its own records, not a read back (and a
			// decode) of everything after it.
			if from > scanTo {
				t.missed(from) // the ring grows when the reader fell behind it
			}
			stopped, resume := false, false
			err := st.Scan(id, from, func(seq uint64, data []byte) bool {
				if t.get(seq) != nil {
					// The tail takes over at seq; the store holds nothing in [from, seq)
					// (retention took it, or it was never committed), as Scan would skip it.
					from, resume = seq, true
					return false
				}
				if !fn(seq, data) {
					stopped = true
					return false
				}
				from = seq + 1
				return true
			})
			if err != nil || stopped || !resume {
				return err
			}
		}
	}
	ls.poller = outbox.NewPoller(src, ls, outbox.NewRegulator(p.opts.PollBase, p.opts.PollMax), from, 256)
	return ls, nil
}

// offer delivers m, just published, on the caller's goroutine when the reader is caught up
// and its poller idle (outbox.Poller.Offer); false: the poller must fetch it.
func (ls *reader) offer(m *message.Message) bool {
	seq := m.Sequence
	return ls.poller.Offer(seq, func() bool {
		ls.next = m
		ok := ls.Deliver(seq, nil)
		ls.next = nil
		return ok
	})
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
	if len(ls.skip) > 0 && ls.skipped(seq) {
		return true
	}
	m := ls.next
	if m == nil || m.Sequence != seq {
		var err error
		if m, err = message.Decode(data); err != nil {
			ls.p.log.Error("skipping unreadable events-store record", "log", ls.id.String(), "seq", seq, "err", err)
			return true
		}
		m.Sequence = seq
	}
	if ls.sub.Ack != delivery.AckAuto {
		return ls.deliverPending(seq, m)
	}
	if !ls.sub.Conn.DeliverSequenced(ls.sub, m, ls, seq) {
		return false // shed: the record stays in the log; the poller fetches it again
	}
	ls.p.d.LogDelivered.Add(1)
	ls.mu.Lock()
	ls.lastDelivered = seq
	ls.sinceSave++
	save := ls.key != "" && ls.sinceSave >= autoSaveEvery
	ls.mu.Unlock()
	if save {
		ls.savePosition(true)
	}
	return true
}

// deliverPending delivers seq in a client ack mode. seq is recorded as pending before its
// MESSAGE is written, not after: the client may read the frame and its ACK may be settled
// (Settle, on the connection's goroutine) before DeliverSequenced returns, and an ACK
// settled before the sequence was pending would be forgotten, holding the durable position
// back for good (a resume would deliver an acknowledged message again). A shed delivery
// takes the record back out.
func (ls *reader) deliverPending(seq uint64, m *message.Message) bool {
	ls.mu.Lock()
	added := ls.addPendingLocked(seq)
	last := ls.lastDelivered
	ls.lastDelivered = max(last, seq) // seq is pending: the position stays below it
	ls.mu.Unlock()
	if !ls.sub.Conn.DeliverSequenced(ls.sub, m, ls, seq) {
		if added {
			ls.mu.Lock()
			ls.removePendingLocked(seq)
			ls.lastDelivered = last
			ls.mu.Unlock()
		}
		return false // shed: the record stays in the log; the poller fetches it again
	}
	ls.p.d.LogDelivered.Add(1)
	return true
}

// skipped reports whether seq was acknowledged individually before the subscription
// resumed; such a sequence counts as delivered and acknowledged (it stays in the saved
// position's acknowledged set until the position passes it). Sequences below seq in skip
// are gone from the log (retention) and forgotten.
func (ls *reader) skipped(seq uint64) bool {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	i := 0
	for i < len(ls.skip) && ls.skip[i] < seq {
		i++
	}
	ls.skip = ls.skip[i:]
	if len(ls.skip) == 0 || ls.skip[0] != seq {
		return false
	}
	ls.skip = ls.skip[1:]
	ls.lastDelivered = seq
	if ls.sub.Ack != delivery.AckAuto {
		ls.addPendingLocked(seq)
		delete(ls.pending, seq)
	}
	return true
}

// addPendingLocked records seq as delivered and unacknowledged and reports whether it was
// new. Deliveries come in ascending order, so order is appended to; a sequence delivered
// again (after a NACK) is already pending. ls.mu must be held.
func (ls *reader) addPendingLocked(seq uint64) bool {
	if _, ok := ls.pending[seq]; ok {
		return false
	}
	ls.pending[seq] = struct{}{}
	if n := len(ls.order); n == ls.head || ls.order[n-1] < seq {
		ls.order = append(ls.order, seq)
		return true
	}
	i, _ := slices.BinarySearch(ls.order[ls.head:], seq)
	ls.order = slices.Insert(ls.order, ls.head+i, seq)
	return true
}

// removePendingLocked undoes addPendingLocked for a delivery that did not happen: seq
// leaves order as well as pending, since positionLocked counts a sequence in order that is
// not pending as acknowledged. ls.mu must be held.
func (ls *reader) removePendingLocked(seq uint64) {
	delete(ls.pending, seq)
	if i, ok := slices.BinarySearch(ls.order[ls.head:], seq); ok {
		ls.order = slices.Delete(ls.order, ls.head+i, ls.head+i+1)
	}
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
	ls.ackedDirty = true
	ls.mu.Unlock()
	ls.savePosition(true)
	ls.poller.Kick()
}

// SettleOne implements delivery.Source for one sequence.
func (ls *reader) SettleOne(seq uint64, nack bool) {
	seqs := [1]uint64{seq}
	ls.Settle(seqs[:], nack)
}

// positionLocked is the highest sequence below which everything delivered was
// acknowledged: the sequence before the lowest pending one, found in amortized constant time
// (acknowledged sequences at the front of order are dropped as they are passed). ls.mu must
// be held.
func (ls *reader) positionLocked() uint64 {
	for ls.head < len(ls.order) {
		if _, ok := ls.pending[ls.order[ls.head]]; ok {
			break
		}
		ls.head++
	}
	if ls.head == len(ls.order) {
		ls.order, ls.head = ls.order[:0], 0
	} else if ls.head >= 1024 && ls.head*2 >= len(ls.order) {
		n := copy(ls.order, ls.order[ls.head:])
		ls.order, ls.head = ls.order[:n], 0
	}
	if len(ls.pending) == 0 {
		return ls.lastDelivered
	}
	return ls.order[ls.head] - 1
}

// ackedAboveLocked returns the sequences above pos acknowledged individually: those passed
// by the reader that are no longer pending, then those still to skip; at most maxAckedAbove
// (the lowest). ls.mu must be held.
func (ls *reader) ackedAboveLocked(pos uint64) []uint64 {
	var acked []uint64
	for _, s := range ls.order[ls.head:] {
		if len(acked) == maxAckedAbove {
			return acked
		}
		if _, ok := ls.pending[s]; !ok && s > pos {
			acked = append(acked, s)
		}
	}
	for _, s := range ls.skip {
		if len(acked) == maxAckedAbove {
			break
		}
		if s > pos {
			acked = append(acked, s)
		}
	}
	return acked
}

// savePosition records the position when it moved past the saved one, or when an
// acknowledgement changed the individually acknowledged sequences above it. lazy saves it without
// an fsync of its own (LogStore.SavePositionLazy: ACKs and auto-acknowledged deliveries; an
// ACK with a receipt waits for the store's Sync); the position never passes an
// unacknowledged message, so a crash that loses a lazy save only delivers acknowledged
// messages again.
func (ls *reader) savePosition(lazy bool) {
	if ls.key == "" {
		return
	}
	ls.saveMu.Lock()
	defer ls.saveMu.Unlock()
	ls.mu.Lock()
	pos := ls.positionLocked()
	if pos <= ls.saved && !ls.ackedDirty {
		ls.mu.Unlock()
		return
	}
	pos = max(pos, ls.saved)
	acked := ls.ackedAboveLocked(pos)
	if pos == ls.saved && slices.Equal(acked, ls.savedAcked) {
		// Nothing to write: an ACK past maxAckedAbove, say.
		ls.ackedDirty = false
		ls.mu.Unlock()
		return
	}
	ls.saved, ls.ackedDirty, ls.savedAcked = pos, false, acked
	ls.sinceSave = 0
	ls.mu.Unlock()
	save := ls.p.opts.Store.SavePosition
	if lazy {
		save = ls.p.opts.Store.SavePositionLazy
	}
	if err := save(ls.key, pos, acked); err != nil {
		ls.p.log.Error("saving durable position", "key", ls.key, "err", err)
	}
}

// stop ends the reader: its poller stops (and no delivery runs after stop returns), a durable subscription's position is saved
// (always, so that the save time records when it went offline, for idle expiry) and its key
// is released.
func (ls *reader) stop() {
	ls.poller.Stop()
	ls.poller.Quiesce() // a delivery running on a publisher's goroutine (offer) ends first
	if ls.key == "" {
		return
	}
	ls.saveMu.Lock()
	ls.mu.Lock()
	pos := max(ls.positionLocked(), ls.saved)
	acked := ls.ackedAboveLocked(pos)
	ls.saved, ls.sinceSave, ls.ackedDirty, ls.savedAcked = pos, 0, false, acked
	ls.mu.Unlock()
	if err := ls.p.opts.Store.SavePosition(ls.key, pos, acked); err != nil {
		ls.p.log.Error("saving durable position", "key", ls.key, "err", err)
	}
	ls.saveMu.Unlock()
	ls.p.releaseDurable(ls.key)
}
