package eventlog

import (
	"errors"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/titan-broker/titan/internal/dest"
	"github.com/titan-broker/titan/internal/dispatch"
)

// DurableStore is the port to the saved positions of durable subscriptions as a set:
// listing them by key prefix and deleting them. durable.Log implements it. Safe for
// concurrent use.
type DurableStore interface {
	// Positions calls fn in key order for every saved position under prefix (savedAt is
	// zero when unknown), until fn returns false.
	Positions(prefix string, fn func(key string, seq uint64, savedAt time.Time) bool) error
	// DeletePositions durably forgets the positions under keys.
	DeletePositions(keys ...string) error
}

// durablePrefix starts every durable subscription's position key:
// "durable/<group>/<channel>/<durable-name>". Groups and durable names cannot contain '/',
// so a key splits unambiguously (the channel may).
const durablePrefix = "durable/"

// durableKey returns the position key of the durable subscription name on log id.
func durableKey(id dest.Identity, name string) string {
	return durablePrefix + id.Group + "/" + id.Channel + "/" + name
}

// parseDurableKey is the inverse of durableKey.
func parseDurableKey(key string) (group, channel, name string, ok bool) {
	rest, ok := strings.CutPrefix(key, durablePrefix)
	if !ok {
		return "", "", "", false
	}
	group, rest, ok = strings.Cut(rest, "/")
	i := strings.LastIndexByte(rest, '/')
	if !ok || i <= 0 || i == len(rest)-1 || group == "" {
		return "", "", "", false
	}
	return group, rest[:i], rest[i+1:], true
}

// durables is the registry of durable subscriptions: how many the store holds (counted
// once, at first use, by listing the position keys: proportional to the durable
// subscriptions, which the limit bounds, never to the messages or logs) and which keys live
// readers use. mu serialises creation, deletion and expiry, and is held while calling the
// store; p.mu may be taken under it, never the reverse.
type durables struct {
	mu       sync.Mutex
	loaded   bool           // guarded by mu: count is known (or unlisted)
	unlisted bool           // guarded by mu: the store cannot list positions; nothing is counted
	count    int            // guarded by mu: durable subscriptions the store holds
	live     map[string]int // guarded by mu: live readers by position key

	refused atomic.Uint64 // SUBSCRIBEs refused by the limit
}

// DurableRefusals counts the SUBSCRIBEs refused with dispatch.ErrDurableSubscriptionLimit.
func (p *Pattern) DurableRefusals() uint64 { return p.durables.refused.Load() }

// DurableInfo is one durable subscription the store holds, live or offline.
type DurableInfo struct {
	// Group and Channel name the log (prefixed and bare forms of a channel share it).
	Group, Channel string
	// Name is the durable-name.
	Name string
	// Position is the last acknowledged sequence saved.
	Position uint64
	// SavedAt is when the position was last saved (zero when unknown: saved by an older
	// build); for an offline subscription, when it was last active.
	SavedAt time.Time
	// Live counts the SUBSCRIBEs reading it now (0: offline).
	Live int
}

func (p *Pattern) durableStore() DurableStore {
	ds, _ := p.opts.Store.(DurableStore)
	return ds
}

// loadLocked counts the stored durable subscriptions once. p.durables.mu must be held.
func (p *Pattern) loadDurablesLocked() error {
	r := &p.durables
	if r.loaded {
		return nil
	}
	if r.live == nil {
		r.live = map[string]int{}
	}
	ds := p.durableStore()
	if ds == nil {
		r.loaded = true // no listing: the limit cannot be counted, so it is not enforced
		return nil
	}
	n := 0
	err := ds.Positions(durablePrefix, func(string, uint64, time.Time) bool { n++; return true })
	if errors.Is(err, errors.ErrUnsupported) {
		// A store that cannot list its metadata: durable subscriptions work as before,
		// uncounted (the limit is not enforced), unlisted and not deletable.
		r.unlisted, r.loaded = true, true
		return nil
	}
	if err != nil {
		return err
	}
	r.count, r.loaded = n, true
	return nil
}

