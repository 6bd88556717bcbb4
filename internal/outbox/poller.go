package outbox

import (
	"sync"
	"sync/atomic"
	"time"
)

// Sink is the bounded outbound side a Poller feeds (one subscription's delivery path).
type Sink interface {
	// Busy reports whether the sink still holds undelivered work or has no credit; the poller
	// skips its fetch then.
	Busy() bool
	// Deliver hands one record over. false means the sink shed it (outbound full): the record
	// stays stored and is fetched again later.
	Deliver(seq uint64, data []byte) bool
}

// Source reads a stream: it calls fn for records with seq >= from in order until fn returns
// false (store.Store.Scan of one stream).
type Source func(from uint64, fn func(seq uint64, data []byte) bool) error

// BusyRetry is how soon a poller that skipped a fetch because its sink was busy looks again
// (unless the regulator asks for longer).
const BusyRetry = 20 * time.Millisecond

// Poller delivers a stream's records after a cursor to a sink, one batch per fetch. Kick asks
// for an immediate fetch (new records were appended); while the regulator is backing off,
// kicks wait for the interval. The goroutine that appended a record may instead deliver it
// inline with Offer when the poller is caught up. Safe for concurrent use; Run is called
// once.
type Poller struct {
	src   Source
	sink  Sink
	reg   *Regulator
	batch int

	// deliverMu is held while records are delivered: by a fetch, or by a publisher
	// delivering one inline (Offer). So a poller's deliveries never overlap and follow the
	// cursor in order, whichever goroutine makes them.
	deliverMu sync.Mutex
	cursor    atomic.Uint64 // next seq to fetch
	kick      chan struct{}
	stop      chan struct{}
	once      sync.Once

	// Fetches counts fetches made; Skipped counts fetches skipped while the sink was busy.
	Fetches atomic.Uint64
	Skipped atomic.Uint64
}

// NewPoller returns a poller starting at seq from (0 = the stream's first record) that
// delivers at most batch records per fetch (default 256).
func NewPoller(src Source, sink Sink, reg *Regulator, from uint64, batch int) *Poller {
	if batch <= 0 {
		batch = 256
	}
	if reg == nil {
		reg = NewRegulator(0, 0)
	}
	p := &Poller{src: src, sink: sink, reg: reg, batch: batch, kick: make(chan struct{}, 1), stop: make(chan struct{})}
	p.cursor.Store(from)
	return p
}

// Regulator returns the poller's regulator.
func (p *Poller) Regulator() *Regulator { return p.reg }

// Cursor returns the next sequence the poller will fetch.
func (p *Poller) Cursor() uint64 { return p.cursor.Load() }

// Kick requests a fetch soon. Never blocks.
func (p *Poller) Kick() {
	select {
	case p.kick <- struct{}{}:
	default:
	}
}

// Stop ends Run; later Offers are refused. A delivery already running (a fetch, an Offer)
// finishes: Quiesce waits for it. Idempotent.
func (p *Poller) Stop() { p.once.Do(func() { close(p.stop) }) }

// Quiesce waits until no delivery of the poller is running. After Stop and Quiesce none
// runs or starts. It must not be called from a delivery (Sink.Deliver, an Offer's deliver).
func (p *Poller) Quiesce() {
	p.deliverMu.Lock()
	//lint:ignore SA2001 an empty critical section: it only waits for the running delivery
	p.deliverMu.Unlock()
}

// Offer lets the goroutine that just made record seq available deliver it itself, instead
// of kicking the poller's goroutine awake for it (issue 33: a live subscriber costs no
// goroutine wake-up per record). deliver is called, with the poller's delivery lock held,
// only when seq is the poller's cursor (everything before it was delivered), no fetch or
// other Offer is running, no shed is outstanding, the sink is not busy and the poller is
// not stopped; it returns what Sink.Deliver would (false: shed). Offer reports whether
// seq was delivered; when not, the caller Kicks and the poller fetches it as usual. Never
// blocks on a running fetch.
func (p *Poller) Offer(seq uint64, deliver func() bool) bool {
	if p.cursor.Load() != seq || !p.deliverMu.TryLock() {
		return false
	}
	defer p.deliverMu.Unlock()
	select {
	case <-p.stop:
		return false
	default:
	}
	if p.cursor.Load() != seq || p.reg.Shedding() || p.sink.Busy() {
		return false
	}
	if !deliver() {
		p.reg.Dropped()
		return false
	}
	p.reg.Clean()
	p.cursor.Store(seq + 1)
	return true
}

// Run polls until Stop. It fetches at once, then whenever kicked or when the regulator's
// interval elapses.
func (p *Poller) Run() {
	t := time.NewTimer(0)
	defer t.Stop()
	busy := false
	for {
		kick := p.kick
		if p.reg.Shedding() {
			kick = nil // back off: only the interval wakes us
		}
		select {
		case <-p.stop:
			return
		case <-kick:
		case <-t.C:
		}
		wait := p.reg.Interval()
		more := false
		if p.sink.Busy() {
			p.Skipped.Add(1)
			busy = true
		} else {
			more, busy = p.fetch()
		}
		if busy && !p.reg.Shedding() {
			wait = BusyRetry
		}
		if more {
			wait = 0
		}
		if !t.Stop() {
			select {
			case <-t.C:
			default:
			}
		}
		t.Reset(wait)
	}
}

// fetch delivers one batch and reports whether a full batch went out cleanly (more may
// wait), and whether it stopped early because the sink became busy: the poller then looks
// again after BusyRetry, as after a skipped fetch, rather than after the regulator's interval
// (no publication may come to kick it).
func (p *Poller) fetch() (more, busy bool) {
	p.deliverMu.Lock()
	defer p.deliverMu.Unlock()
	p.Fetches.Add(1)
	n := 0
	shed := false
	_ = p.src(p.cursor.Load(), func(seq uint64, data []byte) bool {
		if !p.sink.Deliver(seq, data) {
			shed = true
			p.reg.Dropped()
			return false
		}
		p.reg.Clean()
		p.cursor.Store(seq + 1)
		n++
		if n == p.batch {
			return false
		}
		if p.sink.Busy() {
			busy = true
			return false
		}
		return true
	})
	return !shed && n == p.batch, busy
}
