// Package dedup is duplicate detection (Artemis's duplicate id cache): a SEND carrying a
// producer-chosen duplicate id that repeats an id seen on the same destination within a
// window is not stored or delivered again, and still gets its RECEIPT, so a producer that
// retries after a lost RECEIPT or a timeout cannot create duplicates.
//
// The Cache keeps the ids in memory, bounded by a window (older ids are forgotten) and a
// cap (the oldest is forgotten first), and journals each claimed id to a Journal (the store)
// so they survive a restart for the window. Safe for concurrent use.
package dedup

import (
	"sync"
	"time"

	"github.com/titan-broker/titan/internal/dest"
)

// Header is the SEND header that carries the duplicate id. It is Artemis's name, so
// producers written for Artemis keep their duplicate detection.
const Header = "_AMQ_DUPL_ID"

// Defaults.
const (
	// DefaultWindow is how long an id is remembered.
	DefaultWindow = 10 * time.Minute
	// DefaultCap bounds the ids remembered, over all destinations (about 100 bytes each).
	DefaultCap = 100000
)

// Journal keeps claimed ids durably (implemented by durable.Log). Record returns once the
// entry is durable and returns a token for Forget; Load calls fn for every entry, oldest
// first; Trim drops entries older than token (exclusive).
type Journal interface {
	RecordDuplicateID(key string, at time.Time) (token uint64, err error)
	ForgetDuplicateID(token uint64)
	LoadDuplicateIDs(fn func(token uint64, key string, at time.Time)) error
	TrimDuplicateIDs(before uint64) error
}

// Options configure a Cache.
type Options struct {
	// Window is how long an id is remembered (default DefaultWindow).
	Window time.Duration
	// Cap bounds the ids remembered (default DefaultCap).
	Cap int
	// Journal, when set, keeps the ids across restarts.
	Journal Journal
	// Now is the time source (default time.Now).
	Now func() time.Time
}

type entry struct {
	key     string
	at      time.Time
	token   uint64 // the journal's token once journaled (0 before)
	live    bool   // still the remembered entry for key
	settled bool   // its SEND was accepted (a repeat is a duplicate, not in flight)
}

// Cache is the duplicate id cache.
type Cache struct {
	opts Options

	mu    sync.Mutex
	ids   map[string]*entry // guarded by mu
	order []*entry          // guarded by mu: oldest first (a FIFO; head is order[head])
	head  int               // guarded by mu

	trimmed  uint64 // guarded by mu: the newest journal token forgotten
	lastTrim uint64 // guarded by mu: trimmed when the journal was last trimmed

	// Duplicates counts SENDs recognised as duplicates.
	Duplicates uint64 // guarded by mu
}

