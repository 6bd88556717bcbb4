package admin

import (
	"cmp"
	"errors"
	"slices"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/titan-broker/titan/internal/dest"
	"github.com/titan-broker/titan/internal/dispatch"
)

// QueueSettings are a queue's effective settings, as JSON.
type QueueSettings struct {
	// Capacity is the message-count limit (0: none).
	Capacity int `json:"capacity"`
	// MaxPendingBytes is the byte limit (0: none).
	MaxPendingBytes int64 `json:"maxPendingBytes"`
	// AddressFullPolicy is BLOCK, FAIL or DROP.
	AddressFullPolicy string `json:"addressFullPolicy"`
	// BlockTimeoutMs bounds a BLOCK stall, in milliseconds: the setting in force (30000, the
	// default, when no address setting sets block-timeout).
	BlockTimeoutMs int64 `json:"blockTimeoutMs"`
	// RingSize > 0 makes a ring queue of that many messages (<= 0: not a ring).
	RingSize int `json:"ringSize"`
	// MaxDeliveries dead-letters after this many deliveries (0: unlimited).
	MaxDeliveries int `json:"maxDeliveries"`
	// DeadLetter is the dead-letter destination ("": /queue/DLQ.<channel>).
	DeadLetter string `json:"deadLetter,omitempty"`
	// RedeliveryDelayMs delays redelivery after NACK, in milliseconds.
	RedeliveryDelayMs int64 `json:"redeliveryDelayMs"`
	// Match is the address-setting match the settings came from ("" when none matched).
	Match string `json:"match"`
}

// QueueInfo is one queue as the API reports it: identity, occupancy, limits, state and
// counters (counters restart at zero when a queue is deleted and created again).
type QueueInfo struct {
	// Group is the queue's destination group.
	Group string `json:"group"`
	// Destination is canonical ("/queue/orders", or a bare "/orders").
	Destination string `json:"destination"`
	// Pattern is "events" or "queues".
	Pattern string `json:"pattern"`
	// Size is every message held: ready + delivering + scheduled (events: buffered).
	Size int `json:"size"`
	// PendingBytes is the bytes held.
	PendingBytes int64 `json:"pendingBytes"`
	// Capacity is the message-count limit (0: none); as Settings.Capacity.
	Capacity int `json:"capacity"`
	// MaxPendingBytes is the byte limit (0: none); as Settings.MaxPendingBytes.
	MaxPendingBytes int64 `json:"maxPendingBytes"`
	// RingSize is the ring size in messages (<= 0: not a ring); as Settings.RingSize.
	RingSize int `json:"ringSize"`
	// Paused is true between a pause and the next resume.
	Paused bool `json:"paused"`
	// Consumers counts attached consumers (events: 1 while the draining consumer runs).
	Consumers int `json:"consumers"`
	// Delivering counts messages delivered and not yet acknowledged (queues only).
	Delivering int `json:"delivering"`
	// Scheduled counts messages waiting for their delivery time (queues only).
	Scheduled int `json:"scheduled"`
	// Enqueued counts messages accepted into the queue.
	Enqueued uint64 `json:"enqueued"`
	// Dispatched counts messages handed to consumers (events: drained and exported).
	Dispatched uint64 `json:"dispatched"`
	// Acked counts acknowledged messages (queues only).
	Acked uint64 `json:"acked"`
	// Dropped counts messages refused by a DROP policy, or (events) drained with no
	// subscriber.
	Dropped uint64 `json:"dropped"`
	// RingRemoved counts messages removed from the head of a ring queue.
	RingRemoved uint64 `json:"ringRemoved"`
	// Expired counts messages that expired in the queue.
	Expired uint64 `json:"expired"`
	// DeadLettered counts messages moved to the dead-letter destination.
	DeadLettered uint64 `json:"deadLettered"`
	// Settings are the queue's effective settings and the address-setting match they came
	// from.
	Settings QueueSettings `json:"settings"`
	// Leader names the node leading the queue's JetStream consumer (cluster mode only).
	Leader string `json:"leader,omitempty"`
	// Replicas are the consumer's other replicas as its leader reports them (cluster mode
	// only).
	Replicas []ClusterReplica `json:"replicas,omitempty"`
}

