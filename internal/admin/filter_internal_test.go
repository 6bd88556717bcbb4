package admin

import "testing"

func TestNameFilter(t *testing.T) {
	cases := []struct {
		filter, name string
		want         bool
	}{
		{"", "/queue/a", true},
		{"ORD", "/queue/orders", true}, // substring, ignoring case
		{"ord", "/queue/ORDERS", true},
		{"ord", "/queue/jobs", false},
		{"/queue/*", "/queue/a/b", true}, // * crosses /
		{"/queue/*", "/topic/a", false},
		{"*ders", "/queue/orders", true},
		{"*ders", "/queue/orders.x", false}, // a glob is anchored at both ends
		{"/queue/?", "/queue/é", true},      // ? is one character, not one byte
		{"/queue/??", "/queue/é", false},
		{"*é*", "/queue/CAFÉ", true},
		{"a*b*c", "axxbyyc", true},
		{"a*b*c", "axxbyy", false},
		{"**", "", true},
		{"*a*a*a*a*b", "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", false}, // backtracking stays linear per star
	}
	for _, c := range cases {
		if got := newNameFilter(c.filter).match(c.name); got != c.want {
			t.Errorf("filter %q on %q = %v, want %v", c.filter, c.name, got, c.want)
		}
	}
}
