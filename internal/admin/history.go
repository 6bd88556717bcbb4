package admin

import (
	"container/heap"
	"net/http"
	"sync"
	"time"

	"github.com/titan-broker/titan/internal/dispatch"
)

// PathHistory answers GET with a RateHistory: the broker-wide rates of the last
// HistoryOptions.Window, or (destination, group) one destination's.
const PathHistory = "/titan/monitor/history"

// History defaults and bounds.
const (
	// DefaultHistoryInterval is how often History samples by default: every 5 s.
	DefaultHistoryInterval = 5 * time.Second
	// DefaultHistoryWindow is how far back History remembers by default: 15 minutes.
	DefaultHistoryWindow = 15 * time.Minute
	// MaxHistorySamples bounds the samples one ring holds, whatever the interval and window
	// (a 1 s interval over 15 minutes is 900).
	MaxHistorySamples = 3600
	// MaxTrackedDestinations bounds the destinations History keeps a ring for:
	// the MaxPinnedDestinations most recently asked for through PathHistory, then the busiest
	// by messages moved (enqueued + dispatched + acknowledged since the queue was made).
	MaxTrackedDestinations = 128
	// MaxPinnedDestinations bounds the destinations kept because someone asked for their
	// history (the console's destination page); the least recently asked for goes first.
	MaxPinnedDestinations = 32
)

// HistoryOptions configure a History. The zero value takes the defaults.
type HistoryOptions struct {
	// Interval is the time between samples (default DefaultHistoryInterval).
	Interval time.Duration
	// Window is how far back samples are kept (default DefaultHistoryWindow); the ring
	// holds Window/Interval samples, at most MaxHistorySamples.
	Window time.Duration
}

// History is the broker's recent rates, kept in memory so that the console's charts start
// with the minutes before the page was opened (RabbitMQ's management plugin keeps the same
// kind of sample rings). Every Interval the broker calls Sample, which reads every queue's
// counters once and appends one point to the broker-wide ring and one to each tracked
// destination's ring.
//
// The rings' memory is bounded independently of the number of destinations: one
// broker-wide ring and at most MaxTrackedDestinations destination rings of at most
// Window/Interval samples each (MaxHistorySamples at most), 56 bytes a sample: with the
// defaults (180 samples) about 1.3 MiB in all, with 100,000 destinations as with 10 (26 MiB
// at most, with 3600 samples a ring). A destination outside the tracked set has no history;
// asking for it (Read) pins it, so its ring starts with the next sample. Sampling costs one
// Stats call per queue per Interval (with 100,000 queues, some 60 ms of one core:
// BenchmarkConsoleAPI100k/sample); the queue list is kept between samples while no queue is
// added or removed (one reference per queue, as the dispatcher holds).
// In cluster mode it reads this node's dispatcher: queues-pattern queues live in JetStream
// there, and their rates are not sampled.
//
// Safe for concurrent use: Sample runs on one goroutine at a time (the broker's sampling
// goroutine), Read on HTTP handlers.
type History struct {
	interval time.Duration
	capacity int // samples per ring

	mu sync.Mutex
	// Guarded by mu.
	global  ring
	last    totals
	hasLast bool
	dests   map[historyKey]*ring
	pinned  map[historyKey]uint64 // the sample count when last asked for
	samples uint64                // Sample calls so far

	// Owned by Sample (one goroutine at a time): the queue list of the dispatcher's
	// generation gen, read again only when a queue was added or removed (Queues sorts and
	// names every queue: most of a sample's cost with 100,000 queues).
	from   *dispatch.Dispatcher
	gen    uint64
	queues []dispatch.Queue
}

type historyKey struct{ group, destination string }

// totals are cumulative counters at one instant.
type totals struct {
	at                          time.Time
	published, delivered, acked uint64
	depth                       int64
}

// ring is a fixed-capacity ring of points: rates (broker-wide) or cumulative counters
// (destinations, turned into rates when read).
type ring struct {
	pts   []totals
	start int // index of the oldest point once full
}

func (r *ring) add(p totals, capacity int) {
	if len(r.pts) < capacity {
		r.pts = append(r.pts, p)
		return
	}
	r.pts[r.start] = p
	r.start = (r.start + 1) % capacity
}

// ordered returns the points oldest first (a copy).
func (r *ring) ordered() []totals {
	out := make([]totals, 0, len(r.pts))
	out = append(out, r.pts[r.start:]...)
	return append(out, r.pts[:r.start]...)
}

