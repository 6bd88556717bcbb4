package admission

import (
	"errors"
	"testing"
	"time"
)

// The back-off doubles per failure from Base up to Max; a clean address is never held, even
// for a user whose password is being guessed elsewhere; parallel attempts from one address
// queue behind each other and past Max are refused unchecked.
func TestLoginThrottleBacksOffPerAddressAndUser(t *testing.T) {
	th := NewLoginThrottle(ThrottleOptions{Base: 10 * time.Millisecond, Max: time.Second})
	for n, want := range map[int]time.Duration{1: 10 * time.Millisecond, 2: 20 * time.Millisecond, 7: 640 * time.Millisecond, 8: time.Second, 50: time.Second} {
		if got := th.delay(n); got != want {
			t.Errorf("delay(%d) = %v, want %v", n, got, want)
		}
	}
	if w, err := th.Admit("10.0.0.1:5000", "alice"); w != 0 || err != nil {
		t.Fatalf("first attempt: %v %v", w, err)
	}
	for range 6 {
		th.Fail("10.0.0.1:5000", "alice")
	}
	w, err := th.Admit("10.0.0.1:6000", "bob") // another port of the same host
	if err != nil || w < 300*time.Millisecond {
		t.Fatalf("after 6 failures: wait %v, err %v; want about 320ms", w, err)
	}
	if w, err := th.Admit("10.0.0.2:1", "alice"); w != 0 || err != nil {
		t.Fatalf("alice from a clean address: wait %v, err %v; want none", w, err)
	}
	// Queued attempts reserve one slot each; past Max they are refused.
	refused := false
	for range 10 {
		if _, err := th.Admit("10.0.0.1:7", "alice"); errors.Is(err, ErrThrottled) {
			refused = true
			break
		}
	}
	if !refused || th.Refused.Load() == 0 {
		t.Fatal("parallel attempts from a failing address were never refused")
	}
	th.Succeed("10.0.0.3:1", "alice")
	if _, ok := th.users["alice"]; ok {
		t.Fatal("a successful login kept the user's failures")
	}
}

// Connections are bounded in total and per address; release gives the slot back once.
func TestConnsBoundTotalAndPerAddress(t *testing.T) {
	c := NewConns(3, 2)
	r1, err := c.Acquire("10.0.0.1:1")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Acquire("10.0.0.1:2"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Acquire("10.0.0.1:3"); !errors.Is(err, ErrAddressLimit) {
		t.Fatalf("third from one address: %v", err)
	}
	if _, err := c.Acquire("10.0.0.2:1"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Acquire("10.0.0.3:1"); !errors.Is(err, ErrTotalLimit) {
		t.Fatalf("fourth in total: %v", err)
	}
	r1()
	r1()
	if n := c.Count(); n != 2 {
		t.Fatalf("count %d after one release (called twice), want 2", n)
	}
	if _, err := c.Acquire("10.0.0.1:4"); err != nil {
		t.Fatal(err)
	}
}