func queueInfo(st dispatch.QueueStats) QueueInfo {
	s := st.Settings
	return QueueInfo{
		Group: st.Group, Destination: st.Destination, Pattern: st.Pattern,
		Size: st.Messages, PendingBytes: st.PendingBytes,
		Capacity: s.Capacity, MaxPendingBytes: s.MaxPendingBytes, RingSize: s.RingSize,
		Paused: st.Paused, Consumers: st.Consumers, Delivering: st.Delivering, Scheduled: st.Scheduled,
		Enqueued: st.Enqueued, Dispatched: st.Dispatched, Acked: st.Acked, Dropped: st.Dropped,
		RingRemoved: st.RingRemoved, Expired: st.Expired, DeadLettered: st.DeadLettered,
		Settings: QueueSettings{
			Capacity: s.Capacity, MaxPendingBytes: s.MaxPendingBytes, AddressFullPolicy: s.FullPolicy.String(),
			BlockTimeoutMs: s.BlockTimeoutInForce().Milliseconds(), RingSize: s.RingSize, MaxDeliveries: s.MaxDeliveries,
			DeadLetter: s.DeadLetter, RedeliveryDelayMs: s.RedeliveryDelay.Milliseconds(), Match: s.Match,
		},
	}
}

// Summary counts queues and the groups holding them. Text is "N queues in M groups" (singular
// forms for 1); a group without queues is not counted (reference 000).
type Summary struct {
	// Queues counts queues.
	Queues int `json:"queues"`
	// Groups counts the distinct groups holding those queues.
	Groups int `json:"groups"`
	// Text is "N queues in M groups".
	Text string `json:"text"`
}

func summarize(qs []QueueInfo) Summary {
	groups := map[string]struct{}{}
	for _, q := range qs {
		groups[q.Group] = struct{}{}
	}
	return Summary{Queues: len(qs), Groups: len(groups), Text: SummaryText(len(qs), len(groups))}
}

// SummaryText renders "N queues in M groups" with singular forms for 1.
func SummaryText(queues, groups int) string {
	return plural(queues, "queue", "queues") + " in " + plural(groups, "group", "groups")
}

func plural(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return strconv.Itoa(n) + " " + many
}

// Queue list paging (GET PathQueues): a request without limit gets DefaultQueuePageSize
// queues, and a limit above MaxQueuePageSize is refused (RabbitMQ's management API pages
// the same way: page_size up to 500).
const (
	// DefaultQueuePageSize is the page size of GET PathQueues without a limit parameter.
	DefaultQueuePageSize = 1000
	// MaxQueuePageSize is the largest limit GET PathQueues accepts.
	MaxQueuePageSize = 10000
)

// QueuesOptions filter and page Queues. Empty fields do not filter.
type QueuesOptions struct {
	// Group keeps only queues of this group.
	Group string
	// Destination keeps only the queue of this destination (resolved like a SEND).
	Destination string
	// Match keeps the queues found by the dispatcher's trie search (reference 000's
	// searchAll) for a destination with wildcards: "/orders/*" lists the queues one segment
	// below /orders, "/orders/>" every descendant. Discovery only; needs Group or "default".
	Match string
	// Filter keeps the queues whose canonical destination contains it, ignoring case; when
	// it holds * or ?, it is a glob over the whole destination instead (* any run of
	// characters, / included; ? any one character), also ignoring case.
	Filter string
	// Offset skips that many of the queues kept (sorted by group, then destination).
	Offset int
	// Limit is the page size: at most that many queues are listed after Offset; 0 lists
	// them all (the HTTP handler never passes 0: it applies DefaultQueuePageSize).
	Limit int

	// keep, set by the HTTP handler, keeps the queues the request's user may see; nil
	// keeps all.
	keep func(group, destination, pattern string) bool
	// countOnly lists no queue: only Summary and Total.
	countOnly bool
}

