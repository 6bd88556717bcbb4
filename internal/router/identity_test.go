package router

import (
	"strings"
	"testing"
	"unsafe"

	"github.com/titan-broker/titan/internal/frame"
)

// within reports whether s's bytes lie inside b's.
func within(s string, b []byte) bool {
	if len(s) == 0 || len(b) == 0 {
		return false
	}
	p, lo := uintptr(unsafe.Pointer(unsafe.StringData(s))), uintptr(unsafe.Pointer(&b[0]))
	return p >= lo && p < lo+uintptr(cap(b))
}

func bytesOf(s string) []byte { return unsafe.Slice(unsafe.StringData(s), len(s)) }

// TestPublishedIdentityIsDetached checks that the Identity a SEND hands to its pattern (which
// may keep it as a map key for as long as the destination lives) points neither into the
// read buffer nor into the message's own memory, whose body it would keep alive; and that
// a producer's repeated SENDs to one destination share one copy of its names.
func TestPublishedIdentityIsDetached(t *testing.T) {
	r, e, c, _ := newTest(Options{})
	for _, d := range []string{"/queue/orders/eu", "/queue/orders.eu", "/topic/prices"} {
		for range 3 {
			f := fr(frame.CmdSend, strings.Repeat("b", 1000), "destination", d, "group", "g-1")
			r.Handle(c, f)
			id, m := e.published[len(e.published)-1], e.msgs[len(e.msgs)-1]
			tail, _ := m.Shared(frame.V12)
			dh, _ := f.Get("destination")
			gh, _ := f.Get("group")
			for _, s := range []string{id.Channel, id.Group, m.Group} {
				if within(s, tail) || within(s, f.Body) || within(s, bytesOf(dh)) || within(s, bytesOf(gh)) {
					t.Fatalf("SEND to %s: %q points into the message or the frame", d, s)
				}
			}
		}
		n := len(e.published)
		a, b := e.published[n-1], e.published[n-2]
		if unsafe.StringData(a.Channel) != unsafe.StringData(b.Channel) || unsafe.StringData(a.Group) != unsafe.StringData(b.Group) {
			t.Fatalf("SENDs to %s do not share the connection's copy of the names", d)
		}
	}
}
