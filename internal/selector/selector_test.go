package selector

import (
	"errors"
	"testing"
)

// msg is a Message over a fixed header list, as the broker's adapter is (a scan, no map).
type msg struct {
	headers    [][2]string
	id         string
	ts         int64
	persistent bool
	priority   int
}

func (m *msg) Header(key string) (string, bool) {
	for _, h := range m.headers {
		if h[0] == key {
			return h[1], true
		}
	}
	return "", false
}
func (m *msg) MessageID() string  { return m.id }
func (m *msg) TimestampMs() int64 { return m.ts }
func (m *msg) Persistent() bool   { return m.persistent }
func (m *msg) Priority() int      { return m.priority }

// sample is the message the conformance table evaluates against.
var sample = &msg{
	headers: [][2]string{
		{"color", "red"}, {"size", "10"}, {"price", "12.5"}, {"name", "Bob's"},
		{"flag", "true"}, {"off", "FALSE"}, {"word", "abc"}, {"pct", "50%"},
		{"under", "a_b"}, {"empty", ""}, {"neg", "-3"}, {"exp", "1e3"},
		{"uni", "héllo"}, {"priority", "7"}, {"type", "order"},
		{"correlation-id", "c-1"}, {"expires", "1700000000000"}, {"spaced", " 5"},
	},
	id: "m-42", ts: 1600000000000, persistent: true, priority: 7,
}