// attachDurable resumes, or creates, the durable subscription key for a reader that would
// otherwise start at from (>= 1), and returns where the reader starts. A new durable
// subscription's position (from-1) is saved before the SUBSCRIBE is answered, so messages
// appended while it is offline are delivered when it comes back; creating one beyond
// Options.MaxDurableSubscriptions fails with dispatch.ErrDurableSubscriptionLimit and
// creates nothing. It also returns the sequences a resumed subscription acknowledged
// individually above its position, which are not delivered again. Errors: that, the store's.
func (p *Pattern) attachDurable(key string, from uint64) (uint64, []uint64, error) {
	r := &p.durables
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := p.loadDurablesLocked(); err != nil {
		return 0, nil, err
	}
	st := p.opts.Store
	pos, acked, ok, err := st.Position(key)
	if err != nil {
		return 0, nil, err
	}
	if ok {
		r.live[key]++
		return pos + 1, acked, nil // resume after the last acknowledged sequence
	}
	others := 0
	if p.opts.OtherDurables != nil {
		others = p.opts.OtherDurables()
	}
	if limit := p.opts.MaxDurableSubscriptions; limit > 0 && !r.unlisted && r.count+others >= limit {
		r.refused.Add(1)
		return 0, nil, dispatch.ErrDurableSubscriptionLimit
	}
	if err := st.SavePosition(key, from-1, nil); err != nil {
		return 0, nil, err
	}
	r.count++
	r.live[key]++
	return from, nil, nil
}

// releaseDurable ends a live reader's use of key.
func (p *Pattern) releaseDurable(key string) {
	if key == "" {
		return
	}
	r := &p.durables
	r.mu.Lock()
	if r.live[key] <= 1 {
		delete(r.live, key)
	} else {
		r.live[key]--
	}
	r.mu.Unlock()
}

// DurableCount returns how many durable subscriptions the store holds (counting them on
// first use). Errors: the store's; errors.ErrUnsupported when the store cannot list them.
func (p *Pattern) DurableCount() (int, error) {
	r := &p.durables
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := p.loadDurablesLocked(); err != nil {
		return 0, err
	}
	if r.unlisted {
		return 0, errors.ErrUnsupported
	}
	return r.count, nil
}

// Durables lists the durable subscriptions the store holds, live and offline, in key order
// (group, channel, name). Errors: the store's; none without a DurableStore (nil list).
func (p *Pattern) Durables() ([]DurableInfo, error) {
	ds := p.durableStore()
	if ds == nil {
		return nil, nil
	}
	r := &p.durables
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := p.loadDurablesLocked(); err != nil || r.unlisted {
		return nil, err
	}
	var out []DurableInfo
	err := ds.Positions(durablePrefix, func(key string, seq uint64, at time.Time) bool {
		g, c, n, ok := parseDurableKey(key)
		if ok {
			out = append(out, DurableInfo{Group: g, Channel: c, Name: n, Position: seq, SavedAt: at, Live: r.live[key]})
		}
		return true
	})
	return out, err
}

// DeleteDurable deletes the durable subscription name of log id: its saved position is
// forgotten, durably, and a later SUBSCRIBE with that name starts afresh (and counts
// against the limit again). Errors: dispatch.ErrNoDurableSubscription;
// dispatch.ErrDurableSubscriptionInUse while a live SUBSCRIBE reads it (it is kept);
// the store's.
func (p *Pattern) DeleteDurable(id dest.Identity, name string) error {
	key := durableKey(id, name)
	r := &p.durables
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := p.loadDurablesLocked(); err != nil {
		return err
	}
	if r.live[key] > 0 {
		return dispatch.ErrDurableSubscriptionInUse
	}
	_, _, ok, err := p.opts.Store.Position(key)
	if err != nil {
		return err
	}
	if !ok {
		return dispatch.ErrNoDurableSubscription
	}
	ds := p.durableStore()
	if ds == nil || r.unlisted {
		return dispatch.ErrNoDurableSubscription
	}
	if err := ds.DeletePositions(key); err != nil {
		return err
	}
	r.count--
	return nil
}

// ExpireDurables deletes the offline durable subscriptions last active before now-idle and
// returns their keys, sorted. A subscription whose last activity is unknown (saved by an
// older build) is not expired. Errors: the store's (nothing is deleted then).
func (p *Pattern) ExpireDurables(idle time.Duration, now time.Time) ([]string, error) {
	ds := p.durableStore()
	if ds == nil || idle <= 0 {
		return nil, nil
	}
	r := &p.durables
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := p.loadDurablesLocked(); err != nil || r.unlisted {
		return nil, err
	}
	cutoff := now.Add(-idle)
	var old []string
	err := ds.Positions(durablePrefix, func(key string, _ uint64, at time.Time) bool {
		if !at.IsZero() && at.Before(cutoff) && r.live[key] == 0 {
			old = append(old, key)
		}
		return true
	})
	if err != nil || len(old) == 0 {
		return nil, err
	}
	if err := ds.DeletePositions(old...); err != nil {
		return nil, err
	}
	r.count -= len(old)
	sort.Strings(old)
	return old, nil
}

// HasDurable reports whether the store holds the durable subscription name of log id (live
// or offline). A store error reports true, so that a caller deciding ownership or quotas
// does not take a subscription it cannot see over.
func (p *Pattern) HasDurable(id dest.Identity, name string) bool {
	_, _, ok, err := p.opts.Store.Position(durableKey(id, name))
	return ok || err != nil
}
