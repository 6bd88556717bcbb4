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
	key   string
	at    time.Time
	token uint64
	live  bool
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
		c.addLocked(&entry{key: key, at: at, token: token, live: true})
	})
}

// Claim checks dupID on id: dup reports a repeat seen within the window (the SEND must be
// answered without being stored or delivered). Otherwise the id is remembered (journaled
// when durable is set, before Claim returns) and undo forgets it again, for a SEND that was
// then not accepted. Errors: the journal's (nothing is remembered then).
func (c *Cache) Claim(id dest.Identity, dupID string, durable bool) (dup bool, undo func(), err error) {
	key := Key(id, dupID)
	now := c.opts.Now()
	c.mu.Lock()
	c.expireLocked(now)
	if _, ok := c.ids[key]; ok {
		c.Duplicates++
		c.mu.Unlock()
		return true, nil, nil
	}
	e := &entry{key: key, at: now, live: true}
	c.addLocked(e) // claimed before the journal write: a concurrent retry is a duplicate too
	c.mu.Unlock()
	if durable && c.opts.Journal != nil {
		tok, err := c.opts.Journal.RecordDuplicateID(key, now)
		if err != nil {
			c.remove(e)
			return false, nil, err
		}
		c.mu.Lock()
		e.token = tok
		c.mu.Unlock()
	}
	return false, func() { c.remove(e) }, nil
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
