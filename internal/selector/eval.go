package selector

import (
	"math"
	"strconv"
	"strings"
)

// Message is what a selector reads: the message's headers and the broker-set fields behind
// the JMS header names (see the package doc). Implementations must not allocate, for
// Matches not to.
type Message interface {
	// Header returns the value of the first header named key, and false when there is none.
	Header(key string) (value string, ok bool)
	// MessageID returns the broker-assigned message-id (JMSMessageID).
	MessageID() string
	// TimestampMs returns the broker's acceptance time in Unix milliseconds (JMSTimestamp).
	TimestampMs() int64
	// Persistent reports whether the message is persistent (JMSDeliveryMode).
	Persistent() bool
	// Priority returns the message's priority, 0 to 9 (JMSPriority), read as the queues
	// that order by it read it: 4, the JMS default, for a message that names none.
	Priority() int
}

// Selector is a compiled JMS message selector. It is immutable and safe for concurrent use.
type Selector struct {
	src   string
	nodes []node
	root  int32
}

// String returns the selector's source text as given to Compile.
func (s *Selector) String() string { return s.src }

// Matches reports whether the selector is TRUE for m (FALSE and UNKNOWN do not match,
// JMS 2.0 §3.8.1). It allocates nothing. A nil Selector matches every message.
func (s *Selector) Matches(m Message) bool {
	if s == nil {
		return true
	}
	v := asBool(s.eval(s.root, m))
	return v.k == kBool && v.b
}

// kind is the type of a value: NULL (UNKNOWN, for a condition), boolean, long, double or
// string.
type kind uint8

const (
	kNull kind = iota
	kBool
	kInt
	kFloat
	kString
)

// value is one evaluated operand. It lives on the stack; s points into the message's
// headers or the compiled selector, never copied.
type value struct {
	k kind
	b bool
	i int64
	f float64
	s string
}

var (
	vNull  = value{}
	vTrue  = value{k: kBool, b: true}
	vFalse = value{k: kBool}
)

func boolean(b bool) value {
	if b {
		return vTrue
	}
	return vFalse
}

func (s *Selector) eval(i int32, m Message) value {
	n := &s.nodes[i]
	switch n.op {
	case opLit:
		return n.v
	case opHeader:
		if v, ok := m.Header(n.name); ok {
			return value{k: kString, s: v}
		}
		return vNull
	case opField:
		return fieldValue(m, n.field)
	case opAnd:
		a := asBool(s.eval(n.a, m))
		if a.k == kBool && !a.b {
			return vFalse
		}
		b := asBool(s.eval(n.b, m))
		if b.k == kBool && !b.b {
			return vFalse
		}
		if a.k == kNull || b.k == kNull {
			return vNull
		}
		return vTrue
	case opOr:
		a := asBool(s.eval(n.a, m))
		if a.k == kBool && a.b {
			return vTrue
		}
		b := asBool(s.eval(n.b, m))
		if b.k == kBool && b.b {
			return vTrue
		}
		if a.k == kNull || b.k == kNull {
			return vNull
		}
		return vFalse
	case opNot:
		return not(asBool(s.eval(n.a, m)))
	case opEq:
		return equal(s.eval(n.a, m), s.eval(n.b, m))
	case opNe:
		return not(equal(s.eval(n.a, m), s.eval(n.b, m)))
	case opLt, opGt, opLe, opGe:
		return order(n.op, s.eval(n.a, m), s.eval(n.b, m))
	case opAdd, opSub, opMul, opDiv:
		return arith(n.op, s.eval(n.a, m), s.eval(n.b, m))
	case opNeg:
		a, ok := number(s.eval(n.a, m))
		switch {
		case !ok:
			return vNull
		case a.k == kInt:
			return value{k: kInt, i: -a.i}
		default:
			return value{k: kFloat, f: -a.f}
		}
	case opLike:
		a := s.eval(n.a, m)
		switch a.k {
		case kNull:
			return vNull
		case kString:
			return boolean(n.like.match(a.s) != n.not)
		}
		return boolean(n.not) // not a string: LIKE is FALSE (ActiveMQ)
	case opIn:
		a := s.eval(n.a, m)
		if a.k != kString {
			return vNull
		}
		found := false
		if n.set != nil {
			_, found = n.set[a.s]
		} else {
			for _, e := range n.list {
				if e == a.s {
					found = true
					break
				}
			}
		}
		return boolean(found != n.not)
	case opBetween:
		x := s.eval(n.a, m)
		r := and(order(opGe, x, s.eval(n.b, m)), order(opLe, x, s.eval(n.c, m)))
		if n.not {
			return not(r)
		}
		return r
	case opIsNull:
		return boolean((s.eval(n.a, m).k == kNull) != n.not)
	}
	return vNull
}

func fieldValue(m Message, f field) value {
	switch f {
	case fMessageID:
		return value{k: kString, s: m.MessageID()}
	case fTimestamp:
		return value{k: kInt, i: m.TimestampMs()}
	case fPriority:
		return value{k: kInt, i: int64(m.Priority())}
	case fDeliveryMode:
		if m.Persistent() {
			return value{k: kString, s: "PERSISTENT"}
		}
		return value{k: kString, s: "NON_PERSISTENT"}
	case fExpiration:
		if v, ok := m.Header("expires"); ok {
			if n, ok := parseNumber(v); ok && n.k == kInt {
				return n
			}
		}
		return value{k: kInt}
	}
	return vNull
}

