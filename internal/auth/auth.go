// Package auth is Titan's security (DESIGN §8): users with bcrypt password hashes and roles
// read from a users file, authentication at CONNECT (login/passcode, a verified client
// certificate, or a configured anonymous user), and per-destination authorization in the
// shape of ActiveMQ Artemis security-settings: a match on (group, pattern, channel) with
// `#`/`*` wildcards grants the permissions send, consume, browse, create and manage to roles,
// and the most specific match wins.
//
// An Authority holds the current users and permissions as an immutable snapshot behind an
// atomic pointer. Reload reads the file again and swaps the snapshot: connections are not
// dropped, and every later check (the next frame of an existing connection included) uses the
// new one. Authorization decisions are cached per snapshot in a fixed-size table, so a check
// on the hot path costs a hash and a compare, not a walk over the rules.
package auth

import (
	"crypto/sha256"
	"crypto/subtle"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sort"
	"strings"
	"sync"
	"sync/atomic"

	"golang.org/x/crypto/bcrypt"

	"github.com/titan-broker/titan/internal/dest"
)

// Reason says why an authentication failed (a metric label; never sent to the client).
type Reason uint8

// Failure reasons.
const (
	// ReasonBadCredentials: unknown login or wrong passcode (the two are not told apart).
	ReasonBadCredentials Reason = iota
	// ReasonNoAnonymous: a CONNECT without login while no anonymous user is configured.
	ReasonNoAnonymous
	// ReasonCertificate: a verified client certificate that maps to no user, or a login
	// header naming another user than the certificate.
	ReasonCertificate
	// ReasonNotLoopback: no users file is configured and the peer is not on loopback.
	ReasonNotLoopback
	numReasons
)

var reasonNames = [numReasons]string{"bad-credentials", "anonymous-disabled", "certificate", "not-loopback"}

// String returns the reason's metric label.
func (r Reason) String() string {
	if r < numReasons {
		return reasonNames[r]
	}
	return "unknown"
}

// refusal is an authentication failure: errors.Is(err, ErrAccessRefused), ReasonOf(err).
type refusal struct{ reason Reason }

func (r refusal) Error() string        { return "auth: access refused (" + r.reason.String() + ")" }
func (r refusal) Is(target error) bool { return target == ErrAccessRefused }

// ReasonOf returns the failure reason of an error from Authenticate (ok false for others).
func ReasonOf(err error) (Reason, bool) {
	var r refusal
	if errors.As(err, &r) {
		return r.reason, true
	}
	return 0, false
}

// Credentials are what a connection presents at CONNECT.
type Credentials struct {
	// Login and Passcode are the CONNECT headers ("" when absent).
	Login, Passcode string
	// Remote is the peer address (for the loopback rule and logs).
	Remote net.Addr
	// Certificates is the verified client certificate chain, leaf first; nil when the
	// connection has no verified certificate.
	Certificates []*x509.Certificate
}

// Options configure an Authority.
type Options struct {
	// Path is the users file. Empty selects open mode: no users, anonymous access with every
	// permission from loopback peers only (the quick start), every other peer refused.
	Path string
	// Logger receives failures (with the remote address, never the passcode) and reloads.
	Logger *slog.Logger
	// OnReload, when set, runs after every successful Reload, once the new snapshot is in
	// force (the broker closes what the new file no longer allows).
	OnReload func()
}

// Authority authenticates users and authorizes their operations. Safe for concurrent use.
type Authority struct {
	path string
	log  *slog.Logger
	snap atomic.Pointer[snapshot]
	mu   sync.Mutex // serialises Reload
	// onReload is Options.OnReload (run with mu held, so reloads apply in order).
	onReload func()

	// Failures counts refused authentications per Reason.
	Failures [numReasons]atomic.Uint64
	// Reloads counts successful reloads (the first load excluded).
	Reloads atomic.Uint64
}

// snapshot is one immutable reading of the users file plus its decision cache.
type snapshot struct {
	open      bool // no users file: loopback anonymous, every permission
	users     map[string]*User
	certUsers map[string]string // certificate name → user
	anonymous string
	rules     []rule // most specific first
	quotas    Quotas
	cache     *decisionCache
	// verified remembers, per user, a hash of the last passcode bcrypt accepted, so that
	// reconnect storms do not burn a bcrypt check each (reset by every reload).
	verified sync.Map // user → [32]byte
}

// MaxPasswordBytes is the longest password: bcrypt's input limit. Longer ones are refused
// when set (ErrWeakPassword) and at login (issue #29).
const MaxPasswordBytes = 72

// OpenUser is the principal of an anonymous loopback connection in open mode (no users file).
const OpenUser = "anonymous"

// New loads the users file at o.Path (or selects open mode when it is empty). Errors: those
// of Load (a missing or invalid file).
func New(o Options) (*Authority, error) {
	a := &Authority{path: o.Path, log: o.Logger, onReload: o.OnReload}
	if a.log == nil {
		a.log = slog.New(slog.DiscardHandler)
	}
	if o.Path == "" {
		a.snap.Store(&snapshot{open: true, cache: newDecisionCache()})
		return a, nil
	}
	s, err := a.loadSnapshot(o.Path)
	if err != nil {
		return nil, err
	}
	a.snap.Store(s)
	return a, nil
}

