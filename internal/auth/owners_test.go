package auth

import (
	"errors"
	"strings"
	"testing"

	"github.com/titan-broker/titan/internal/dest"
	"github.com/titan-broker/titan/internal/frame"
)

// memMeta is an in-memory store metadata port.
type memMeta map[string][]byte

func (m memMeta) SetMeta(k string, v []byte) error { m[k] = append([]byte(nil), v...); return nil }
func (m memMeta) Meta(k string) ([]byte, bool, error) {
	v, ok := m[k]
	return v, ok, nil
}

func quotaAuthority(t *testing.T) *Authority {
	t.Helper()
	f, err := Parse([]byte(`users:
  a: {roles: [apps]}
  b: {roles: [apps]}
  r: {roles: [readers]}
permissions:
  - {channel: "#", send: [apps, readers], consume: [apps, readers], create: [apps]}
quotas:
  roles: {apps: {durable-subscriptions: 2, destinations: 2}}
`))
	if err != nil {
		t.Fatal(err)
	}
	a := &Authority{}
	a.snap.Store(newSnapshot(f))
	return a
}

func TestLimitPerQuota(t *testing.T) {
	a := quotaAuthority(t)
	if a.Limit("a", QuotaDurableSubscriptions) != 2 || a.Limit("a", QuotaDestinations) != 2 || a.Limit("a", QuotaConnections) != 0 || a.Limit("r", QuotaDestinations) != 0 {
		t.Fatal("limits")
	}
	if _, err := Parse([]byte("quotas: {roles: {x: {durable-subscriptions: -1}}}\n")); !errors.Is(err, ErrInvalidFile) {
		t.Error("a negative durable-subscriptions quota accepted")
	}
}

// TestOwnersClaim: ownership, create, quota, entries that live as long as their resource,
// and the ledger read back from the store (a restart).
func TestOwnersClaim(t *testing.T) {
	meta := memMeta{}
	live := map[string]bool{}
	exists := func(o Owned) bool { return live[o.Kind+"/"+o.Name] }
	l := NewOwners(func() Meta { return meta }, exists)
	d := func(name, user string) Owned {
		return Owned{Kind: KindLogDurable, Identity: dest.Identity{Group: "default", Pattern: dest.PatternEventsStore, Channel: "audit"}, Name: name, User: user}
	}
	if _, err := l.Claim(d("x", "a"), false, 0); !errors.Is(err, ErrCreateRefused) {
		t.Fatalf("create refused: %v", err)
	}
	if made, err := l.Claim(d("x", "a"), true, 2); !made || err != nil {
		t.Fatalf("claim: %v %v", made, err)
	}
	// Not made yet (the SUBSCRIBE is on its way): still a's.
	if _, err := l.Claim(d("x", "b"), true, 0); !errors.Is(err, ErrOwnedByOther) {
		t.Fatalf("pending takeover: %v", err)
	}
	live["log-durable/x"] = true
	if _, err := l.Claim(d("x", "b"), true, 0); !errors.Is(err, ErrOwnedByOther) {
		t.Fatalf("takeover: %v", err)
	}
	if made, err := l.Claim(d("x", "a"), false, 2); made || err != nil {
		t.Fatalf("resume (no create needed): %v %v", made, err)
	}
	live["log-durable/y"] = true
	if _, err := l.Claim(d("y", "a"), true, 2); err != nil { // an unowned one is adopted
		t.Fatal(err)
	}
	if _, err := l.Claim(d("z", "a"), true, 2); !errors.Is(err, ErrQuotaExceeded) {
		t.Fatalf("quota: %v", err)
	}
	// After a restart the ledger is read back.
	l2 := NewOwners(func() Meta { return meta }, exists)
	if _, err := l2.Claim(d("x", "b"), true, 0); !errors.Is(err, ErrOwnedByOther) {
		t.Fatalf("after restart: %v", err)
	}
	if n := l2.Count("a", false); n != 2 {
		t.Fatalf("count after restart %d", n)
	}
	// Deleted: the name is free, the quota has room.
	delete(live, "log-durable/x")
	if made, err := l2.Claim(d("x", "b"), true, 0); !made || err != nil {
		t.Fatalf("after delete: %v %v", made, err)
	}
	if _, err := l2.Claim(d("z", "a"), true, 2); err != nil {
		t.Fatalf("room after delete: %v", err)
	}
}