// QueueList is the answer of GET /titan/monitor/queues.
type QueueList struct {
	// Queues are one page of the queues kept, sorted by group, then destination. Never nil.
	Queues []QueueInfo `json:"queues"`
	// Summary counts every queue kept (all pages).
	Summary Summary `json:"summary"`
	// Total counts every queue kept (all pages): Summary.Queues.
	Total int `json:"total"`
	// Offset is the offset of the page's first queue.
	Offset int `json:"offset"`
	// Limit is the page size in force (0: unlimited, only from the Go API).
	Limit int `json:"limit"`
	// NextOffset is the offset of the next page; absent on the last page.
	NextOffset int `json:"nextOffset,omitempty"`
}

// candidate is a queue with its identity and canonical name, before its stats are read.
type candidate struct {
	q           dispatch.Queue
	id          dest.Identity
	destination string
}

// nameCache is the dispatcher's queues sorted by group then destination, with their names,
// as of one dispatch.Dispatcher.Generation. GET queues and the snapshot read the list every
// second a console is open, and with 100,000 queues building and sorting the names is most
// of their cost, so the list is built again only when a queue was added or removed. It
// holds one entry per queue (bounded by titan.limits.max-destinations) and is replaced
// whole. Safe for concurrent use.
type nameCache struct {
	mu sync.Mutex
	// Guarded by mu; list is read-only once stored.
	d    *dispatch.Dispatcher
	gen  uint64
	list []candidate
}

// sortedQueues returns every dispatcher queue, sorted, from the cache when no queue was
// added or removed since it was built. The slice is shared: read it only.
func (a *Admin) sortedQueues() []candidate {
	d, c := a.src.Dispatcher(), a.names
	g := d.Generation()
	c.mu.Lock()
	if c.d == d && c.gen == g && c.list != nil {
		list := c.list
		c.mu.Unlock()
		return list
	}
	c.mu.Unlock()
	list := candidates(d.Queues())
	if d.Generation() == g { // nothing changed while Queues ran: list is generation g
		c.mu.Lock()
		c.d, c.gen, c.list = d, g, list
		c.mu.Unlock()
	}
	return list
}

func candidates(qs []dispatch.Queue) []candidate {
	out := make([]candidate, len(qs))
	for i, q := range qs {
		id := q.Identity()
		out[i] = candidate{q: q, id: id, destination: id.Destination()}
	}
	return out
}