// conformance is the table: selector → does it match sample. "matches" false covers both
// FALSE and UNKNOWN; the NULL-logic rows tell them apart through NOT and OR.
var conformance = []struct {
	sel   string
	match bool
}{
	// Comparison of strings.
	{"color = 'red'", true},
	{"color = 'RED'", false},
	{"color <> 'blue'", true},
	{"color <> 'red'", false},
	{"name = 'Bob''s'", true},
	{"empty = ''", true},
	{"color = word", false},
	{"JMSType = 'order'", true},
	{"JMSCorrelationID = 'c-1'", true},
	{"JMSMessageID = 'm-42'", true},
	{"JMSDeliveryMode = 'PERSISTENT'", true},
	// Numeric comparison of headers (ActiveMQ's convert_string_expressions).
	{"size = 10", true},
	{"size = 10.0", true},
	{"size > 9", true},
	{"size >= 10", true},
	{"size < 10", false},
	{"size <= 10", true},
	{"size <> 11", true},
	{"price > 12", true},
	{"price < 12.6", true},
	{"price = 12.5", true},
	{"neg < 0", true},
	{"exp = 1000", true},
	{"size = '10'", true},
	{"size = '10.0'", false}, // string comparison
	{"color > 1", false},     // not a number: UNKNOWN
	{"spaced = 5", false},    // Long.valueOf(" 5") fails: UNKNOWN
	{"JMSPriority = 7", true},
	{"JMSPriority > 4", true},
	{"JMSTimestamp = 1600000000000", true},
	{"JMSTimestamp > 1500000000000 AND JMSTimestamp < 1700000000000", true},
	{"JMSExpiration = 1700000000000", true},
	// Literals.
	{"0x0A = size", true},
	{"012 = size", true}, // octal 12 = 10
	{"10L = size", true},
	{"1.0E1 = size", true},
	{".5 < 1", true},
	{"7. = 7", true},
	{"-9223372036854775808 < 0", true},
	{"TRUE", true},
	{"FALSE", false},
	{"true AND TrUe", true},
	// Booleans from headers.
	{"flag", true},
	{"flag = TRUE", true},
	{"off = FALSE", true},
	{"NOT off", true},
	{"color = TRUE", false}, // not a boolean: UNKNOWN
	// Arithmetic.
	{"size + 5 = 15", true},
	{"size - 15 = -5", true},
	{"size * 2 = 20", true},
	{"size / 4 = 2.5", true},
	{"size / 0 = 1", false},
	{"NOT (size / 0 = 1)", false}, // UNKNOWN stays UNKNOWN
	{"-size = -10", true},
	{"+size = 10", true},
	{"1 + 2 * 3 = 7", true},
	{"(1 + 2) * 3 = 9", true},
	{"price * 2 = 25", true},
	{"color + 1 = 1", false},
	{"7 / 2 = 3.5", true},
	// LIKE.
	{"color LIKE 'r%'", true},
	{"color LIKE 'r_d'", true},
	{"color LIKE '_'", false},
	{"color LIKE '%'", true},
	{"color NOT LIKE 'b%'", true},
	{"word LIKE 'a%c'", true},
	{"word LIKE 'a%b'", false},
	{"pct LIKE '50\\%' ESCAPE '\\'", true},
	{"pct LIKE '5!%' ESCAPE '!'", false},
	{"pct LIKE '%!%' ESCAPE '!'", true},
	{"under LIKE 'a\\_b' ESCAPE '\\'", true},
	{"word LIKE 'a\\_c' ESCAPE '\\'", false},
	{"uni LIKE 'h_llo'", true},
	{"uni LIKE 'h%o'", true},
	{"empty LIKE '%'", true},
	{"empty LIKE '_%'", false},
	{"name LIKE 'Bob''_'", true},
	{"word LIKE 'ABC'", false},
	{"missing LIKE '%'", false},
	{"NOT (missing LIKE '%')", false},
	{"missing NOT LIKE '%'", false},
	// IN.
	{"color IN ('red', 'green')", true},
	{"color IN ('blue', 'green')", false},
	{"color NOT IN ('blue', 'green')", true},
	{"color IN ('a','b','c','d','e','f','g','h','red')", true},
	{"color NOT IN ('a','b','c','d','e','f','g','h','i')", true},
	{"missing IN ('x')", false},
	{"missing NOT IN ('x')", false},
	{"size IN ('10')", true},
	// BETWEEN.
	{"size BETWEEN 5 AND 15", true},
	{"size BETWEEN 10 AND 10", true},
	{"size BETWEEN 11 AND 15", false},
	{"size NOT BETWEEN 11 AND 15", true},
	{"price BETWEEN 12 AND 13", true},
	{"missing BETWEEN 1 AND 2", false},
	{"missing NOT BETWEEN 1 AND 2", false},
	{"size BETWEEN 1 + 1 AND size * 2", true},
	// IS [NOT] NULL.
	{"missing IS NULL", true},
	{"color IS NULL", false},
	{"color IS NOT NULL", true},
	{"empty IS NOT NULL", true},
	{"missing IS NOT NULL", false},
	{"missing + 1 IS NULL", true},
	// Three-valued logic (JMS 2.0 §3.8.1.2).
	{"missing = 1", false},
	{"NOT (missing = 1)", false},
	{"missing <> 1", false},
	{"missing = 1 OR TRUE", true},
	{"missing = 1 OR FALSE", false},
	{"NOT (missing = 1 OR FALSE)", false},
	{"missing = 1 AND FALSE", false},
	{"NOT (missing = 1 AND FALSE)", true},
	{"missing = 1 AND TRUE", false},
	{"NOT (missing = 1 AND TRUE)", false},
	{"TRUE OR missing = 1", true},
	{"NOT (FALSE AND missing = 1)", true},
	{"NOT NOT color = 'red'", true},
	{"NOT color = 'red'", false},
	{"color = 'red' AND size > 5 OR color = 'blue'", true},
	{"color = 'blue' OR size > 5 AND price < 0", false},
	{"(color = 'blue' OR size > 5) AND price > 0", true},
	// Keywords are case-insensitive, identifiers are not.
	{"color like 'r%' and size between 1 and 20", true},
	{"COLOR = 'red'", false},
	{"Color IS NULL", true},
}

func TestConformance(t *testing.T) {
	if len(conformance) < 60 {
		t.Fatalf("conformance table has %d rows, want at least 60", len(conformance))
	}
	for _, c := range conformance {
		s, err := Compile(c.sel)
		if err != nil {
			t.Errorf("Compile(%q): %v", c.sel, err)
			continue
		}
		if got := s.Matches(sample); got != c.match {
			t.Errorf("%q matches = %v, want %v", c.sel, got, c.match)
		}
	}
}

// TestUnknownVersusFalse tells UNKNOWN from FALSE directly, which Matches cannot.
func TestUnknownVersusFalse(t *testing.T) {
	for _, c := range []struct {
		sel  string
		want value
	}{
		{"missing = 1", vNull},
		{"color = 'blue'", vFalse},
		{"missing = 1 AND FALSE", vFalse},
		{"missing = 1 AND TRUE", vNull},
		{"missing = 1 OR TRUE", vTrue},
		{"missing = 1 OR FALSE", vNull},
		{"NOT (missing = 1)", vNull},
		{"color > 1", vNull},
		{"missing NOT IN ('a')", vNull},
		{"size IS NULL", vFalse},
	} {
		s, err := Compile(c.sel)
		if err != nil {
			t.Fatalf("Compile(%q): %v", c.sel, err)
		}
		if got := s.eval(s.root, sample); got.k != c.want.k || got.b != c.want.b {
			t.Errorf("%q = %+v, want %+v", c.sel, got, c.want)
		}
	}
}

