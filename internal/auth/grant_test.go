package auth

import (
	"errors"
	"slices"
	"testing"

	"github.com/titan-broker/titan/internal/dest"
)

func TestParseGrant(t *testing.T) {
	for in, want := range map[string]Grant{
		"#:all":                        {Channel: "#", Perms: All},
		"/queue/orders.#:send,consume": {Pattern: "queues", Channel: "orders.#", Perms: Send | Consume},
		"/topic/prices/*:consume":      {Pattern: "events", Channel: "prices.*", Perms: Consume},
		"market@/queues/#:browse":      {Group: "market", Pattern: "queues", Channel: "#", Perms: Browse},
	} {
		g, err := ParseGrant(in)
		if err != nil || g != want {
			t.Errorf("ParseGrant(%q) = %+v, %v; want %+v", in, g, err, want)
		}
	}
	for _, bad := range []string{"/queue/orders", "/queue/a:fly", "nowhere/x:send", "/queue/a..b:send", "bad group@/queue/a:send"} {
		if _, err := ParseGrant(bad); !errors.Is(err, ErrInvalidFile) {
			t.Errorf("ParseGrant(%q) accepted", bad)
		}
	}
}

// A narrower rule made by a grant keeps every right the rule that covered it gave, so the
// grant takes nothing from anyone (the README's old example locked admins out of orders.#).
func TestGrantRoleKeepsOthersRights(t *testing.T) {
	f := &File{Users: map[string]*User{"admin": {Roles: []string{"admins"}}, "app": {Roles: []string{"apps"}}, "guest": {}}}
	mustGrant := func(role, s string) {
		g, err := ParseGrant(s)
		if err != nil {
			t.Fatal(err)
		}
		if err := f.GrantRole(role, g); err != nil {
			t.Fatal(err)
		}
	}
	mustGrant("admins", "#:all")
	mustGrant("apps", "/topic/prices/*:consume")
	mustGrant("apps", "/queue/orders.#:send,consume")
	mustGrant("guests", "/topic/prices.#:consume") // broader than prices.*: inherits from "#" only
	s := newSnapshot(f)
	if p := s.decide("admin", "default", dest.PatternQueues, "orders.eu"); p != All {
		t.Fatalf("admin on orders.eu: %v", p)
	}
	if p := s.decide("app", "default", dest.PatternQueues, "orders.eu"); p != Send|Consume {
		t.Fatalf("app on orders.eu: %v", p)
	}
	if p := s.decide("app", "default", dest.PatternEvents, "prices.eur.spot"); p != 0 {
		t.Fatalf("app on prices.eur.spot (covered by prices.# only): %v", p)
	}
	if got := f.Unpermitted(); !slices.Equal(got, []string{"guest"}) {
		t.Fatalf("unpermitted %v", got)
	}
	g, _ := ParseGrant("/queue/orders.#:send,consume")
	if !f.RevokeRole("apps", g) {
		t.Fatal("revoke found no rule")
	}
	if p := newSnapshot(f).decide("app", "default", dest.PatternQueues, "orders.eu"); p != 0 {
		t.Fatalf("app on orders.eu after revoke: %v", p)
	}
}

func TestConnectionLimit(t *testing.T) {
	data := []byte(`users:
  a: {roles: [apps]}
  b: {roles: [apps, admins]}
  c: {roles: [apps, ops]}
  d: {roles: [apps]}
quotas:
  roles: {apps: {connections: 5}, ops: {connections: 9}}
  users: {d: {connections: 1}}
`)
	f, err := Parse(data)
	if err != nil {
		t.Fatal(err)
	}
	s := newSnapshot(f)
	a := &Authority{}
	a.snap.Store(s)
	for user, want := range map[string]int{"a": 5, "b": 0, "c": 9, "d": 1, "nobody": 0} {
		if got := a.ConnectionLimit(user); got != want {
			t.Errorf("ConnectionLimit(%s) = %d, want %d", user, got, want)
		}
	}
	if _, err := Parse([]byte("quotas: {users: {x: {connections: -1}}}\n")); !errors.Is(err, ErrInvalidFile) {
		t.Error("a negative quota accepted")
	}
}

// TestGrantStringRoundTrip: String renders a grant as ParseGrant reads it.
func TestGrantStringRoundTrip(t *testing.T) {
	for _, s := range []string{"/queue/orders.#:send,consume", "market@/topic/prices/*:consume", "#:all", "/events-store/audit:browse"} {
		g, err := ParseGrant(s)
		if err != nil {
			t.Fatal(err)
		}
		back, err := ParseGrant(g.String())
		if err != nil || back != g {
			t.Errorf("%q: String %q reads back as %+v (%v), want %+v", s, g.String(), back, err, g)
		}
	}
}