// NewHistory returns an empty History.
func NewHistory(o HistoryOptions) *History {
	if o.Interval <= 0 {
		o.Interval = DefaultHistoryInterval
	}
	if o.Window <= 0 {
		o.Window = DefaultHistoryWindow
	}
	n := int(o.Window / o.Interval)
	n = min(max(n, 2), MaxHistorySamples)
	return &History{interval: o.Interval, capacity: n, dests: map[historyKey]*ring{}, pinned: map[historyKey]uint64{}}
}

// Interval is the time between samples.
func (h *History) Interval() time.Duration { return h.interval }

// Capacity is the number of samples one ring holds (Window/Interval, at most
// MaxHistorySamples).
func (h *History) Capacity() int { return h.capacity }

// Sample reads d's counters at now and records one point: the broker-wide rates since the
// previous Sample (published: dispatch.Dispatcher.Published; delivered: every queue's
// dispatched plus events-store deliveries; acknowledged: every queue's acks) and each
// tracked destination's counters. A counter that went down (a deleted queue's counters
// leave the sum) counts as no traffic, not as a negative rate.
func (h *History) Sample(d *dispatch.Dispatcher, now time.Time) {
	t := totals{at: now, published: d.Published.Load(), delivered: d.LogDelivered.Load()}
	h.mu.Lock()
	pinned := make(map[historyKey]bool, len(h.pinned))
	h.samples++
	for k, when := range h.pinned {
		if h.samples-when > uint64(h.capacity) {
			delete(h.pinned, k) // nobody asked for it for a whole window
			continue
		}
		pinned[k] = true
	}
	h.mu.Unlock()

	// One pass over the queues: the sums, the pinned destinations and a min-heap of the
	// busiest others.
	room := MaxTrackedDestinations - len(pinned)
	busiest := make(activityHeap, 0, room)
	keep := make(map[historyKey]totals, MaxTrackedDestinations)
	if g := d.Generation(); h.from != d || h.gen != g || h.queues == nil {
		h.queues = d.Queues()
		h.from, h.gen = d, g
		if d.Generation() != g {
			h.queues = nil // changed meanwhile: list them again next time
		}
	}
	queues := h.queues
	if queues == nil {
		queues = d.Queues()
	}
	for _, q := range queues {
		st := q.Stats()
		t.delivered += st.Dispatched
		t.acked += st.Acked
		t.depth += int64(st.Messages)
		k := historyKey{st.Group, st.Destination}
		p := totals{at: now, published: st.Enqueued, delivered: st.Dispatched, acked: st.Acked, depth: int64(st.Messages)}
		if pinned[k] {
			keep[k] = p
			continue
		}
		if room <= 0 {
			continue
		}
		act := st.Enqueued + st.Dispatched + st.Acked
		switch {
		case len(busiest) < room:
			heap.Push(&busiest, activity{k, act, p})
		case act > busiest[0].moved:
			busiest[0] = activity{k, act, p}
			heap.Fix(&busiest, 0)
		}
	}
	for _, a := range busiest {
		keep[a.key] = a.p
	}

	h.mu.Lock()
	defer h.mu.Unlock()
	if h.hasLast {
		h.global.add(rates(h.last, t), h.capacity)
	}
	h.last, h.hasLast = t, true
	for k := range h.dests {
		if _, ok := keep[k]; !ok {
			delete(h.dests, k)
		}
	}
	for k, p := range keep {
		r := h.dests[k]
		if r == nil {
			r = &ring{}
			h.dests[k] = r
		}
		r.add(p, h.capacity)
	}
}

// rates turns two cumulative points into one rate point at b.at: the counters' fields
// carry messages per second times 1000 (milli-messages), so that the ring stores one
// shape; depth is b's.
func rates(a, b totals) totals {
	return totals{at: b.at, published: perSecondMilli(a.published, b.published, a.at, b.at),
		delivered: perSecondMilli(a.delivered, b.delivered, a.at, b.at),
		acked:     perSecondMilli(a.acked, b.acked, a.at, b.at), depth: b.depth}
}

func perSecondMilli(from, to uint64, a, b time.Time) uint64 {
	dt := b.Sub(a)
	if to <= from || dt <= 0 {
		return 0
	}
	return uint64(float64(to-from) * 1000 / dt.Seconds())
}

type activity struct {
	key   historyKey
	moved uint64
	p     totals
}

// activityHeap is a min-heap by moved: its root is the least busy of the busiest.
type activityHeap []activity