// TestStageOwnersAndQuotas: the stage refuses another user's durable name, a durable
// subscription without create and SENDs over the destinations quota.
func TestStageOwnersAndQuotas(t *testing.T) {
	a := quotaAuthority(t)
	made := map[string]bool{}
	exists := func(id dest.Identity) bool { return made[id.Channel] }
	meta := memMeta{}
	s := NewStage(a, exists, nil).WithOwners(NewOwners(func() Meta { return meta }, func(o Owned) bool {
		if o.Kind == KindDestination {
			return made[o.Identity.Channel]
		}
		return made[o.Kind+"/"+o.Name]
	}))
	sub := func(user, raw string, hdrs ...frame.Header) *frame.ProtocolError {
		c := stageContext(user, frame.CmdSubscribe, raw, "")
		c.Frame.Headers = hdrs
		c.Conn.ClientID = "cid"
		s.Apply(c)
		return c.Err
	}
	if err := sub("r", "/events-store/audit", frame.Header{Key: "durable-name", Value: "d1"}); err == nil || err.Reason != "access refused" || !strings.Contains(err.Detail, "create") {
		t.Fatalf("durable without create: %+v", err)
	}
	if err := sub("a", "/events-store/audit", frame.Header{Key: "durable-name", Value: "d1"}); err != nil {
		t.Fatal(err)
	}
	made["log-durable/d1"] = true
	if err := sub("b", "/events-store/audit", frame.Header{Key: "durable-name", Value: "d1"}); err == nil || err.Reason != "access refused" || !strings.Contains(err.Detail, "belongs to another user") {
		t.Fatalf("takeover: %+v", err)
	}
	for _, h := range []frame.Header{{Key: "durable", Value: "true"}, {Key: "activemq.subscriptionName", Value: "t1"}, {Key: "durable-subscription-name", Value: "t1"}} {
		hs := []frame.Header{h, {Key: "id", Value: "t1"}}
		if err := sub("b", "/topic/prices", hs...); err != nil {
			t.Fatalf("%s: %v", h.Key, err)
		}
		made["topic-durable/t1"] = true
		if err := sub("a", "/topic/prices", hs...); err == nil || !strings.Contains(err.Detail, "belongs to another user") {
			t.Fatalf("%s takeover: %+v", h.Key, err)
		}
		for user, ok := range map[string]bool{"a": false, "b": true} {
			c := stageContext(user, frame.CmdUnsubscribe, "/topic/prices", "")
			c.Frame.Headers = hs
			c.Conn.ClientID = "cid"
			s.Apply(c)
			if (c.Err == nil) != ok {
				t.Fatalf("%s UNSUBSCRIBE by %s: %+v", h.Key, user, c.Err)
			}
		}
		delete(made, "topic-durable/t1")
	}
	if err := sub("a", "/events-store/audit", frame.Header{Key: "durable-name", Value: "d2"}); err != nil {
		t.Fatal(err)
	}
	made["log-durable/d2"] = true
	if err := sub("a", "/events-store/audit", frame.Header{Key: "durable-name", Value: "d3"}); err == nil || err.Reason != "quota exceeded" || !strings.Contains(err.Detail, QuotaDurableSubscriptions) {
		t.Fatalf("durable quota: %+v", err)
	}
	send := func(user, raw string) *frame.ProtocolError {
		c := stageContext(user, frame.CmdSend, raw, "")
		s.Apply(c)
		if c.Err == nil {
			made[c.Identity.Channel] = true
		}
		return c.Err
	}
	for _, q := range []string{"/queue/q1", "/events-store/l1", "/queue/q1"} {
		if err := send("a", q); err != nil {
			t.Fatal(q, err)
		}
	}
	if err := send("a", "/queue/q3"); err == nil || err.Reason != "quota exceeded" || !strings.Contains(err.Detail, QuotaDestinations) {
		t.Fatalf("destinations quota: %+v", err)
	}
	if s.DestinationQuotaRefused.Load() != 1 || s.DurableQuotaRefused.Load() != 1 {
		t.Fatal("counters")
	}
	delete(made, "q1")
	if err := send("a", "/queue/q3"); err != nil {
		t.Fatalf("room after a deletion: %v", err)
	}
}
