package selector

import (
	"errors"
	"testing"
)

// FuzzCompile checks that Compile never panics, that every refusal is an *Error with a
// position inside the input (or at its end), and that what compiles evaluates without
// panicking or allocating.
func FuzzCompile(f *testing.F) {
	for _, c := range conformance {
		f.Add(c.sel)
	}
	f.Fuzz(func(t *testing.T, src string) {
		s, err := Compile(src)
		if err != nil {
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("Compile(%q) = %v, not an *Error", src, err)
			}
			if e.Pos < 0 || e.Pos > len(src) && !errors.Is(err, ErrTooLong) {
				t.Fatalf("Compile(%q): position %d outside the input", src, e.Pos)
			}
			return
		}
		s.Matches(sample)
		if n := testing.AllocsPerRun(3, func() { s.Matches(sample) }); n != 0 {
			t.Fatalf("%q: %v allocations per Matches", src, n)
		}
	})
}