// Queues lists the queues matching o, one page of them. Only the page's queues are read
// (Stats), so a page of 50 among 100,000 queues costs the sort and the filter, not 100,000
// reads. Errors (*Error): CodeInvalidGroup, CodeInvalidDestination, CodeUnsupportedPattern
// for bad filters; CodeInvalidParameter for a negative offset or limit.
func (a *Admin) Queues(o QueuesOptions) (*QueueList, error) {
	if o.Group != "" && !dest.ValidGroup(o.Group) {
		return nil, newError(CodeInvalidGroup, "invalid group: names match ^[a-zA-Z0-9_-]{1,64}$", ErrInvalidGroup)
	}
	if o.Offset < 0 || o.Limit < 0 {
		return nil, invalidParam("offset and limit must be >= 0")
	}
	var want dest.Identity
	if o.Destination != "" {
		id, err := a.identity(QueueRef{Destination: o.Destination, Group: o.Group})
		if err != nil {
			return nil, err
		}
		want = id
	}
	var all []candidate
	if o.Match == "" {
		all = a.sortedQueues()
	} else {
		d, err := dest.ParseFilter(o.Match, dest.PatternEvents)
		if err != nil && !errors.Is(err, dest.ErrInvalid) {
			return nil, errInvalidDestination(err)
		}
		if err != nil { // wildcards on a queues destination: search its channel all the same
			if d, err = dest.ParseFilter(strings.Replace(o.Match, "/queue/", "/topic/", 1), dest.PatternEvents); err != nil {
				return nil, errInvalidDestination(err)
			}
			d.Pattern = dest.PatternQueues
		}
		g := o.Group
		if g == "" {
			g = dest.DefaultGroup
		}
		all = candidates(a.src.Dispatcher().SearchAll(g, uint8(d.Pattern), d.Bare, d.Channel))
	}
	filter := newNameFilter(o.Filter)
	kept := all
	if o.Group != "" || o.Destination != "" || o.Filter != "" || o.keep != nil {
		kept = make([]candidate, 0, min(len(all), 1024))
		for _, c := range all {
			id := c.id
			if o.Group != "" && id.Group != o.Group {
				continue
			}
			if o.Destination != "" && (id.Pattern != want.Pattern || id.Channel != want.Channel || id.Bare != want.Bare) {
				continue
			}
			if !filter.match(c.destination) || (o.keep != nil && !o.keep(id.Group, c.destination, id.Pattern.String())) {
				continue
			}
			kept = append(kept, c)
		}
	}
	out := &QueueList{Queues: []QueueInfo{}, Offset: o.Offset, Limit: o.Limit}
	if a.opts.Cluster != nil { // cluster mode: the queues as JetStream sees them, then the page
		all := &QueueList{Queues: make([]QueueInfo, 0, len(kept))}
		for _, c := range kept {
			all.Queues = append(all.Queues, queueInfo(c.q.Stats()))
		}
		a.clusterQueues(o, want, all)
		infos := all.Queues[:0]
		for _, q := range all.Queues {
			if filter.match(q.Destination) && (o.keep == nil || o.keep(q.Group, q.Destination, q.Pattern)) {
				infos = append(infos, q)
			}
		}
		slices.SortStableFunc(infos, func(x, y QueueInfo) int {
			return cmp.Or(strings.Compare(x.Group, y.Group), strings.Compare(x.Destination, y.Destination))
		})
		out.Summary, out.Total = summarize(infos), len(infos)
		lo, hi := pageBounds(len(infos), o.Offset, o.Limit)
		out.Queues = append(out.Queues, infos[lo:hi]...)
		if hi < len(infos) {
			out.NextOffset = hi
		}
		return out, nil
	}
	out.Summary, out.Total = summarizeCandidates(kept), len(kept)
	lo, hi := pageBounds(len(kept), o.Offset, o.Limit)
	if o.countOnly {
		lo, hi = 0, 0
	}
	for _, c := range kept[lo:hi] {
		out.Queues = append(out.Queues, queueInfo(c.q.Stats()))
	}
	if hi < len(kept) {
		out.NextOffset = hi
	}
	return out, nil
}

// pageBounds is the [lo, hi) of the page at offset of at most limit (0: all) among n.
func pageBounds(n, offset, limit int) (lo, hi int) {
	lo = min(offset, n)
	hi = n
	if limit > 0 && limit < n-lo {
		hi = lo + limit
	}
	return lo, hi
}

func summarizeCandidates(cs []candidate) Summary {
	groups := map[string]struct{}{}
	for _, c := range cs {
		groups[c.id.Group] = struct{}{}
	}
	return Summary{Queues: len(cs), Groups: len(groups), Text: SummaryText(len(cs), len(groups))}
}

// nameFilter is QueuesOptions.Filter, compiled: a lower-cased substring, or a glob.
type nameFilter struct {
	pattern string
	glob    bool
}

func newNameFilter(f string) nameFilter {
	f = strings.ToLower(f)
	return nameFilter{pattern: f, glob: strings.ContainsAny(f, "*?")}
}

// match reports whether name passes the filter. strings.ToLower returns name itself, with
// no allocation, when it holds no upper-case letter (the usual destination).
func (f nameFilter) match(name string) bool {
	if f.pattern == "" {
		return true
	}
	name = strings.ToLower(name)
	if !f.glob {
		return strings.Contains(name, f.pattern)
	}
	return globMatch(f.pattern, name)
}

