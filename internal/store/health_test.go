package store

import (
	"errors"
	"fmt"
	"os"
	"syscall"
	"testing"
)

func TestReasonAndDescribe(t *testing.T) {
	full := fmt.Errorf("pebblestore: append: %w", &os.PathError{Op: "write", Path: "/data/000004.log", Err: syscall.ENOSPC})
	ro := &UnavailableError{Cause: &os.PathError{Op: "open", Path: "/data/x", Err: syscall.EROFS}}
	corrupt := fmt.Errorf("%w: pebblestore: WAL damaged", ErrCorrupt)
	for _, tc := range []struct {
		err              error
		reason, describe string
	}{
		{nil, "", "message not stored"},
		{&UnavailableError{Cause: full}, "no space left on device", "store unavailable: no space left on device"},
		{fmt.Errorf("durable: persist q: %w", ro), "read-only file system", "store unavailable: read-only file system"},
		{corrupt, "corrupt data", "store unavailable: corrupt data"},
		{errors.New("something else"), "something else", "message not stored"},
	} {
		if got := Reason(tc.err); got != tc.reason {
			t.Errorf("Reason(%v) = %q, want %q", tc.err, got, tc.reason)
		}
		if got := Describe(tc.err); got != tc.describe {
			t.Errorf("Describe(%v) = %q, want %q", tc.err, got, tc.describe)
		}
	}
	u := &UnavailableError{Cause: full}
	if u.Error() != "store unavailable: no space left on device" || !errors.Is(u, ErrUnavailable) || !errors.Is(u, syscall.ENOSPC) {
		t.Errorf("UnavailableError %q does not match its sentinel and cause", u)
	}
	for _, s := range []State{StateOK, StateDegraded, StateDown, State(9)} {
		if s.String() == "" {
			t.Errorf("State(%d) has no name", s)
		}
	}
}
