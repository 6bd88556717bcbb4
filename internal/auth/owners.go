package auth

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/titan-broker/titan/internal/dest"
)

// OwnersMetaKey is the store metadata key holding the Owners ledger (a JSON array of Owned).
const OwnersMetaKey = "auth-owners"

// The kinds of Owned resources.
const (
	// KindLogDurable is an events-store durable subscription: Identity is the log, Name its
	// durable-name.
	KindLogDurable = "log-durable"
	// KindTopicDurable is a durable topic subscription: Identity.Group is its group (Pattern
	// events, no Channel: the subscription keeps its name when it is moved to another topic), Owner
	// the CONNECT client-id ("" for RabbitMQ's), Name its name.
	KindTopicDurable = "topic-durable"
	// KindDestination is a queue or events-store log a user's frame created: Identity.
	KindDestination = "destination"
)

// Owned is one resource a user made: a durable subscription or a destination. It is the
// ledger's unit and its stored form.
type Owned struct {
	// Kind is KindLogDurable, KindTopicDurable or KindDestination.
	Kind string `json:"kind"`
	// Identity names the destination (for KindTopicDurable only its Group and Pattern).
	Identity dest.Identity `json:"identity"`
	// Owner is the CONNECT client-id of a KindTopicDurable subscription ("" otherwise).
	Owner string `json:"owner,omitempty"`
	// Name is the durable subscription's name ("" for KindDestination).
	Name string `json:"name,omitempty"`
	// User is the user that made it.
	User string `json:"user"`
}

// key returns o without its user, its strings detached (a frame's may alias its buffer).
func (o Owned) key() Owned {
	o.User = ""
	o.Identity.Group, o.Identity.Channel = strings.Clone(o.Identity.Group), strings.Clone(o.Identity.Channel)
	o.Owner, o.Name = strings.Clone(o.Owner), strings.Clone(o.Name)
	return o
}

// Meta is the metadata port of the store the ledger is kept in (store.Store implements it):
// SetMeta is durable when it returns.
type Meta interface {
	SetMeta(key string, value []byte) error
	Meta(key string) (value []byte, ok bool, err error)
}

// Owners is the ledger of who made which durable subscription and destination (issue #29):
// durable subscription names belong to their maker, and the per-user durable-subscriptions
// and destinations quotas count a user's entries. An entry lives as long as its resource: an
// entry whose resource the exists port no longer finds (deleted by UNSUBSCRIBE, an operator,
// expiry, or never made because the SUBSCRIBE then failed) is dropped when next looked at,
// so no deletion path has to tell the ledger. It is stored in the store's metadata (Meta) on
// every change, so ownership survives a restart. Safe for concurrent use.
type Owners struct {
	meta   func() Meta // nil result: kept in memory only
	exists func(Owned) bool

	mu     sync.Mutex
	loaded bool
	owners map[Owned]string              // key (User "") → user; guarded by mu
	byUser map[string]map[Owned]struct{} // user → its keys; guarded by mu
	// made is when this process recorded an entry whose resource the frame was about to
	// make: for claimWindow it stays its maker's even before its resource exists, so a
	// concurrent SUBSCRIBE of another user with the same name cannot take it over. Guarded by mu.
	made map[Owned]time.Time
	now  func() time.Time
}

// claimWindow is how long a just-claimed entry whose resource does not exist (yet) keeps its
// owner: longer than a SUBSCRIBE takes from the authorization stage to its pattern.
const claimWindow = 30 * time.Second

// NewOwners returns a ledger stored through meta (called at first use; nil or a nil result
// keeps it in memory) whose entries live while exists reports their resource.
func NewOwners(meta func() Meta, exists func(Owned) bool) *Owners {
	return &Owners{meta: meta, exists: exists, owners: map[Owned]string{}, byUser: map[string]map[Owned]struct{}{},
		made: map[Owned]time.Time{}, now: time.Now}
}

