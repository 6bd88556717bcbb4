package frame

import (
	"bytes"
	"errors"
	"io"
	"strconv"
	"strings"
	"testing"
)

// TestLargeFrameBudget: a frame over 64 KiB reserves its read buffer from the shared budget,
// gives it back once read (the next frame) or when the parser is closed mid-frame, and a
// frame that would overdraw the budget is a fatal ErrLargeFrameBudget.
func TestLargeFrameBudget(t *testing.T) {
	const body = 200 << 10
	send := "SEND\ndestination:/queue/a\ncontent-length:" + strconv.Itoa(body) + "\n\n" + strings.Repeat("x", body) + "\x00"
	b := NewBudget(1 << 20)
	lim := DefaultLimits()
	lim.LargeFrames = b

	p := NewParser(strings.NewReader(send+send), lim)
	if _, err := p.ReadFrame(); err != nil {
		t.Fatal(err)
	}
	if b.Used() < body {
		t.Fatalf("budget used %d while a %d-byte frame is buffered", b.Used(), body)
	}
	if _, err := p.ReadFrame(); err != nil {
		t.Fatal(err)
	}
	if _, err := p.ReadFrame(); !errors.Is(err, io.EOF) {
		t.Fatalf("after two frames: %v", err)
	}
	if b.Used() != 0 {
		t.Fatalf("budget used %d after the frames were read", b.Used())
	}

	// Unfinished frames hold their share until Close.
	var open []*Parser
	var refused error
	for range 10 {
		q := NewParser(bytes.NewReader([]byte(send[:len(send)-100])), lim)
		_, err := q.ReadFrame()
		if errors.Is(err, ErrLargeFrameBudget) {
			refused = err
			break
		}
		open = append(open, q)
	}
	if refused == nil {
		t.Fatalf("no frame refused with %d bytes reserved of %d", b.Used(), b.Max())
	}
	if pe, ok := IsProtocolError(refused); !ok || !pe.Fatal || pe.Reason != "large frame memory limit reached" {
		t.Fatalf("refusal %#v", refused)
	}
	if len(open) == 0 || b.Used() > b.Max() {
		t.Fatalf("%d unfinished frames, %d bytes used of %d", len(open), b.Used(), b.Max())
	}
	for _, q := range open {
		q.Close()
		q.Close() // idempotent
	}
	if b.Used() != 0 {
		t.Fatalf("budget used %d after every parser closed", b.Used())
	}
	if NewBudget(0) != nil || NewBudget(-1) != nil {
		t.Fatal("a budget of 0 or -1 bytes is no bound (nil)")
	}
}