// globMatch reports whether s matches p (* any run, ? any one character), rune by rune, in
// O(len(p)·len(s)) at worst: the classic backtracking to the last star, never exponential.
func globMatch(p, s string) bool {
	pi, si, star, mark := 0, 0, -1, 0
	for si < len(s) {
		pr, pn := utf8.DecodeRuneInString(p[pi:])
		sr, sn := utf8.DecodeRuneInString(s[si:])
		switch {
		case pi < len(p) && pr == '*':
			star, mark = pi, si
			pi++
		case pi < len(p) && (pr == '?' || pr == sr):
			pi += pn
			si += sn
		case star >= 0:
			pi = star + 1
			_, mn := utf8.DecodeRuneInString(s[mark:])
			mark += mn
			si = mark
		default:
			return false
		}
	}
	for pi < len(p) && p[pi] == '*' {
		pi++
	}
	return pi == len(p)
}

// CreateQueueOptions create a queue ahead of traffic. Nil limits take the settings a
// traffic-created queue would get (address settings, then built-in defaults).
type CreateQueueOptions struct {
	QueueRef
	// MaxPendingBytes bounds the bytes held (0: no byte limit). For an events queue, setting
	// it without Capacity replaces the default 11-message capacity with this byte limit.
	MaxPendingBytes *int64
	// Capacity bounds the messages held (0: no count limit).
	Capacity *int
	// RingSize makes a ring queue (queues pattern only; -1 or 0: no ring).
	RingSize *int
}

// CreateQueueResult is the answer of POST /titan/monitor/queues.
type CreateQueueResult struct {
	// Created is false when the queue already existed; its limits were then kept as they
	// were (creation is idempotent and never replaces limits).
	Created bool `json:"created"`
	// Queue is the queue as it is now (with its original limits when it existed).
	Queue QueueInfo `json:"queue"`
}

// CreateQueue makes the queue named by o unless it exists (idempotent; an existing queue's
// limits are never replaced, even when o asks for different ones). Errors (*Error): those of
// identity, and CodeInvalidParameter for a negative limit, a ring size below -1 or a ring
// size on an events destination.
func (a *Admin) CreateQueue(o CreateQueueOptions) (*CreateQueueResult, error) {
	id, err := a.identity(o.QueueRef)
	if err != nil {
		return nil, err
	}
	if a.inCluster(id) {
		return a.clusterCreate(id, o)
	}
	e := a.src.Dispatcher()
	s := e.Settings(id)
	if o.MaxPendingBytes != nil {
		if *o.MaxPendingBytes < 0 {
			return nil, invalidParam("maxPendingBytes must be >= 0 bytes")
		}
		s.MaxPendingBytes = *o.MaxPendingBytes
		if o.Capacity == nil && id.Pattern == dest.PatternEvents {
			s.Capacity = 0
		}
	}
	if o.Capacity != nil {
		if *o.Capacity < 0 {
			return nil, invalidParam("capacity must be >= 0 messages")
		}
		s.Capacity = *o.Capacity
	}
	if o.RingSize != nil {
		if err := a.checkRing(id, *o.RingSize); err != nil {
			return nil, err
		}
		s.RingSize = *o.RingSize
	}
	q, created, err := e.Create(id, s)
	if err != nil {
		return nil, asError(err)
	}
	return &CreateQueueResult{Created: created, Queue: queueInfo(q.Stats())}, nil
}

func (a *Admin) checkRing(id dest.Identity, n int) error {
	if id.Pattern != dest.PatternQueues {
		return invalidParam("ring size applies to queues destinations (/queue/...), not " + id.Pattern.String())
	}
	if n < -1 {
		return invalidParam("ring size must be -1 (no limit), 0 or a positive number of messages")
	}
	return nil
}

// DeleteQueueOptions name the queue to delete.
type DeleteQueueOptions struct {
	QueueRef
	// Force deletes a queue that still holds messages, discarding them and stopping its
	// consumer.
	Force bool
}

// DeleteQueueResult is the answer of DELETE /titan/monitor/queues.
type DeleteQueueResult struct {
	// Group is the deleted queue's group.
	Group string `json:"group"`
	// Destination is the deleted queue's canonical destination.
	Destination string `json:"destination"`
	// Discarded is how many messages the queue held just before it was deleted (only
	// possible with force; approximate under concurrent traffic).
	Discarded int `json:"discarded"`
}

