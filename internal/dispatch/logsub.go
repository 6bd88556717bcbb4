package dispatch

import (
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/titan-broker/titan/internal/dest"
	"github.com/titan-broker/titan/internal/message"
	"github.com/titan-broker/titan/internal/outbox"
)

// LogStore is the port to durable per-identity logs (events-store), implemented by
// durable.Log. Safe for concurrent use.
type LogStore interface {
	// Scan calls fn for records of id's log with seq >= from in order, until fn returns false.
	Scan(id dest.Identity, from uint64, fn func(seq uint64, data []byte) bool) error
	// Bounds returns the first held and last assigned sequence of id's log (0, 0 when empty
	// and never written).
	Bounds(id dest.Identity) (first, last uint64, err error)
	// SeekTime returns the first sequence whose message was accepted at or after t (last+1
	// when none).
	SeekTime(id dest.Identity, t time.Time) (uint64, error)
	// SavePosition durably records a durable subscription's last acknowledged sequence.
	SavePosition(key string, seq uint64) error
	// Position returns a saved position.
	Position(key string) (seq uint64, ok bool, err error)
}

// StartKind says where an events-store subscription starts.
type StartKind uint8

// Start kinds (start-position header values).
const (
	StartNew   StartKind = iota // only messages appended after the SUBSCRIBE (default)
	StartFirst                  // from the first message held
	StartLast                   // from the last message (it is delivered)
	StartSeq                    // from a sequence number
	StartTime                   // from the first message accepted at or after a time
)

// StartPosition is a parsed start-position header.
type StartPosition struct {
	Kind StartKind
	Seq  uint64
	Time time.Time
}

// ErrBadStartPosition is returned by ParseStartPosition for an unreadable value.
var ErrBadStartPosition = errors.New("dispatch: invalid start-position")

// ParseStartPosition parses a start-position header: "new" (or ""), "first", "last", a
// sequence number, "time:<RFC 3339>" or "delta:<Go duration>" (relative to now).
func ParseStartPosition(s string, now time.Time) (StartPosition, error) {
	switch {
	case s == "" || s == "new":
		return StartPosition{Kind: StartNew}, nil
	case s == "first":
		return StartPosition{Kind: StartFirst}, nil
	case s == "last":
		return StartPosition{Kind: StartLast}, nil
	case strings.HasPrefix(s, "time:"):
		t, err := time.Parse(time.RFC3339Nano, s[5:])
		if err != nil {
			return StartPosition{}, fmt.Errorf("%w: %v", ErrBadStartPosition, err)
		}
		return StartPosition{Kind: StartTime, Time: t}, nil
	case strings.HasPrefix(s, "delta:"):
		d, err := time.ParseDuration(s[6:])
		if err != nil || d < 0 {
			return StartPosition{}, fmt.Errorf("%w: delta needs a non-negative Go duration like 5m", ErrBadStartPosition)
		}
		return StartPosition{Kind: StartTime, Time: now.Add(-d)}, nil
	}
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil || n == 0 {
		return StartPosition{}, fmt.Errorf("%w: %q", ErrBadStartPosition, s)
	}
	return StartPosition{Kind: StartSeq, Seq: n}, nil
}

// autoSaveEvery is how many auto-acknowledged deliveries a durable subscription makes between
// position saves; after a crash at most this many are delivered again.
const autoSaveEvery = 64

// busyBytes is the outbound backlog above which a log subscription's sink counts as busy.
const busyBytes = 256 << 10

// logSub reads one events-store subscription's log through an outbox poller. It is the
// poller's Sink.
type logSub struct {
	sub    *Subscription
	id     dest.Identity
	e      *Engine
	poller *outbox.Poller
	key    string // durable position key; "" when not durable

	mu            sync.Mutex          // guards the fields below
	pending       map[uint64]struct{} // delivered, unacknowledged sequences (client modes)
	lastDelivered uint64
	saved         uint64
	sinceSave     int
}