// New returns an empty Cache.
func New(o Options) *Cache {
	if o.Window <= 0 {
		o.Window = DefaultWindow
	}
	if o.Cap <= 0 {
		o.Cap = DefaultCap
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return &Cache{opts: o, ids: make(map[string]*entry)}
}

// Key returns the cache key of a duplicate id sent to id.
func Key(id dest.Identity, dupID string) string {
	return id.String() + "\x00" + dupID
}

// Load fills the cache from the journal (at start-up, before traffic): entries inside the
// window are remembered again.
func (c *Cache) Load() error {
	if c.opts.Journal == nil {
		return nil
	}
	cutoff := c.opts.Now().Add(-c.opts.Window)
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.opts.Journal.LoadDuplicateIDs(func(token uint64, key string, at time.Time) {
		if at.Before(cutoff) {
			return
		}
		c.addLocked(&entry{key: key, at: at, token: token, live: true, settled: true})
	})
}

// ErrInFlight is returned by Claim for a repeat of an id whose first SEND has not been
// answered yet: the repeat must be refused (an ERROR, so the producer retries later), never
// answered as a duplicate, because the first SEND may still fail. Its Refusal text becomes
// the ERROR's message header.
var ErrInFlight error = inFlightError{}

type inFlightError struct{}

func (inFlightError) Error() string {
	return "dedup: a SEND with the same duplicate id is still being stored; retry once it is answered"
}

// Refusal is the ERROR message header for a repeat in flight (router.Refusal).
func (inFlightError) Refusal() string { return "duplicate id in flight" }

// Claim checks dupID on id. dup reports a repeat of an id whose SEND was accepted within the
// window: the SEND must be answered (RECEIPT) without being stored or delivered again. A
// repeat of an id whose first SEND is still unanswered returns ErrInFlight. Otherwise the id
// is claimed, and settle (called exactly once, when the SEND is answered) either forgets it
// (accepted false: the SEND was refused, so a retry is no duplicate) or keeps it for the
// window (accepted true) — journaled when durable is set, after the message itself was
// committed, so that a crash between the two can at worst deliver a retry twice, never
// answer a retry whose message was lost.
func (c *Cache) Claim(id dest.Identity, dupID string, durable bool) (dup bool, settle func(accepted bool), err error) {
	key := Key(id, dupID)
	now := c.opts.Now()
	c.mu.Lock()
	c.expireLocked(now)
	if old, ok := c.ids[key]; ok {
		if !old.settled {
			c.mu.Unlock()
			return false, nil, ErrInFlight
		}
		c.Duplicates++
		c.mu.Unlock()
		return true, nil, nil
	}
	e := &entry{key: key, at: now, live: true}
	c.addLocked(e) // claimed at once: a concurrent repeat sees it in flight
	c.mu.Unlock()
	return false, func(accepted bool) { c.settle(e, accepted, durable) }, nil
}

// settle ends e's claim (see Claim).
func (c *Cache) settle(e *entry, accepted, durable bool) {
	if !accepted {
		c.remove(e)
		return
	}
	c.mu.Lock()
	e.settled = true
	c.mu.Unlock()
	if !durable || c.opts.Journal == nil {
		return
	}
	// A journal failure keeps the id in memory only: a retry after a restart could then be
	// delivered twice, which at-least-once allows.
	if tok, err := c.opts.Journal.RecordDuplicateID(e.key, e.at); err == nil {
		c.mu.Lock()
		live := e.live
		e.token = tok
		c.mu.Unlock()
		if !live { // expired or evicted meanwhile
			c.opts.Journal.ForgetDuplicateID(tok)
		}
	}
}

// remove forgets e (an undone claim).
func (c *Cache) remove(e *entry) {
	c.mu.Lock()
	if c.ids[e.key] == e {
		delete(c.ids, e.key)
	}
	e.live = false
	tok := e.token
	c.mu.Unlock()
	if tok != 0 && c.opts.Journal != nil {
		c.opts.Journal.ForgetDuplicateID(tok)
	}
}

// Len returns how many ids are remembered.
func (c *Cache) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.ids)
}

// DuplicatesSeen returns how many SENDs were recognised as duplicates.
func (c *Cache) DuplicatesSeen() uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.Duplicates
}

func (c *Cache) addLocked(e *entry) {
	if old, ok := c.ids[e.key]; ok {
		old.live = false
	}
	c.ids[e.key] = e
	c.order = append(c.order, e)
	for len(c.ids) > c.opts.Cap && c.head < len(c.order) {
		c.popLocked()
	}
}

// popLocked drops the head of the FIFO, forgetting its id when it is still the live
// entry for it.
func (c *Cache) popLocked() {
	e := c.order[c.head]
	c.order[c.head] = nil
	c.head++
	if e.live && c.ids[e.key] == e {
		delete(c.ids, e.key)
	}
	e.live = false
	if e.token > c.trimmed {
		c.trimmed = e.token
	}
	if c.head > 1024 && c.head*2 > len(c.order) {
		c.order = append([]*entry(nil), c.order[c.head:]...)
		c.head = 0
	}
}

// expireLocked forgets entries older than the window and, every 1024 forgotten journal
// entries, trims the journal behind them.
func (c *Cache) expireLocked(now time.Time) {
	cutoff := now.Add(-c.opts.Window)
	for c.head < len(c.order) {
		e := c.order[c.head]
		if e.live && !e.at.Before(cutoff) {
			break
		}
		c.popLocked()
	}
	if c.opts.Journal != nil && c.trimmed >= c.lastTrim+1024 {
		c.lastTrim = c.trimmed
		_ = c.opts.Journal.TrimDuplicateIDs(c.trimmed + 1)
	}
}