// Claim is the check a frame that may make o (o.User set) passes before it makes it:
//
//   - o exists and is another user's: ErrOwnedByOther (nothing changes);
//   - o exists and is o.User's, or exists without an owner (made before the ledger, or with
//     no users file): the user owns it, made is false;
//   - o does not exist: unless canCreate is false (ErrCreateRefused) or the user already
//     owns limit (> 0) live resources of o's class (ErrQuotaExceeded), it is recorded as the
//     user's, made is true.
//
// Durable subscription kinds count together. Errors: those, the store's.
func (l *Owners) Claim(o Owned, canCreate bool, limit int) (made bool, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.loadLocked(); err != nil {
		return false, err
	}
	k := o.key()
	if l.exists(k) {
		owner, ok := l.owners[k]
		switch {
		case ok && owner != o.User:
			return false, ErrOwnedByOther
		case ok:
			return false, nil
		}
		l.addLocked(k, o.User)
		return false, l.saveLocked()
	}
	if !canCreate {
		return false, ErrCreateRefused
	}
	if owner, ok := l.owners[k]; ok { // its resource is gone, or not made yet
		if t, pending := l.made[k]; pending && owner != o.User && l.now().Sub(t) < claimWindow {
			return false, ErrOwnedByOther
		}
		l.removeLocked(k, owner)
	}
	if limit > 0 && l.countLocked(o.User, k.Kind == KindDestination) >= limit {
		return false, ErrQuotaExceeded
	}
	l.addLocked(k, o.User)
	l.made[k] = l.now()
	return true, l.saveLocked()
}

// Check returns ErrOwnedByOther when o exists and belongs to another user than o.User (an
// UNSUBSCRIBE that would delete it); nil otherwise. Errors: that, the store's.
func (l *Owners) Check(o Owned) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.loadLocked(); err != nil {
		return err
	}
	k := o.key()
	if owner, ok := l.owners[k]; ok && owner != o.User && l.exists(k) {
		return ErrOwnedByOther
	}
	return nil
}

// Count returns how many live resources user owns: destinations, or durable subscriptions.
func (l *Owners) Count(user string, destinations bool) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.loadLocked() != nil {
		return 0
	}
	return l.countLocked(user, destinations)
}

// countLocked counts user's live entries of one class, dropping those whose resource is gone.
func (l *Owners) countLocked(user string, destinations bool) int {
	n := 0
	for k := range l.byUser[user] {
		if (k.Kind == KindDestination) != destinations {
			continue
		}
		if !l.exists(k) {
			if t, pending := l.made[k]; pending && l.now().Sub(t) < claimWindow {
				n++ // being made: it counts
				continue
			}
			l.removeLocked(k, user)
			continue
		}
		delete(l.made, k) // made: no longer pending
		n++
	}
	return n
}

func (l *Owners) addLocked(k Owned, user string) {
	user = strings.Clone(user)
	l.owners[k] = user
	m := l.byUser[user]
	if m == nil {
		m = map[Owned]struct{}{}
		l.byUser[user] = m
	}
	m[k] = struct{}{}
}

func (l *Owners) removeLocked(k Owned, user string) {
	delete(l.owners, k)
	delete(l.made, k)
	delete(l.byUser[user], k)
	if len(l.byUser[user]) == 0 {
		delete(l.byUser, user)
	}
}

func (l *Owners) store() Meta {
	if l.meta == nil {
		return nil
	}
	return l.meta()
}

func (l *Owners) loadLocked() error {
	if l.loaded {
		return nil
	}
	if m := l.store(); m != nil {
		data, ok, err := m.Meta(OwnersMetaKey)
		if err != nil {
			return fmt.Errorf("auth: owners: %w", err)
		}
		if ok {
			var list []Owned
			if err := json.Unmarshal(data, &list); err != nil {
				return fmt.Errorf("auth: owners: %w", err)
			}
			for _, o := range list {
				l.addLocked(o.key(), o.User)
			}
		}
	}
	l.loaded = true
	return nil
}

// saveLocked writes the ledger (proportional to the live durable subscriptions and created
// destinations, which the broker's limits bound).
func (l *Owners) saveLocked() error {
	m := l.store()
	if m == nil {
		return nil
	}
	list := make([]Owned, 0, len(l.owners))
	for k, u := range l.owners {
		k.User = u
		list = append(list, k)
	}
	data, err := json.Marshal(list)
	if err != nil {
		return err
	}
	if err := m.SetMeta(OwnersMetaKey, data); err != nil {
		return fmt.Errorf("auth: owners: %w", err)
	}
	return nil
}