func (e *Engine) newLogSub(sub *Subscription, id dest.Identity) (*logSub, error) {
	ls := &logSub{sub: sub, id: id, e: e, pending: map[uint64]struct{}{}}
	first, last, err := e.opts.Logs.Bounds(id)
	if err != nil {
		return nil, err
	}
	var from uint64
	switch sub.Start.Kind {
	case StartNew:
		from = last + 1
	case StartFirst:
		from = first
	case StartLast:
		from = max(last, first)
	case StartSeq:
		from = sub.Start.Seq
	case StartTime:
		if from, err = e.opts.Logs.SeekTime(id, sub.Start.Time); err != nil {
			return nil, err
		}
	}
	if sub.DurableName != "" {
		ls.key = "durable/" + id.Group + "/" + id.Channel + "/" + sub.DurableName
		pos, ok, err := e.opts.Logs.Position(ls.key)
		if err != nil {
			return nil, err
		}
		if ok {
			from = pos + 1 // resume after the last acknowledged sequence
		}
		ls.saved = from - 1
	}
	if from == 0 {
		from = 1
	}
	ls.lastDelivered = from - 1
	src := func(from uint64, fn func(uint64, []byte) bool) error { return e.opts.Logs.Scan(id, from, fn) }
	ls.poller = outbox.NewPoller(src, ls, outbox.NewRegulator(e.opts.PollBase, e.opts.PollMax), from, 256)
	return ls, nil
}

// Busy implements outbox.Sink: skip fetching while the connection still has a backlog or the
// subscription has no credit.
func (ls *logSub) Busy() bool {
	return ls.sub.Conn.w.QueuedBytes() > busyBytes || !ls.sub.hasCredit()
}

// Deliver implements outbox.Sink.
func (ls *logSub) Deliver(seq uint64, data []byte) bool {
	m, err := message.Decode(data)
	if err != nil {
		ls.e.log.Error("skipping unreadable events-store record", "log", ls.id.String(), "seq", seq, "err", err)
		return true
	}
	m.Sequence = seq
	if !ls.sub.Conn.deliverFrom(ls.sub, m, nil, ls, seq, 1) {
		return false // shed: the record stays in the log; the poller fetches it again
	}
	ls.e.LogDelivered.Add(1)
	ls.mu.Lock()
	ls.lastDelivered = seq
	if ls.sub.Ack != AckAuto {
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

// acked records acknowledged (or, for nack, abandoned-for-now) sequences.
func (ls *logSub) acked(seqs []uint64, nack bool) {
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

// position is the highest sequence below which everything delivered was acknowledged.
func (ls *logSub) position() uint64 {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	if len(ls.pending) == 0 {
		return ls.lastDelivered
	}
	low := make([]uint64, 0, len(ls.pending))
	for s := range ls.pending {
		low = append(low, s)
	}
	sort.Slice(low, func(i, j int) bool { return low[i] < low[j] })
	return low[0] - 1
}

func (ls *logSub) savePosition() {
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
	if err := ls.e.opts.Logs.SavePosition(ls.key, pos); err != nil {
		ls.e.log.Error("saving durable position", "key", ls.key, "err", err)
	}
}

func (ls *logSub) stop() {
	ls.poller.Stop()
	ls.savePosition()
}

// OutboxStats summarises the events-store pollers for metrics.
type OutboxStats struct {
	Pollers     int
	MaxInterval time.Duration // the longest current regulated interval
	Sheds       uint64        // sheds across live pollers
	Skipped     uint64        // fetches skipped while busy, across live pollers
}

// OutboxStats returns the current poller summary.
func (e *Engine) OutboxStats() OutboxStats {
	e.mu.RLock()
	defer e.mu.RUnlock()
	var st OutboxStats
	for _, subs := range e.logs {
		for _, ls := range subs {
			st.Pollers++
			reg := ls.poller.Regulator()
			st.MaxInterval = max(st.MaxInterval, reg.Interval())
			st.Sheds += reg.Sheds.Load()
			st.Skipped += ls.poller.Skipped.Load()
		}
	}
	return st
}