// Open reports whether the Authority runs in open mode (no users file).
func (a *Authority) Open() bool { return a.snap.Load().open }

// Path returns the users file ("" in open mode).
func (a *Authority) Path() string { return a.path }

// Reload re-reads the users file and swaps the snapshot atomically. On error the current
// snapshot stays. A no-op in open mode.
func (a *Authority) Reload() error {
	if a.path == "" {
		return nil
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	s, err := a.loadSnapshot(a.path)
	if err != nil {
		a.log.Error("users file not reloaded; the previous users and permissions stay in force", "path", a.path, "err", err)
		return err
	}
	a.snap.Store(s)
	a.Reloads.Add(1)
	a.log.Info("users file reloaded", "path", a.path, "users", len(s.users), "permissions", len(s.rules))
	if a.onReload != nil {
		a.onReload()
	}
	return nil
}

// loadSnapshot reads the users file and warns about every user no rule grants anything
// (issue #31: such a user logs in and can do nothing, which is rarely what was meant).
func (a *Authority) loadSnapshot(path string) (*snapshot, error) {
	f, err := Load(path)
	if err != nil {
		return nil, err
	}
	for _, name := range f.Unpermitted() {
		a.log.Warn("user has no permission: it can log in but do nothing; grant some with `titan user grant NAME 'DEST-PATTERN:perm,perm'`",
			"user", name, "path", path)
	}
	return newSnapshot(f), nil
}

func newSnapshot(f *File) *snapshot {
	s := &snapshot{users: f.Users, certUsers: map[string]string{}, anonymous: f.Anonymous, cache: newDecisionCache(), quotas: f.Quotas}
	for name, u := range f.Users {
		for _, c := range u.Certificates {
			if kind, value, err := parseCertIdentity(c); err == nil { // Validate refused others
				s.certUsers[certKey(kind, value)] = name
			}
		}
	}
	for i, r := range f.Permissions {
		c, err := compileRule(r, i)
		if err == nil { // Validate already refused bad rules
			s.rules = append(s.rules, c)
		}
	}
	sort.SliceStable(s.rules, func(i, j int) bool { return moreSpecific(&s.rules[i], &s.rules[j]) })
	return s
}

// dummyHash is checked for unknown users so that a refusal takes as long either way. It is
// made on first use, not at init (every titan command would pay for it).
var dummyHash = sync.OnceValue(func() []byte {
	h, _ := bcrypt.GenerateFromPassword([]byte("titan-dummy-password"), BcryptCost)
	return h
})

// Authenticate maps credentials to a user name. A verified client certificate one of the
// users file's typed certificate identities maps (see CertDN) logs in as that user, and a
// login header, when sent, must name that same user; a certificate no entry maps, with no
// login header, is refused. Otherwise (certificate login is off while no user lists a
// certificate identity) a
// login with its passcode is checked against the bcrypt hash, and no login selects the
// anonymous user when one is configured. In open mode loopback peers are OpenUser and
// everyone else is refused. Errors: ErrAccessRefused (ReasonOf tells why); each is counted in
// Failures and logged with the remote address, never the passcode.
func (a *Authority) Authenticate(c Credentials) (string, error) {
	s := a.snap.Load()
	user, reason, ok := s.authenticate(c)
	if ok {
		return strings.Clone(user), nil // c.Login may point into a read buffer
	}
	a.Failures[reason].Add(1)
	remote := ""
	if c.Remote != nil {
		remote = c.Remote.String()
	}
	if reason == ReasonNotLoopback {
		a.log.Warn("access refused: no users are configured, so only loopback clients may connect; create users with `titan user add NAME --users FILE` and start with --users FILE (titan.security.users-file)",
			"remote", remote)
	} else {
		a.log.Warn("access refused", "reason", reason.String(), "login", c.Login, "remote", remote)
	}
	return "", refusal{reason}
}

func (s *snapshot) authenticate(c Credentials) (string, Reason, bool) {
	if s.open {
		if isLoopback(c.Remote) {
			return OpenUser, 0, true
		}
		return "", ReasonNotLoopback, false
	}
	if len(c.Certificates) > 0 && len(s.certUsers) > 0 {
		u, ok := s.certUser(c.Certificates[0])
		switch {
		case ok && (c.Login == "" || c.Login == u):
			return u, 0, true
		case ok || c.Login == "":
			return "", ReasonCertificate, false
		}
		// A certificate no entry maps: it authenticated the channel only; the login
		// and passcode below decide.
	}
	if c.Login == "" {
		if s.anonymous == "" {
			return "", ReasonNoAnonymous, false
		}
		return s.anonymous, 0, true
	}
	u, ok := s.users[c.Login]
	// bcrypt reads 72 bytes and ignores the rest: a longer passcode would log in with any
	// suffix of a 72-byte password. No hash is made of one (HashPassword), so none matches.
	if !ok || u.Password == "" || len(c.Passcode) > MaxPasswordBytes {
		_ = bcrypt.CompareHashAndPassword(dummyHash(), []byte(c.Passcode)) // same time either way
		return "", ReasonBadCredentials, false
	}
	sum := sha256.Sum256([]byte(c.Login + "\x00" + c.Passcode))
	if v, ok := s.verified.Load(c.Login); ok {
		if prev := v.([32]byte); subtle.ConstantTimeCompare(prev[:], sum[:]) == 1 {
			return c.Login, 0, true
		}
	}
	if bcrypt.CompareHashAndPassword([]byte(u.Password), []byte(c.Passcode)) != nil {
		return "", ReasonBadCredentials, false
	}
	s.verified.Store(strings.Clone(c.Login), sum)
	return c.Login, 0, true
}

// certUser maps a verified leaf certificate to a user through the file's typed certificate
// identities (see CertDN); the subject DN is tried first, then the CN, then each SAN.
func (s *snapshot) certUser(cert *x509.Certificate) (string, bool) {
	for _, k := range certIdentities(cert) {
		if u, ok := s.certUsers[k]; ok {
			return u, true
		}
	}
	return "", false
}

// isLoopback reports whether addr is a loopback IP (host:port strings included).
func isLoopback(addr net.Addr) bool {
	if addr == nil {
		return false
	}
	var ip net.IP
	switch a := addr.(type) {
	case *net.TCPAddr:
		ip = a.IP
	default:
		host, _, err := net.SplitHostPort(addr.String())
		if err != nil {
			host = addr.String()
		}
		ip = net.ParseIP(host)
	}
	return ip != nil && ip.IsLoopback()
}

// IsLoopbackHost reports whether host (an IP or "localhost") names the loopback interface.
func IsLoopbackHost(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// Allowed returns the permissions user has on (group, pattern, channel): those the most
// specific matching rule grants to any of the user's roles (none when no rule matches or the
// user no longer exists). In open mode every user has All. The decision is cached per
// snapshot: a repeated check costs a hash, an atomic load and a compare, with no allocation.
func (a *Authority) Allowed(user, group string, pattern dest.Pattern, channel string) Permission {
	s := a.snap.Load()
	if s.open {
		return All
	}
	return s.allowed(user, group, pattern, channel)
}

func (s *snapshot) allowed(user, group string, pattern dest.Pattern, channel string) Permission {
	h := s.cache.hash(user, group, pattern, channel)
	if p, ok := s.cache.get(h, user, group, pattern, channel); ok {
		return p
	}
	p := s.decide(user, group, pattern, channel)
	s.cache.put(h, user, group, pattern, channel, p)
	return p
}

// decide walks the rules (most specific first) and returns what the first match grants.
func (s *snapshot) decide(user, group string, pattern dest.Pattern, channel string) Permission {
	u, ok := s.users[user]
	if !ok {
		return 0
	}
	for i := range s.rules {
		r := &s.rules[i]
		if r.matches(group, pattern, channel) {
			return r.grantsTo(u)
		}
	}
	return 0
}

// grantsTo returns what r grants to u's roles together.
func (r *rule) grantsTo(u *User) Permission {
	var p Permission
	for _, role := range u.Roles {
		p |= r.grants[role]
	}
	return p
}

// Has reports whether user holds perm on at least one rule (for operations that name no
// destination, such as reading the monitor API's snapshot). In open mode it is true.
func (a *Authority) Has(user string, perm Permission) bool {
	s := a.snap.Load()
	if s.open {
		return true
	}
	u, ok := s.users[user]
	if !ok {
		return false
	}
	for i := range s.rules {
		for _, role := range u.Roles {
			if s.rules[i].grants[role]&perm == perm {
				return true
			}
		}
	}
	return false
}

// HasUser reports whether the current snapshot holds user (always true in open mode).
func (a *Authority) HasUser(user string) bool {
	s := a.snap.Load()
	if s.open {
		return true
	}
	_, ok := s.users[user]
	return ok
}

// Users returns the number of users in the current snapshot.
func (a *Authority) Users() int { return len(a.snap.Load().users) }

// String describes the mode for logs.
func (a *Authority) String() string {
	if a.Open() {
		return "open (no users file: anonymous from loopback only)"
	}
	return fmt.Sprintf("users file %s", a.path)
}

// Operator returns user's broker-wide rights: what the catch-all rule (any group, any
// pattern, channel "#") grants to the user's roles. The monitor API requires them for what
// names no destination — listing and closing connections, reloading the users file, the
// cluster's membership, /metrics — so a rule on some channels never reaches those. When the
// file declares several catch-all rules, the first one counts (as for any destination that
// only they match). In open mode it is All.
func (a *Authority) Operator(user string) Permission {
	s := a.snap.Load()
	if s.open {
		return All
	}
	u, ok := s.users[user]
	if !ok {
		return 0
	}
	for i := range s.rules {
		r := &s.rules[i]
		if r.group == "" && r.pattern == 0 && len(r.channel) == 1 && r.channel[0] == "#" {
			return r.grantsTo(u)
		}
	}
	return 0
}
