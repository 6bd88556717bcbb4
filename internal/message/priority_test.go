package message

import (
	"testing"

	"github.com/titan-broker/titan/internal/frame"
)

func TestParsePriority(t *testing.T) {
	for _, c := range []struct {
		in   string
		want uint8
		ok   bool
	}{
		{"0", 0, true}, {"4", 4, true}, {"9", 9, true}, {"09", 9, true},
		{"10", 0, false}, {"-1", 0, false}, {"", 0, false}, {"high", 0, false}, {" 5", 0, false}, {"5.0", 0, false},
	} {
		got, ok := ParsePriority(c.in)
		if got != c.want || ok != c.ok {
			t.Errorf("ParsePriority(%q) = %d, %v; want %d, %v", c.in, got, ok, c.want, c.ok)
		}
	}
}

func TestMessagePriority(t *testing.T) {
	if p := (&Message{}).Priority(); p != DefaultPriority {
		t.Errorf("no header: %d, want %d", p, DefaultPriority)
	}
	m := &Message{Headers: []frame.Header{{Key: "priority", Value: "8"}}}
	if p := m.Priority(); p != 8 {
		t.Errorf("priority:8 gives %d", p)
	}
	m = &Message{Headers: []frame.Header{{Key: "priority", Value: "x"}}}
	if p := m.Priority(); p != DefaultPriority {
		t.Errorf("priority:x gives %d, want the default", p)
	}
}