func (h activityHeap) Len() int           { return len(h) }
func (h activityHeap) Less(i, j int) bool { return h[i].moved < h[j].moved }
func (h activityHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *activityHeap) Push(x any)        { *h = append(*h, x.(activity)) }
func (h *activityHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// HistorySample is one point of a RateHistory.
type HistorySample struct {
	// Time is when the sample was taken.
	Time time.Time `json:"time"`
	// Published is messages per second published since the previous sample (a
	// destination's: enqueued).
	Published float64 `json:"published"`
	// Delivered is messages per second delivered to consumers (dispatched).
	Delivered float64 `json:"delivered"`
	// Acknowledged is messages per second acknowledged.
	Acknowledged float64 `json:"acknowledged"`
	// Depth is the messages held at Time (broker-wide: every queue's sum).
	Depth int64 `json:"depth"`
}

// RateHistory is the answer of GET PathHistory.
type RateHistory struct {
	// IntervalMs is the time between samples, in milliseconds.
	IntervalMs int64 `json:"intervalMs"`
	// MaxSamples is how many samples the ring holds at most (the window is
	// IntervalMs × MaxSamples).
	MaxSamples int `json:"maxSamples"`
	// Group and Destination name the destination of a destination's history (empty:
	// broker-wide).
	Group       string `json:"group,omitempty"`
	Destination string `json:"destination,omitempty"`
	// Tracked is false for a destination History keeps no ring for yet: the request pinned
	// it, and its samples start with the next one.
	Tracked bool `json:"tracked"`
	// Samples are oldest first. Never nil.
	Samples []HistorySample `json:"samples"`
}

// HistoryRequest selects a RateHistory: the zero QueueRef is broker-wide.
type HistoryRequest struct {
	QueueRef
}

// History returns the broker-wide rates of the last window, or the rates of the
// destination ref names (resolved like a SEND; asking pins it, see History). Without a
// History in Options, the answer holds no samples. Errors (*Error): those of identity.
func (a *Admin) History(o HistoryRequest) (*RateHistory, error) {
	group, destination := "", ""
	if o.Destination != "" {
		id, err := a.identity(o.QueueRef)
		if err != nil {
			return nil, err
		}
		group, destination = id.Group, id.Destination()
	}
	if a.opts.History == nil {
		return &RateHistory{Group: group, Destination: destination, Samples: []HistorySample{}}, nil
	}
	return a.opts.History.Read(group, destination), nil
}

// Read returns the broker-wide rates (destination "") or those of the canonical
// destination in group, and pins that destination (see History).
func (h *History) Read(group, destination string) *RateHistory {
	out := &RateHistory{Group: group, Destination: destination, Samples: []HistorySample{},
		IntervalMs: h.interval.Milliseconds(), MaxSamples: h.capacity}
	h.mu.Lock()
	defer h.mu.Unlock()
	if destination == "" {
		out.Tracked = true
		for _, p := range h.global.ordered() {
			out.Samples = append(out.Samples, p.sample())
		}
		return out
	}
	k := historyKey{group, destination}
	h.pinLocked(k)
	r := h.dests[k]
	if r == nil {
		return out
	}
	out.Tracked = true
	pts := r.ordered()
	for i := 1; i < len(pts); i++ {
		out.Samples = append(out.Samples, rates(pts[i-1], pts[i]).sample())
	}
	return out
}

// sample renders a rate point (see rates).
func (p totals) sample() HistorySample {
	return HistorySample{Time: p.at, Published: float64(p.published) / 1000,
		Delivered: float64(p.delivered) / 1000, Acknowledged: float64(p.acked) / 1000, Depth: p.depth}
}

// pinLocked records that k was asked for now (at the current sample count), evicting the
// least recently asked for beyond MaxPinnedDestinations (ties: any of them). h.mu must be
// held.
func (h *History) pinLocked(k historyKey) {
	h.pinned[k] = h.samples
	if len(h.pinned) <= MaxPinnedDestinations {
		return
	}
	var oldest historyKey
	at := ^uint64(0)
	for pk, when := range h.pinned {
		if pk != k && when < at {
			oldest, at = pk, when
		}
	}
	delete(h.pinned, oldest)
}

// Tracked reports how many destination rings History holds (at most
// MaxTrackedDestinations).
func (h *History) Tracked() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.dests)
}

// serveHistory answers GET PathHistory. The broker-wide rates are readable by every user
// of the monitor, like the snapshot's counters; a destination's need browse on it (the
// route is wrapped by onDestination).
func (a *Admin) serveHistory(w http.ResponseWriter, r *http.Request) {
	res, err := a.History(HistoryRequest{QueueRef: ref(r)})
	a.respond(w, r, http.StatusOK, res, err)
}