func and(a, b value) value {
	if a.k == kBool && !a.b || b.k == kBool && !b.b {
		return vFalse
	}
	if a.k == kNull || b.k == kNull {
		return vNull
	}
	return vTrue
}

func not(v value) value {
	if v.k != kBool {
		return vNull
	}
	return boolean(!v.b)
}

// asBool reads v as a condition: a boolean, a header reading true or false (any case), or
// UNKNOWN.
func asBool(v value) value {
	switch v.k {
	case kBool:
		return v
	case kString:
		switch {
		case strings.EqualFold(v.s, "true"):
			return vTrue
		case strings.EqualFold(v.s, "false"):
			return vFalse
		}
	}
	return vNull
}

// number reads v as a number: a long or double, or a string in Java's Long or Double
// syntax. ok is false for anything else.
func number(v value) (value, bool) {
	switch v.k {
	case kInt, kFloat:
		return v, true
	case kString:
		return parseNumber(v.s)
	}
	return vNull, false
}

// parseNumber reads s as Java's Long.valueOf or, failing that, Double.valueOf would
// (decimal digits, optional sign, fraction and exponent; no hex, no blanks). It checks the
// syntax first so that strconv never builds an error for a header that is no number.
func parseNumber(s string) (value, bool) {
	i := 0
	if i < len(s) && (s[i] == '+' || s[i] == '-') {
		i++
	}
	digits, frac, exp := 0, false, false
	for i < len(s) && isDigit(s[i]) {
		i++
		digits++
	}
	if i < len(s) && s[i] == '.' {
		frac = true
		i++
		for i < len(s) && isDigit(s[i]) {
			i++
			digits++
		}
	}
	if digits == 0 {
		return vNull, false
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		exp = true
		i++
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			i++
		}
		e := i
		for i < len(s) && isDigit(s[i]) {
			i++
		}
		if i == e {
			return vNull, false
		}
	}
	if i != len(s) {
		return vNull, false
	}
	if !frac && !exp && len(s) <= 18 { // fits an int64 whatever the digits: no error path
		n, _ := strconv.ParseInt(s, 10, 64)
		return value{k: kInt, i: n}, true
	}
	if !frac && !exp {
		if n, err := strconv.ParseInt(s, 10, 64); err == nil {
			return value{k: kInt, i: n}, true
		}
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil && !math.IsInf(f, 0) {
		return vNull, false
	}
	return value{k: kFloat, f: f}, true
}

// equal is = under the package doc's conversions.
func equal(a, b value) value {
	if a.k == kNull || b.k == kNull {
		return vNull
	}
	if a.k == kString && b.k == kString {
		return boolean(a.s == b.s)
	}
	if a.k == kBool || b.k == kBool {
		a, b = asBool(a), asBool(b)
		if a.k != kBool || b.k != kBool {
			return vNull
		}
		return boolean(a.b == b.b)
	}
	c, ok := compare(a, b)
	if !ok {
		return vNull
	}
	return boolean(c == 0)
}

// order is <, >, <= or >=: numbers only, headers read as numbers.
func order(o op, a, b value) value {
	if a.k == kNull || b.k == kNull {
		return vNull
	}
	c, ok := compare(a, b)
	if !ok {
		return vNull
	}
	switch o {
	case opLt:
		return boolean(c < 0)
	case opGt:
		return boolean(c > 0)
	case opLe:
		return boolean(c <= 0)
	default:
		return boolean(c >= 0)
	}
}

// compare compares a and b as numbers: exactly when both are longs, as doubles otherwise.
// ok is false when either is no number (or NaN).
func compare(a, b value) (int, bool) {
	a, ok := number(a)
	if !ok {
		return 0, false
	}
	b, ok = number(b)
	if !ok {
		return 0, false
	}
	if a.k == kInt && b.k == kInt {
		switch {
		case a.i < b.i:
			return -1, true
		case a.i > b.i:
			return 1, true
		}
		return 0, true
	}
	x, y := toFloat(a), toFloat(b)
	switch {
	case x < y:
		return -1, true
	case x > y:
		return 1, true
	case x == y:
		return 0, true
	}
	return 0, false // NaN
}

func toFloat(v value) float64 {
	if v.k == kInt {
		return float64(v.i)
	}
	return v.f
}

// arith is + - * /: longs stay longs (wrapping) except for /, which is a double; a
// division by zero, or an operand that is no number, is NULL.
func arith(o op, a, b value) value {
	a, ok := number(a)
	if !ok {
		return vNull
	}
	b, ok = number(b)
	if !ok {
		return vNull
	}
	if o != opDiv && a.k == kInt && b.k == kInt {
		switch o {
		case opAdd:
			return value{k: kInt, i: a.i + b.i}
		case opSub:
			return value{k: kInt, i: a.i - b.i}
		default:
			return value{k: kInt, i: a.i * b.i}
		}
	}
	x, y := toFloat(a), toFloat(b)
	switch o {
	case opAdd:
		return value{k: kFloat, f: x + y}
	case opSub:
		return value{k: kFloat, f: x - y}
	case opMul:
		return value{k: kFloat, f: x * y}
	}
	if y == 0 {
		return vNull
	}
	return value{k: kFloat, f: x / y}
}