// DeleteQueue deletes the queue named by o. The next SEND to it creates a fresh queue.
// Errors (*Error): those of identity; CodeQueueNotFound (dispatch.ErrNoQueue);
// CodeQueueNotEmpty (dispatch.ErrQueueNotEmpty) when it holds messages and Force is unset.
func (a *Admin) DeleteQueue(o DeleteQueueOptions) (*DeleteQueueResult, error) {
	id, err := a.identity(o.QueueRef)
	if err != nil {
		return nil, err
	}
	if a.inCluster(id) {
		return a.clusterDelete(id, o.Force)
	}
	e := a.src.Dispatcher()
	held := 0
	if q, ok := e.Lookup(id); ok {
		held = q.Stats().Messages
	}
	switch err := e.Delete(id, o.Force); {
	case errors.Is(err, dispatch.ErrNoQueue):
		return nil, notFound(id, err)
	case errors.Is(err, dispatch.ErrQueueNotEmpty):
		msg := "queue " + describe(id) + " is not empty"
		if held > 0 {
			msg += " (" + plural(held, "message", "messages") + ")"
		}
		return nil, newError(CodeQueueNotEmpty, msg+"; delete with force=true to discard its messages", err)
	case err != nil:
		return nil, asError(err)
	}
	if !o.Force {
		held = 0
	}
	return &DeleteQueueResult{Group: id.Group, Destination: id.Destination(), Discarded: held}, nil
}

func notFound(id dest.Identity, err error) *Error {
	return newError(CodeQueueNotFound, "no queue "+describe(id), err)
}

// Pause pauses the queue named by ref: new enqueues wait (BLOCK), fail (FAIL) or are dropped
// (DROP) until Resume; delivery of what it holds continues. Pausing a paused queue is a
// no-op. Errors (*Error): those of identity; CodeQueueNotFound.
func (a *Admin) Pause(ref QueueRef) (*QueueInfo, error) { return a.setPaused(ref, true) }

// Resume resumes the queue named by ref. Resuming a running queue is a no-op. Errors as
// Pause.
func (a *Admin) Resume(ref QueueRef) (*QueueInfo, error) { return a.setPaused(ref, false) }

func (a *Admin) setPaused(ref QueueRef, paused bool) (*QueueInfo, error) {
	id, err := a.identity(ref)
	if err != nil {
		return nil, err
	}
	if a.inCluster(id) {
		return a.clusterPause(id, paused)
	}
	e := a.src.Dispatcher()
	if err := e.SetPaused(id, paused); err != nil {
		if errors.Is(err, dispatch.ErrNoQueue) {
			return nil, notFound(id, err)
		}
		return nil, asError(err)
	}
	return a.info(id)
}

func (a *Admin) info(id dest.Identity) (*QueueInfo, error) {
	q, ok := a.src.Dispatcher().Lookup(id)
	if !ok { // deleted concurrently
		return nil, notFound(id, dispatch.ErrNoQueue)
	}
	qi := queueInfo(q.Stats())
	return &qi, nil
}

// RingSizeOptions change a queue's ring size.
type RingSizeOptions struct {
	QueueRef
	// Size is the new ring size in messages: > 0 a ring of that many, -1 or 0 no limit.
	// Lowering it removes nothing at once but stops growth (reference 002).
	Size int
}

// SetRingSize changes the ring size of an existing queues-pattern queue at run time. Errors
// (*Error): those of identity; CodeInvalidParameter for an events destination or a size
// below -1; CodeQueueNotFound.
func (a *Admin) SetRingSize(o RingSizeOptions) (*QueueInfo, error) {
	id, err := a.identity(o.QueueRef)
	if err != nil {
		return nil, err
	}
	if err := a.checkRing(id, o.Size); err != nil {
		return nil, err
	}
	if a.inCluster(id) {
		return nil, errRingSizeInCluster()
	}
	if err := a.src.Dispatcher().SetRingSize(id, o.Size); err != nil {
		if errors.Is(err, dispatch.ErrNoQueue) {
			return nil, notFound(id, err)
		}
		return nil, asError(err)
	}
	return a.info(id)
}
