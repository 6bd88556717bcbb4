package testport

import (
	"net"
	"strconv"
	"testing"
)

// Free's ports lie below the ephemeral range, are distinct, and can be listened on.
func TestFreeIsBelowTheEphemeralRangeAndDistinct(t *testing.T) {
	lo, err := ephemeralLow()
	if err != nil {
		t.Fatal(err)
	}
	seen := map[int]bool{}
	for range 200 {
		p := Free(t)
		if p < lowest || p >= lo {
			t.Fatalf("port %d outside [%d, %d)", p, lowest, lo)
		}
		if seen[p] {
			t.Fatalf("port %d handed out twice", p)
		}
		seen[p] = true
	}
	p := Free(t)
	l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
	if err != nil {
		t.Fatalf("listen on handed-out port %d: %v", p, err)
	}
	l.Close()
}

// A port some listener holds is never handed out.
func TestFreeSkipsPortsInUse(t *testing.T) {
	lo, err := ephemeralLow()
	if err != nil {
		t.Fatal(err)
	}
	// Hold the first 200 ports of Free's range; 500 draws would hit that window about four
	// times if Free did not check.
	var held []net.Listener
	busy := map[int]bool{}
	for p := lowest; p < lowest+200 && p < lo; p++ {
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
		if err != nil {
			continue
		}
		held = append(held, l)
		busy[p] = true
	}
	defer func() {
		for _, l := range held {
			l.Close()
		}
	}()
	for range 500 {
		if p := Free(t); busy[p] {
			t.Fatalf("Free returned port %d, which a listener holds", p)
		}
	}
}
