package selector

import "testing"

// BenchmarkMatches evaluates typical selectors against a message with 18 headers.
func BenchmarkMatches(b *testing.B) {
	for _, c := range []struct{ name, sel string }{
		{"eq", "color = 'red'"},
		{"numeric", "size > 5 AND price < 20.0"},
		{"like", "color LIKE 'r%' AND word NOT LIKE '%z%'"},
		{"in8", "color IN ('a','b','c','d','e','f','g','red')"},
		{"mixed", "(JMSPriority > 4 OR type = 'order') AND size BETWEEN 1 AND 100 AND missing IS NULL"},
	} {
		s, err := Compile(c.sel)
		if err != nil {
			b.Fatal(err)
		}
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if !s.Matches(sample) {
					b.Fatal("no match")
				}
			}
		})
	}
}

// BenchmarkCompile measures compiling a selector, once per SUBSCRIBE.
func BenchmarkCompile(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Compile("(JMSPriority > 4 OR type = 'order') AND size BETWEEN 1 AND 100 AND color LIKE 'r%'"); err != nil {
			b.Fatal(err)
		}
	}
}
