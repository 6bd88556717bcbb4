// Package dedup is duplicate detection (Artemis's duplicate id cache): a SEND carrying a
// producer-chosen duplicate id that repeats an id seen on the same destination within a
// window is not stored or delivered again, and still gets its RECEIPT, so a producer that
// retries after a lost RECEIPT or a timeout cannot create duplicates.
//
// The Cache keeps the ids in memory, bounded by a window (older ids are forgotten) and a
// cap (the oldest is forgotten first). It does not write ids itself: the durable store
// writes a persistent message's id in the same atomic batch as the message (durable.Log,
// the COMMIT's batch for a transaction), so that a stored message's id is stored whenever
// the message is, whatever the crash. At start the Cache is rebuilt from those records
// (Load, through a Journal), and it trims the journal behind the ids it forgets. Safe for
// concurrent use.
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

// Journal is where the ids of stored messages are kept (implemented by durable.Log, which
// writes each one in the batch of its message). LoadDuplicateIDs calls fn for every stored
// id (its Key and acceptance time), oldest first; TrimDuplicateIDs drops the stored ids
// accepted before the given time (the window's start, or the newest id the cap evicted).
type Journal interface {
	LoadDuplicateIDs(fn func(key string, at time.Time)) error
	TrimDuplicateIDs(before time.Time) error
}

// Options configure a Cache.
type Options struct {
	// Window is how long an id is remembered (default DefaultWindow).
	Window time.Duration
	// Cap bounds the ids remembered (default DefaultCap).
	Cap int
	// Journal, when set, is read by Load and trimmed behind the ids the Cache forgets.
	Journal Journal
	// Now is the time source (default time.Now).
	Now func() time.Time
}

type entry struct {
	key     string
	at      time.Time
	live    bool // still the remembered entry for key
	settled bool // its SEND was accepted (a repeat is a duplicate, not in flight)
}

// Cache is the duplicate id cache.
type Cache struct {
	opts Options

	mu    sync.Mutex
	ids   map[string]*entry // guarded by mu
	order []*entry          // guarded by mu: oldest first (a FIFO; head is order[head])
	head  int               // guarded by mu

	trimBefore time.Time // guarded by mu: the newest acceptance time forgotten
	popped     int       // guarded by mu: entries forgotten since the journal was last trimmed

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

// Key returns the cache key of a duplicate id sent to id: id.String(), NUL, dupID.
func Key(id dest.Identity, dupID string) string {
	return string(AppendKey(make([]byte, 0, len(id.Group)+len(id.Channel)+len(dupID)+16), id, dupID))
}

// AppendKey appends Key(id, dupID) to dst without building the strings (the durable store
// writes it into a message's batch).
func AppendKey(dst []byte, id dest.Identity, dupID string) []byte {
	dst = append(dst, id.Group...)
	dst = append(dst, ':')
	dst = id.AppendDestination(dst)
	dst = append(dst, 0)
	return append(dst, dupID...)
}

// Load rebuilds the cache from the journal (at start-up, before traffic): every stored id
// inside the window is remembered again (the newest Cap of them), as accepted; the journal
// is then trimmed behind the window.
func (c *Cache) Load() error {
	if c.opts.Journal == nil {
		return nil
	}
	cutoff := c.opts.Now().Add(-c.opts.Window)
	c.mu.Lock()
	err := c.opts.Journal.LoadDuplicateIDs(func(key string, at time.Time) {
		if at.Before(cutoff) {
			return
		}
		c.addLocked(&entry{key: key, at: at, live: true, settled: true})
	})
	trim := c.trimBefore
	c.popped = 0
	c.mu.Unlock()
	if err != nil {
		return err
	}
	if trim.Before(cutoff) {
		trim = cutoff
	}
	return c.opts.Journal.TrimDuplicateIDs(trim)
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
// window (accepted true). A stored message's id is stored with it, in the same atomic batch,
// by the store (not by the Cache: the caller marks the message, message.DuplicateClaimed), so
// that after any crash the id is known exactly when the message was stored — a retry is
// never stored twice, and never answered for a message that was lost.
func (c *Cache) Claim(id dest.Identity, dupID string) (dup bool, settle func(accepted bool), err error) {
	key := Key(id, dupID)
	now := c.opts.Now()
	c.mu.Lock()
	c.expireLocked(now)
	trim, doTrim := c.trimDueLocked()
	if old, ok := c.ids[key]; ok {
		if old.settled {
			c.Duplicates++
		}
		c.mu.Unlock()
		c.trim(trim, doTrim)
		if !old.settled {
			return false, nil, ErrInFlight
		}
		return true, nil, nil
	}
	e := &entry{key: key, at: now, live: true}
	c.addLocked(e) // claimed at once: a concurrent repeat sees it in flight
	c.mu.Unlock()
	c.trim(trim, doTrim)
	return false, func(accepted bool) { c.settle(e, accepted) }, nil
}

// settle ends e's claim (see Claim).
func (c *Cache) settle(e *entry, accepted bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !accepted {
		if c.ids[e.key] == e {
			delete(c.ids, e.key)
		}
		e.live = false
		return
	}
	e.settled = true
}

// trimEvery is how many forgotten ids make a journal trim due.
const trimEvery = 1024

// trimDueLocked reports whether the journal should be trimmed, and before when: every
// trimEvery forgotten ids.
func (c *Cache) trimDueLocked() (time.Time, bool) {
	if c.opts.Journal == nil || c.popped < trimEvery {
		return time.Time{}, false
	}
	c.popped = 0
	return c.trimBefore, true
}

// trim drops the journal's ids accepted before t, outside c.mu (it reads the store). A
// failed trim is retried with the next one.
func (c *Cache) trim(t time.Time, due bool) {
	if due {
		_ = c.opts.Journal.TrimDuplicateIDs(t)
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
	if e.at.After(c.trimBefore) {
		c.trimBefore = e.at
	}
	c.popped++
	if c.head > 1024 && c.head*2 > len(c.order) {
		c.order = append([]*entry(nil), c.order[c.head:]...)
		c.head = 0
	}
}

// expireLocked forgets entries older than the window.
func (c *Cache) expireLocked(now time.Time) {
	cutoff := now.Add(-c.opts.Window)
	for c.head < len(c.order) {
		e := c.order[c.head]
		if e.live && !e.at.Before(cutoff) {
			break
		}
		c.popLocked()
	}
}