func TestCompileErrors(t *testing.T) {
	for _, c := range []struct {
		sel  string
		pos  int
		kind error
	}{
		{"", 0, ErrSyntax},
		{"color = ", 8, ErrSyntax},
		{"color = 'red", 8, ErrSyntax},
		{"color == 'red'", 7, ErrSyntax},
		{"color = 'red' AND", 17, ErrSyntax},
		{"(color = 'red'", 14, ErrSyntax},
		{"color LIKE 5", 11, ErrSyntax},
		{"color LIKE 'a' ESCAPE 'ab'", 22, ErrSyntax},
		{"color LIKE 'a\\' ESCAPE '\\'", 11, ErrSyntax},
		{"color IN ()", 10, ErrSyntax},
		{"color IN (1)", 10, ErrSyntax},
		{"size > 'a'", 7, ErrSyntax},
		{"size BETWEEN 'a' AND 2", 13, ErrSyntax},
		{"color = NULL", 8, ErrSyntax},
		{"1 + 2", 0, ErrSyntax},
		{"'a'", 0, ErrSyntax},
		{"size AND 1", 9, ErrSyntax},
		{"TRUE = 1", 7, ErrSyntax},
		{"09 = 9", 0, ErrSyntax},
		{"12abc = 1", 0, ErrSyntax},
		{"9223372036854775808 > 0", 0, ErrSyntax},
		{"color # 1", 6, ErrSyntax},
		{"color IS 'x'", 9, ErrSyntax},
		{"size NOT 5", 9, ErrSyntax},
	} {
		_, err := Compile(c.sel)
		var e *Error
		if !errors.As(err, &e) {
			t.Errorf("Compile(%q) = %v, want an *Error", c.sel, err)
			continue
		}
		if e.Pos != c.pos || !errors.Is(err, c.kind) {
			t.Errorf("Compile(%q) = %v (pos %d), want pos %d, %v", c.sel, err, e.Pos, c.pos, c.kind)
		}
	}
}

func TestBounds(t *testing.T) {
	long := make([]byte, MaxBytes+1)
	for i := range long {
		long[i] = ' '
	}
	if _, err := Compile(string(long)); !errors.Is(err, ErrTooLong) {
		t.Errorf("a %d-byte selector: %v, want ErrTooLong", len(long), err)
	}
	deep := ""
	for range MaxDepth + 1 {
		deep += "("
	}
	deep += "TRUE"
	for range MaxDepth + 1 {
		deep += ")"
	}
	if _, err := Compile(deep); !errors.Is(err, ErrTooComplex) {
		t.Errorf("nesting %d deep: %v, want ErrTooComplex", MaxDepth+1, err)
	}
	nots := ""
	for range MaxDepth + 1 {
		nots += "NOT "
	}
	if _, err := Compile(nots + "TRUE"); !errors.Is(err, ErrTooComplex) {
		t.Errorf("%d NOTs: %v, want ErrTooComplex", MaxDepth+1, err)
	}
	wide := "a = 1"
	for range MaxNodes / 3 {
		wide += " OR a=1"
	}
	if _, err := Compile(wide); !errors.Is(err, ErrTooComplex) {
		t.Errorf("%d comparisons: %v, want ErrTooComplex", MaxNodes/3, err)
	}
	ok := "a = 1"
	for range 100 {
		ok += " OR a=1"
	}
	if _, err := Compile(ok); err != nil {
		t.Errorf("101 comparisons: %v", err)
	}
}

func TestNilSelectorMatchesAll(t *testing.T) {
	var s *Selector
	if !s.Matches(sample) {
		t.Fatal("a nil selector must match every message")
	}
}

// TestMatchesAllocatesNothing holds evaluation to zero allocations for every row of the
// conformance table.
func TestMatchesAllocatesNothing(t *testing.T) {
	for _, c := range conformance {
		s, err := Compile(c.sel)
		if err != nil {
			t.Fatal(err)
		}
		if n := testing.AllocsPerRun(100, func() { s.Matches(sample) }); n != 0 {
			t.Errorf("%q: %v allocations per Matches, want 0", c.sel, n)
		}
	}
}
