package admission

import (
	"log/slog"
	"sync"
	"sync/atomic"
	"time"
)

// ThrottleOptions configure a LoginThrottle.
type ThrottleOptions struct {
	// Base is the back-off after the first failed login of a key (default 100 ms); each
	// further failure doubles it.
	Base time.Duration
	// Max bounds the back-off (default 10 s). An attempt that would have to wait longer
	// (attempts queue up behind one another) is refused at once, its credentials unchecked.
	Max time.Duration
	// Forget is how long a key must stay without a failed login before its failures are
	// forgotten (default 15 min).
	Forget time.Duration
	// MaxKeys bounds the addresses and users remembered (default 100000); past it, keys
	// whose failures are forgotten are swept, then the oldest half.
	MaxKeys int
	// Logger receives a line when a key's back-off grows (at 2, 4, 8… failures); nil
	// discards them.
	Logger *slog.Logger
}

// Default back-off schedule of ThrottleOptions.
const (
	DefaultThrottleBase   = 100 * time.Millisecond
	DefaultThrottleMax    = 10 * time.Second
	DefaultThrottleForget = 15 * time.Minute
	defaultMaxKeys        = 100_000
)

// LoginThrottle backs off failed logins per source address and per user (issue 29).
//
// After n failed logins of a key, its next attempt may be checked no sooner than
// min(Base·2^(n-1), Max) after the last failure; attempts made meanwhile wait, one behind
// the other (each reserves the next slot), so parallel connections from one address do not
// multiply the guesses: an address makes at most one guess per back-off however many
// connections it opens. An attempt that would wait longer than Max is refused without
// checking its credentials (no bcrypt spent on it).
//
// The per-user back-off holds only attempts from an address that has failed logins of its
// own: a user whose password is being guessed from elsewhere still logs in at once from a
// clean address, so guessing cannot lock a user out; a guesser spreading over many
// addresses is held from each address's second failure on. A successful login forgets the
// user's failures (not the address's: a guesser with one valid account must not reset its
// own back-off).
//
// Safe for concurrent use. Stats are atomics.
type LoginThrottle struct {
	o ThrottleOptions

	mu    sync.Mutex
	addrs map[string]*backoff // guarded by mu
	users map[string]*backoff // guarded by mu

	// Failures counts failed logins reported; Delayed the attempts that waited; Refused
	// the attempts refused because they would have waited longer than Max.
	Failures, Delayed, Refused atomic.Uint64
}

// backoff is one key's state.
type backoff struct {
	fails    int       // failed logins not yet forgotten
	lastFail time.Time // when the last one was reported
	next     time.Time // the earliest an attempt may be checked: the next free slot
}

// NewLoginThrottle returns a LoginThrottle with o's schedule (zero fields take defaults).
func NewLoginThrottle(o ThrottleOptions) *LoginThrottle {
	if o.Base <= 0 {
		o.Base = DefaultThrottleBase
	}
	if o.Max <= 0 {
		o.Max = DefaultThrottleMax
	}
	if o.Forget <= 0 {
		o.Forget = DefaultThrottleForget
	}
	if o.MaxKeys <= 0 {
		o.MaxKeys = defaultMaxKeys
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return &LoginThrottle{o: o, addrs: map[string]*backoff{}, users: map[string]*backoff{}}
}

// delay is the back-off after fails failures.
func (t *LoginThrottle) delay(fails int) time.Duration {
	if fails <= 0 {
		return 0
	}
	if fails > 30 || t.o.Base >= t.o.Max>>(fails-1) {
		return t.o.Max // doubling further would pass Max (or overflow)
	}
	return min(t.o.Base<<(fails-1), t.o.Max)
}

// live returns m[k] unless its failures are forgotten (then it is removed).
func (t *LoginThrottle) live(m map[string]*backoff, k string, now time.Time) *backoff {
	b := m[k]
	if b != nil && now.Sub(b.lastFail) >= t.o.Forget && !now.Before(b.next) {
		delete(m, k)
		return nil
	}
	return b
}

// Admit is called before the credentials of a login from remote ("ip:port") naming user
// ("" when none) are checked. It returns how long the caller must wait before checking
// them (0: at once), having reserved that slot, or ErrThrottled when the wait would exceed
// Max (the attempt is then to be refused, unchecked). It does not wait itself.
func (t *LoginThrottle) Admit(remote, user string) (time.Duration, error) {
	ip := HostOf(remote)
	now := time.Now()
	t.mu.Lock()
	defer t.mu.Unlock()
	a := t.live(t.addrs, ip, now)
	if a == nil || a.fails == 0 {
		return 0, nil // a clean address: neither back-off holds it
	}
	at := maxTime(now, a.next)
	u := (*backoff)(nil)
	if user != "" {
		if u = t.live(t.users, user, now); u != nil {
			at = maxTime(at, u.next)
		}
	}
	wait := at.Sub(now)
	if wait > t.o.Max {
		t.Refused.Add(1)
		return 0, ErrThrottled
	}
	// Reserve: the attempt after this one waits one more back-off.
	a.next = at.Add(t.delay(a.fails))
	if u != nil {
		u.next = at.Add(t.delay(u.fails))
	}
	if wait > 0 {
		t.Delayed.Add(1)
	}
	return wait, nil
}

// Fail reports a failed login from remote naming user ("" when none): both keys' back-off
// doubles.
func (t *LoginThrottle) Fail(remote, user string) {
	t.Failures.Add(1)
	ip := HostOf(remote)
	now := time.Now()
	t.mu.Lock()
	a := t.failLocked(t.addrs, ip, now)
	var ufails int
	if user != "" {
		ufails = t.failLocked(t.users, user, now).fails
	}
	fails := a.fails
	t.mu.Unlock()
	if fails >= 2 && fails&(fails-1) == 0 {
		t.o.Logger.Warn("failed logins: backing off", "remote", ip, "user", user,
			"address_failures", fails, "user_failures", ufails, "delay", t.delay(fails).String())
	}
}

// failLocked counts one failure of key k in m. t.mu must be held.
func (t *LoginThrottle) failLocked(m map[string]*backoff, k string, now time.Time) *backoff {
	b := t.live(m, k, now)
	if b == nil {
		if len(m) >= t.o.MaxKeys {
			t.sweepLocked(m, now)
		}
		b = &backoff{}
		m[k] = b
	}
	b.fails++
	b.lastFail = now
	b.next = maxTime(b.next, now.Add(t.delay(b.fails)))
	return b
}

// sweepLocked removes forgotten keys of m, then, if it is still full, the half with the
// oldest failures. t.mu must be held.
func (t *LoginThrottle) sweepLocked(m map[string]*backoff, now time.Time) {
	var sum time.Duration
	for k, b := range m {
		if now.Sub(b.lastFail) >= t.o.Forget && !now.Before(b.next) {
			delete(m, k)
		} else {
			sum += now.Sub(b.lastFail)
		}
	}
	if len(m) < t.o.MaxKeys || len(m) == 0 {
		return
	}
	mean := sum / time.Duration(len(m))
	for k, b := range m {
		if now.Sub(b.lastFail) >= mean {
			delete(m, k)
		}
	}
}

// Succeed reports a successful login of user: its failures are forgotten.
func (t *LoginThrottle) Succeed(remote, user string) {
	if user == "" {
		return
	}
	t.mu.Lock()
	delete(t.users, user)
	t.mu.Unlock()
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
