package auth

import (
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/crypto/bcrypt"

	"github.com/titan-broker/titan/internal/dest"
)

// writeUsers builds a users file at a temporary path: users with passwords (hashed here),
// plus the permissions and anonymous YAML given verbatim.
func writeUsers(t testing.TB, users map[string][]string, passwords map[string]string, extra string) string {
	t.Helper()
	f := &File{Users: map[string]*User{}}
	for name, roles := range users {
		if err := f.AddUser(name, nil, roles); err != nil {
			t.Fatal(err)
		}
		if p, ok := passwords[name]; ok {
			f.Users[name].Password = quickHash(t, p)
		}
	}
	path := filepath.Join(t.TempDir(), "users.yml")
	if err := f.Save(path); err != nil {
		t.Fatal(err)
	}
	if extra != "" {
		data, _ := os.ReadFile(path)
		data = []byte(strings.Replace(string(data), "permissions: []\n", "", 1) + extra)
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return path
}

// quickHash is a bcrypt hash at the minimum cost, so that tests (under -race above all) do
// not spend seconds hashing; File.AddUser is tested at the real cost separately.
func quickHash(t testing.TB, pw string) string {
	t.Helper()
	h, err := bcrypt.GenerateFromPassword([]byte(pw), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	return string(h)
}

const testPerms = `permissions:
  - {channel: "#", send: [admins], consume: [admins], browse: [admins], create: [admins], manage: [admins]}
  - {pattern: queues, channel: "orders.#", send: [apps], consume: [workers], create: [apps]}
  - {pattern: queues, channel: "orders.secret", consume: [admins]}
  - {group: billing, channel: "#", consume: [billing]}
  - {pattern: events, channel: "prices.*", consume: [apps, workers]}
  - {pattern: events-store, channel: "audit.*", send: [apps, workers], create: [apps]}
anonymous: guest
`

func newTestAuthority(t testing.TB) *Authority {
	t.Helper()
	path := writeUsers(t,
		map[string][]string{"admin": {"admins"}, "app": {"apps"}, "worker": {"workers"}, "bill": {"billing"}, "guest": {}},
		map[string]string{"admin": "adminpw", "app": "apppw", "worker": "workerpw", "bill": "billpw"}, testPerms)
	a, err := New(Options{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

var loop = &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 5000}
var remote = &net.TCPAddr{IP: net.IPv4(192, 0, 2, 7), Port: 5000}

func TestAuthenticatePassword(t *testing.T) {
	a := newTestAuthority(t)
	cases := []struct {
		login, pass string
		want        string
		reason      Reason
	}{
		{"admin", "adminpw", "admin", 0},
		{"admin", "adminpw", "admin", 0}, // the verified cache
		{"admin", "wrong", "", ReasonBadCredentials},
		{"nobody", "adminpw", "", ReasonBadCredentials},
		{"guest", "", "", ReasonBadCredentials}, // no password: no password login
		{"", "", "guest", 0},                    // anonymous
	}
	for _, c := range cases {
		u, err := a.Authenticate(Credentials{Login: c.login, Passcode: c.pass, Remote: remote})
		if c.want != "" {
			if err != nil || u != c.want {
				t.Errorf("%s/%s: got %q, %v; want %q", c.login, c.pass, u, err, c.want)
			}
			continue
		}
		if !errors.Is(err, ErrAccessRefused) {
			t.Errorf("%s/%s: err %v, want access refused", c.login, c.pass, err)
		}
		if r, _ := ReasonOf(err); r != c.reason {
			t.Errorf("%s/%s: reason %v, want %v", c.login, c.pass, r, c.reason)
		}
	}
	if got := a.Failures[ReasonBadCredentials].Load(); got != 3 {
		t.Errorf("bad-credentials failures = %d, want 3", got)
	}
}

func TestAnonymousRefusedWhenNotConfigured(t *testing.T) {
	path := writeUsers(t, map[string][]string{"a": {"r"}}, map[string]string{"a": "pw"}, "")
	a, err := New(Options{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	_, err = a.Authenticate(Credentials{Remote: loop})
	if r, _ := ReasonOf(err); !errors.Is(err, ErrAccessRefused) || r != ReasonNoAnonymous {
		t.Fatalf("err %v", err)
	}
}

func TestOpenModeLoopbackOnly(t *testing.T) {
	a, err := New(Options{})
	if err != nil {
		t.Fatal(err)
	}
	if u, err := a.Authenticate(Credentials{Remote: loop}); err != nil || u != OpenUser {
		t.Fatalf("loopback: %q %v", u, err)
	}
	ws := stringAddr("[::1]:4000")
	if _, err := a.Authenticate(Credentials{Remote: ws}); err != nil {
		t.Fatalf("ipv6 loopback as a string address: %v", err)
	}
	_, err = a.Authenticate(Credentials{Login: "x", Passcode: "y", Remote: remote})
	if r, _ := ReasonOf(err); r != ReasonNotLoopback {
		t.Fatalf("remote peer: %v", err)
	}
	if a.Allowed(OpenUser, "default", dest.PatternQueues, "x") != All {
		t.Fatal("open mode grants everything")
	}
}

type stringAddr string

func (s stringAddr) Network() string { return "websocket" }
func (s stringAddr) String() string  { return string(s) }

func TestAuthenticateCertificate(t *testing.T) {
	admin, err := HashPassword([]byte("admin-pw"))
	if err != nil {
		t.Fatal(err)
	}
	f := &File{Users: map[string]*User{
		"admin": {Password: admin, Roles: []string{"admins"}},
		"app1":  {Roles: []string{"apps"}, Certificates: []string{"cn:app1.example.com"}},
		"svc":   {Roles: []string{"apps"}, Certificates: []string{"dns:svc.example.com", "email:svc@example.com"}},
		"ops":   {Roles: []string{"apps"}, Certificates: []string{"dn:CN=ops,O=Example"}},
	}}
	path := filepath.Join(t.TempDir(), "users.yml")
	if err := f.Save(path); err != nil {
		t.Fatal(err)
	}
	a, err := New(Options{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	cert := func(cn string, org []string, dns, email []string) []*x509.Certificate {
		return []*x509.Certificate{{Subject: pkix.Name{CommonName: cn, Organization: org}, DNSNames: dns, EmailAddresses: email}}
	}
	for _, tc := range []struct {
		name  string
		creds Credentials
		want  string // "" refused
	}{
		{"typed CN", Credentials{Certificates: cert("app1.example.com", nil, nil, nil)}, "app1"},
		{"typed DNS SAN", Credentials{Certificates: cert("x", nil, []string{"SVC.example.com"}, nil)}, "svc"},
		{"typed e-mail SAN", Credentials{Certificates: cert("x", nil, nil, []string{"svc@example.com"})}, "svc"},
		{"typed DN", Credentials{Certificates: cert("ops", []string{"Example"}, nil, nil)}, "ops"},
		// Spoofing: a CN or SAN equal to a user name is nobody.
		{"CN equal to a user name", Credentials{Certificates: cert("admin", nil, nil, nil)}, ""},
		{"e-mail SAN equal to a user name", Credentials{Certificates: cert("someone.example.com", nil, nil, []string{"admin"})}, ""},
		{"DNS SAN equal to a user name", Credentials{Certificates: cert("someone.example.com", nil, []string{"admin"}, nil)}, ""},
		{"the CN of a DN mapping alone", Credentials{Certificates: cert("ops", nil, nil, nil)}, ""},
		{"a CN value as a DNS SAN", Credentials{Certificates: cert("x", nil, []string{"app1.example.com"}, nil)}, ""},
		{"login naming another user", Credentials{Login: "admin", Passcode: "admin-pw", Certificates: cert("app1.example.com", nil, nil, nil)}, ""},
		// An unmapped certificate authenticated the channel only: the password decides.
		{"unmapped certificate with a password", Credentials{Login: "admin", Passcode: "admin-pw", Certificates: cert("someone", nil, nil, []string{"admin"})}, "admin"},
		{"unmapped certificate with a wrong password", Credentials{Login: "admin", Passcode: "nope", Certificates: cert("someone", nil, nil, []string{"admin"})}, ""},
	} {
		u, err := a.Authenticate(tc.creds)
		if u != tc.want || (tc.want == "") != (err != nil) {
			t.Errorf("%s: user %q err %v, want %q", tc.name, u, err, tc.want)
		}
	}
}

func TestCertificateIdentitiesMustBeTyped(t *testing.T) {
	for _, bad := range []string{"app1.example.com", "cn:", "san:x", "dns:"} {
		_, err := Parse([]byte("users:\n  app1: {certificates: [\"" + bad + "\"]}\n"))
		if !errors.Is(err, ErrInvalidFile) {
			t.Errorf("certificate identity %q accepted", bad)
		}
	}
	_, err := Parse([]byte("users:\n  a: {certificates: [\"cn:x\"]}\n  b: {certificates: [\"CN:x\"]}\n"))
	if !errors.Is(err, ErrInvalidFile) {
		t.Error("one identity mapped to two users accepted")
	}
}

func TestAllowedMostSpecificWins(t *testing.T) {
	a := newTestAuthority(t)
	cases := []struct {
		user, group string
		pattern     dest.Pattern
		channel     string
		want        Permission
	}{
		{"admin", "default", dest.PatternQueues, "anything.at.all", All},
		{"app", "default", dest.PatternQueues, "orders.eu", Send | Create},
		{"app", "default", dest.PatternQueues, "orders", Send | Create}, // # is zero or more words
		{"worker", "default", dest.PatternQueues, "orders.eu.x", Consume},
		{"app", "default", dest.PatternEvents, "orders.eu", 0},             // the queues rule does not cover events
		{"admin", "default", dest.PatternQueues, "orders.eu", 0},           // most specific match decides, not the union
		{"admin", "default", dest.PatternQueues, "orders.secret", Consume}, // literal beats #
		{"worker", "default", dest.PatternQueues, "orders.secret", 0},
		{"bill", "billing", dest.PatternQueues, "x", Consume},
		{"bill", "default", dest.PatternQueues, "x", 0},
		{"app", "default", dest.PatternEvents, "prices.eu", Consume},
		{"app", "default", dest.PatternEvents, "prices.eu.x", 0},
		{"ghost", "default", dest.PatternEvents, "prices.eu", 0},
	}
	for _, c := range cases {
		for range 2 { // the second time from the cache
			if got := a.Allowed(c.user, c.group, c.pattern, c.channel); got != c.want {
				t.Errorf("%s on %s/%s/%s: %v, want %v", c.user, c.group, c.pattern, c.channel, got, c.want)
			}
		}
	}
	if !a.Has("admin", Manage) || a.Has("app", Manage) || !a.Has("app", Send) {
		t.Error("Has")
	}
}

func TestMatchChannel(t *testing.T) {
	cases := []struct {
		m, ch string
		want  bool
	}{
		{"#", "a", true}, {"#", "a.b.c", true},
		{"a.#", "a", true}, {"a.#", "a.b.c", true}, {"a.#", "b", false},
		{"#.c", "a.b.c", true}, {"#.c", "c", true}, {"#.c", "a.b", false},
		{"a.*", "a.b", true}, {"a.*", "a", false}, {"a.*", "a.b.c", false},
		{"a.*.c", "a.b.c", true}, {"a.*.c", "a.b.d", false},
		{"a.b", "a.b", true}, {"a.b", "a.bc", false}, {"a.b", "a", false},
		{"a.#.d", "a.d", true}, {"a.#.d", "a.b.c.d", true}, {"a.#.d", "a.b.c", false},
	}
	for _, c := range cases {
		if got := matchChannel(strings.Split(c.m, "."), c.ch); got != c.want {
			t.Errorf("match %q %q = %v, want %v", c.m, c.ch, got, c.want)
		}
	}
}

func TestReloadSwapsSnapshot(t *testing.T) {
	a := newTestAuthority(t)
	if a.Allowed("app", "default", dest.PatternQueues, "orders.eu")&Send == 0 {
		t.Fatal("precondition")
	}
	f, err := Load(a.Path())
	if err != nil {
		t.Fatal(err)
	}
	if err := f.DeleteUser("app"); err != nil {
		t.Fatal(err)
	}
	if err := f.Save(a.Path()); err != nil {
		t.Fatal(err)
	}
	if err := a.Reload(); err != nil {
		t.Fatal(err)
	}
	if a.Allowed("app", "default", dest.PatternQueues, "orders.eu") != 0 {
		t.Fatal("a removed user keeps permissions after reload")
	}
	if _, err := a.Authenticate(Credentials{Login: "app", Passcode: "apppw"}); err == nil {
		t.Fatal("a removed user still logs in")
	}
	// A broken file leaves the previous snapshot in force.
	if err := os.WriteFile(a.Path(), []byte("users: [\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := a.Reload(); err == nil {
		t.Fatal("reload of a broken file succeeded")
	}
	if a.Allowed("admin", "default", dest.PatternQueues, "x") != All {
		t.Fatal("failed reload dropped the previous snapshot")
	}
}

func TestParseRejects(t *testing.T) {
	bad := []string{
		"users:\n  bob: {password: plain}\n",
		"users:\n  bob: {}\nanonymous: alice\n",
		"permissions:\n  - {pattern: topics}\n",
		"permissions:\n  - {channel: \"a..b\"}\n",
		"nonsense: 1\n",
	}
	for _, b := range bad {
		if _, err := Parse([]byte(b)); !errors.Is(err, ErrInvalidFile) {
			t.Errorf("%q: err %v, want ErrInvalidFile", b, err)
		}
	}
}

func TestFileNeverHoldsPlainPasswords(t *testing.T) {
	f := &File{}
	if err := f.AddUser("u", []byte("s3cret-pass"), []string{"r"}); err != nil {
		t.Fatal(err)
	}
	if cost, _ := bcrypt.Cost([]byte(f.Users["u"].Password)); cost != BcryptCost {
		t.Fatalf("bcrypt cost %d, want %d", cost, BcryptCost)
	}
	path := filepath.Join(t.TempDir(), "users.yml")
	if err := f.Save(path); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(data), "s3cret-pass") || !strings.Contains(string(data), "$2a$") {
		t.Fatalf("users file:\n%s", data)
	}
	if st, _ := os.Stat(path); st.Mode().Perm() != 0o600 {
		t.Fatalf("mode %v, want 0600", st.Mode().Perm())
	}
}

// BenchmarkAllowedCached is the per-frame cost of an authorization check once decided.
func BenchmarkAllowedCached(b *testing.B) {
	a := newTestAuthority(b)
	a.Allowed("app", "default", dest.PatternQueues, "orders.eu.retail")
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if a.Allowed("app", "default", dest.PatternQueues, "orders.eu.retail")&Send == 0 {
			b.Fatal("denied")
		}
	}
}

// BenchmarkAllowedUncached is the cost of a decision without the cache (the rule walk).
func BenchmarkAllowedUncached(b *testing.B) {
	a := newTestAuthority(b)
	s := a.snap.Load()
	b.ReportAllocs()
	for b.Loop() {
		if s.decide("app", "default", dest.PatternQueues, "orders.eu.retail")&Send == 0 {
			b.Fatal("denied")
		}
	}
}

// bcrypt ignores bytes after the 72nd: a passcode longer than that never logs in, even when
// its first 72 bytes are the password.
func TestPasscodeOver72BytesRefused(t *testing.T) {
	pw := strings.Repeat("p", MaxPasswordBytes)
	h, err := bcrypt.GenerateFromPassword([]byte(pw), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	f := &File{Users: map[string]*User{"u": {Password: string(h), Roles: []string{"r"}}}}
	path := filepath.Join(t.TempDir(), "users.yml")
	if err := f.Save(path); err != nil {
		t.Fatal(err)
	}
	a, err := New(Options{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Authenticate(Credentials{Login: "u", Passcode: pw}); err != nil {
		t.Fatalf("the 72-byte password: %v", err)
	}
	if _, err := a.Authenticate(Credentials{Login: "u", Passcode: pw + "anything"}); err == nil {
		t.Fatal("a passcode over 72 bytes logged in")
	}
	if _, err := HashPassword([]byte(pw + "x")); err == nil {
		t.Fatal("a 73-byte password hashed")
	}
}
