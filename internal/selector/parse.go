package selector

// Bounds on what Compile accepts.
const (
	// MaxBytes is the longest selector Compile accepts, in bytes (ErrTooLong).
	MaxBytes = 8192
	// MaxNodes bounds the operators, operands and IN-list entries of one selector
	// (ErrTooComplex).
	MaxNodes = 1024
	// MaxDepth bounds the nesting of parentheses, NOT and unary signs (ErrTooComplex).
	MaxDepth = 64
)

// op is what a node computes.
type op uint8

const (
	opLit     op = iota // the constant v
	opHeader            // the header named name (a string, or NULL when absent)
	opField             // the JMS header field f
	opAnd               // a AND b
	opOr                // a OR b
	opNot               // NOT a
	opEq                // a = b
	opNe                // a <> b
	opLt                // a < b
	opGt                // a > b
	opLe                // a <= b
	opGe                // a >= b
	opAdd               // a + b
	opSub               // a - b
	opMul               // a * b
	opDiv               // a / b
	opNeg               // -a
	opLike              // a [NOT] LIKE like
	opIn                // a [NOT] IN list
	opBetween           // a [NOT] BETWEEN b AND c
	opIsNull            // a IS [NOT] NULL
)

// field is a JMS header name Artemis maps for STOMP messages.
type field uint8

const (
	fMessageID    field = iota // message-id
	fTimestamp                 // the acceptance time, Unix ms
	fPriority                  // the priority header, 4 when absent
	fDeliveryMode              // 'PERSISTENT' or 'NON_PERSISTENT'
	fExpiration                // the expires header, 0 when absent
)

// class is what the parser knows statically about a node's value, for the checks the
// grammar makes (no string literal after <, no number as a condition …).
type class uint8

const (
	cAny    class = iota // a header or field: a string converted as needed
	cString              // a string literal
	cBool                // a boolean literal or a condition
	cNum                 // a numeric literal or arithmetic
)

// node is one operator or operand of a compiled selector; children are indexes into
// Selector.nodes.
type node struct {
	op    op
	not   bool // NOT LIKE, NOT IN, NOT BETWEEN, IS NOT NULL
	field field
	a     int32
	b     int32
	c     int32
	v     value    // opLit
	name  string   // opHeader
	like  *like    // opLike
	list  []string // opIn
	set   map[string]struct{}
}

// parser is a recursive-descent parser over the lexer's tokens, one token of look-ahead.
type parser struct {
	lx    lexer
	tok   token
	nodes []node
	depth int
	count int // nodes plus IN entries, against MaxNodes
}

// Compile parses a JMS message selector. Errors are *Error, wrapping ErrSyntax, ErrTooLong
// or ErrTooComplex, with the byte position of the problem. An empty or all-blank selector
// is an ErrSyntax error (callers treat an absent header as "no selector").
func Compile(src string) (*Selector, error) {
	if len(src) > MaxBytes {
		return nil, &Error{Pos: MaxBytes, Msg: "selector longer than 8192 bytes", Kind: ErrTooLong}
	}
	p := &parser{lx: lexer{src: src}}
	if err := p.advance(); err != nil {
		return nil, err
	}
	root, cl, err := p.orExpr()
	if err != nil {
		return nil, err
	}
	if p.tok.kind != tEOF {
		return nil, p.unexpected()
	}
	if cl == cString || cl == cNum {
		return nil, &Error{Pos: 0, Msg: "selector is not a condition", Kind: ErrSyntax}
	}
	return &Selector{src: src, nodes: p.nodes, root: root}, nil
}

func (p *parser) advance() error {
	t, err := p.lx.next()
	if err != nil {
		return err
	}
	p.tok = t
	return nil
}

// unexpected is the error for the current token where it does not fit.
func (p *parser) unexpected() error {
	switch p.tok.kind {
	case tEOF:
		return &Error{Pos: p.tok.pos, Msg: "unexpected end of selector", Kind: ErrSyntax}
	case tString:
		return &Error{Pos: p.tok.pos, Msg: "unexpected string literal", Kind: ErrSyntax}
	case tInt, tFloat:
		return &Error{Pos: p.tok.pos, Msg: "unexpected number", Kind: ErrSyntax}
	}
	return &Error{Pos: p.tok.pos, Msg: "unexpected " + quote(p.tok.text), Kind: ErrSyntax}
}

func quote(s string) string {
	if len(s) > 32 {
		s = s[:32] + "…"
	}
	return "'" + s + "'"
}

func (p *parser) is(kind tokKind, text string) bool { return p.tok.kind == kind && p.tok.text == text }

func (p *parser) add(n node) (int32, error) {
	p.count++
	if p.count > MaxNodes {
		return 0, &Error{Pos: p.tok.pos, Msg: "selector has more than 1024 operators and operands", Kind: ErrTooComplex}
	}
	p.nodes = append(p.nodes, n)
	return int32(len(p.nodes) - 1), nil
}

func (p *parser) enter() error {
	p.depth++
	if p.depth > MaxDepth {
		return &Error{Pos: p.tok.pos, Msg: "selector nested deeper than 64", Kind: ErrTooComplex}
	}
	return nil
}

// condition checks that an operand of AND, OR or NOT can be a condition.
func condition(cl class, pos int) error {
	if cl == cString || cl == cNum {
		return &Error{Pos: pos, Msg: "operand is not a condition", Kind: ErrSyntax}
	}
	return nil
}

// numeric checks that an operand of <, >, <=, >=, BETWEEN or arithmetic can be a number.
func numeric(cl class, pos int) error {
	if cl == cString || cl == cBool {
		return &Error{Pos: pos, Msg: "operand cannot be compared as a number", Kind: ErrSyntax}
	}
	return nil
}

// orExpr parses and-expr { OR and-expr }: conditions only.
func (p *parser) orExpr() (int32, class, error) {
	return p.binary(p.andExpr, tKeyword, "OR", opOr, "OR", opOr, condition, cBool)
}

// andExpr parses not-expr { AND not-expr }: conditions only.
func (p *parser) andExpr() (int32, class, error) {
	return p.binary(p.notExpr, tKeyword, "AND", opAnd, "AND", opAnd, condition, cBool)
}

func (p *parser) notExpr() (int32, class, error) {
	if !p.is(tKeyword, "NOT") {
		return p.comparison()
	}
	if err := p.enter(); err != nil {
		return 0, 0, err
	}
	defer func() { p.depth-- }()
	if err := p.advance(); err != nil {
		return 0, 0, err
	}
	pos := p.tok.pos
	a, cl, err := p.notExpr()
	if err != nil {
		return 0, 0, err
	}
	if err := condition(cl, pos); err != nil {
		return 0, 0, err
	}
	n, err := p.add(node{op: opNot, a: a})
	return n, cBool, err
}

// comparisonOps maps the comparison operators to their ops.
var comparisonOps = map[string]op{"=": opEq, "<>": opNe, "<": opLt, ">": opGt, "<=": opLe, ">=": opGe}

func (p *parser) comparison() (int32, class, error) {
	lpos := p.tok.pos
	l, cl, err := p.additive()
	if err != nil {
		return 0, 0, err
	}
	if p.tok.kind == tOp {
		o, ok := comparisonOps[p.tok.text]
		if !ok {
			return l, cl, nil
		}
		if err := p.advance(); err != nil {
			return 0, 0, err
		}
		rpos := p.tok.pos
		r, rc, err := p.additive()
		if err != nil {
			return 0, 0, err
		}
		if o == opEq || o == opNe {
			if cl == cBool && rc != cBool && rc != cAny || rc == cBool && cl != cBool && cl != cAny ||
				cl == cString && rc == cNum || cl == cNum && rc == cString {
				return 0, 0, &Error{Pos: rpos, Msg: "operands cannot be compared", Kind: ErrSyntax}
			}
		} else {
			if err := numeric(cl, lpos); err != nil {
				return 0, 0, err
			}
			if err := numeric(rc, rpos); err != nil {
				return 0, 0, err
			}
		}
		n, err := p.add(node{op: o, a: l, b: r})
		return n, cBool, err
	}
	if p.tok.kind != tKeyword {
		return l, cl, nil
	}
	not := false
	if p.tok.text == "NOT" {
		not = true
		if err := p.advance(); err != nil {
			return 0, 0, err
		}
		if p.tok.kind != tKeyword || p.tok.text != "LIKE" && p.tok.text != "IN" && p.tok.text != "BETWEEN" {
			return 0, 0, &Error{Pos: p.tok.pos, Msg: "expected LIKE, IN or BETWEEN after NOT", Kind: ErrSyntax}
		}
	}
	switch p.tok.text {
	case "LIKE":
		return p.likeTail(l, not)
	case "IN":
		return p.inTail(l, not)
	case "BETWEEN":
		if err := numeric(cl, lpos); err != nil {
			return 0, 0, err
		}
		return p.betweenTail(l, not)
	case "IS":
		if err := p.advance(); err != nil {
			return 0, 0, err
		}
		if p.is(tKeyword, "NOT") {
			not = true
			if err := p.advance(); err != nil {
				return 0, 0, err
			}
		}
		if !p.is(tKeyword, "NULL") {
			return 0, 0, &Error{Pos: p.tok.pos, Msg: "expected NULL after IS", Kind: ErrSyntax}
		}
		if err := p.advance(); err != nil {
			return 0, 0, err
		}
		n, err := p.add(node{op: opIsNull, a: l, not: not})
		return n, cBool, err
	}
	return l, cl, nil
}

func (p *parser) likeTail(l int32, not bool) (int32, class, error) {
	if err := p.advance(); err != nil {
		return 0, 0, err
	}
	if p.tok.kind != tString {
		return 0, 0, &Error{Pos: p.tok.pos, Msg: "expected a string literal after LIKE", Kind: ErrSyntax}
	}
	pat, patPos := p.tok.text, p.tok.pos
	if err := p.advance(); err != nil {
		return 0, 0, err
	}
	esc := rune(-1)
	if p.is(tKeyword, "ESCAPE") {
		if err := p.advance(); err != nil {
			return 0, 0, err
		}
		if p.tok.kind != tString {
			return 0, 0, &Error{Pos: p.tok.pos, Msg: "expected a string literal after ESCAPE", Kind: ErrSyntax}
		}
		rs := []rune(p.tok.text)
		if len(rs) != 1 {
			return 0, 0, &Error{Pos: p.tok.pos, Msg: "ESCAPE must be one character", Kind: ErrSyntax}
		}
		esc = rs[0]
		if err := p.advance(); err != nil {
			return 0, 0, err
		}
	}
	lk, ok := compileLike(pat, esc)
	if !ok {
		return 0, 0, &Error{Pos: patPos, Msg: "LIKE pattern ends with its escape character", Kind: ErrSyntax}
	}
	n, err := p.add(node{op: opLike, a: l, not: not, like: lk})
	return n, cBool, err
}

// setMin is the IN-list length from which membership is a map lookup, not a scan.
const setMin = 8

func (p *parser) inTail(l int32, not bool) (int32, class, error) {
	if err := p.advance(); err != nil {
		return 0, 0, err
	}
	if !p.is(tOp, "(") {
		return 0, 0, &Error{Pos: p.tok.pos, Msg: "expected ( after IN", Kind: ErrSyntax}
	}
	var list []string
	for {
		if err := p.advance(); err != nil {
			return 0, 0, err
		}
		if p.tok.kind != tString {
			return 0, 0, &Error{Pos: p.tok.pos, Msg: "expected a string literal in the IN list", Kind: ErrSyntax}
		}
		p.count++
		if p.count > MaxNodes {
			return 0, 0, &Error{Pos: p.tok.pos, Msg: "selector has more than 1024 operators and operands", Kind: ErrTooComplex}
		}
		list = append(list, p.tok.text)
		if err := p.advance(); err != nil {
			return 0, 0, err
		}
		if p.is(tOp, ")") {
			break
		}
		if !p.is(tOp, ",") {
			return 0, 0, &Error{Pos: p.tok.pos, Msg: "expected , or ) in the IN list", Kind: ErrSyntax}
		}
	}
	if err := p.advance(); err != nil {
		return 0, 0, err
	}
	nd := node{op: opIn, a: l, not: not, list: list}
	if len(list) >= setMin {
		nd.set = make(map[string]struct{}, len(list))
		for _, s := range list {
			nd.set[s] = struct{}{}
		}
		nd.list = nil
	}
	n, err := p.add(nd)
	return n, cBool, err
}

func (p *parser) betweenTail(l int32, not bool) (int32, class, error) {
	if err := p.advance(); err != nil {
		return 0, 0, err
	}
	lopos := p.tok.pos
	lo, lc, err := p.additive()
	if err != nil {
		return 0, 0, err
	}
	if err := numeric(lc, lopos); err != nil {
		return 0, 0, err
	}
	if !p.is(tKeyword, "AND") {
		return 0, 0, &Error{Pos: p.tok.pos, Msg: "expected AND in BETWEEN", Kind: ErrSyntax}
	}
	if err := p.advance(); err != nil {
		return 0, 0, err
	}
	hipos := p.tok.pos
	hi, hc, err := p.additive()
	if err != nil {
		return 0, 0, err
	}
	if err := numeric(hc, hipos); err != nil {
		return 0, 0, err
	}
	n, err := p.add(node{op: opBetween, a: l, b: lo, c: hi, not: not})
	return n, cBool, err
}

// additive parses term { ("+" | "-") term }: numeric operands only.
func (p *parser) additive() (int32, class, error) {
	return p.binary(p.multiplicative, tOp, "+", opAdd, "-", opSub, numeric, cNum)
}

// multiplicative parses factor { ("*" | "/") factor }: numeric operands only.
func (p *parser) multiplicative() (int32, class, error) {
	return p.binary(p.unary, tOp, "*", opMul, "/", opDiv, numeric, cNum)
}

// binary parses one left-associative level of binary operators: operands parsed by next,
// separated by tokens of kind whose text is first (op1) or second (op2). check is applied
// to every operand with the position where it starts (numeric or condition), and the first
// operand it refuses is the error; once an operator was applied, the result has class
// result, else the operand's own.
func (p *parser) binary(next func() (int32, class, error), kind tokKind, first string, op1 op, second string, op2 op,
	check func(class, int) error, result class) (int32, class, error) {
	lpos := p.tok.pos
	l, cl, err := next()
	if err != nil {
		return 0, 0, err
	}
	for p.is(kind, first) || p.is(kind, second) {
		o := op1
		if p.tok.text == second {
			o = op2
		}
		if err := check(cl, lpos); err != nil {
			return 0, 0, err
		}
		if err := p.advance(); err != nil {
			return 0, 0, err
		}
		rpos := p.tok.pos
		r, rc, err := next()
		if err != nil {
			return 0, 0, err
		}
		if err := check(rc, rpos); err != nil {
			return 0, 0, err
		}
		if l, err = p.add(node{op: o, a: l, b: r}); err != nil {
			return 0, 0, err
		}
		cl = result
	}
	return l, cl, nil
}

func (p *parser) unary() (int32, class, error) {
	if !p.is(tOp, "+") && !p.is(tOp, "-") {
		return p.primary()
	}
	neg := p.tok.text == "-"
	if err := p.enter(); err != nil {
		return 0, 0, err
	}
	defer func() { p.depth-- }()
	if err := p.advance(); err != nil {
		return 0, 0, err
	}
	if neg && p.tok.kind == tInt && p.tok.text == minLongText {
		// -9223372036854775808: the token already holds MinInt64.
		n, err := p.add(node{op: opLit, v: value{k: kInt, i: p.tok.i}})
		if err != nil {
			return 0, 0, err
		}
		return n, cNum, p.advance()
	}
	pos := p.tok.pos
	a, cl, err := p.unary()
	if err != nil {
		return 0, 0, err
	}
	if err := numeric(cl, pos); err != nil {
		return 0, 0, err
	}
	if !neg {
		return a, cNum, nil
	}
	n, err := p.add(node{op: opNeg, a: a})
	return n, cNum, err
}

// jmsFields are the JMS header names Artemis maps for STOMP messages; JMSCorrelationID
// and JMSType read plain headers.
var jmsFields = map[string]field{
	"JMSMessageID": fMessageID, "JMSTimestamp": fTimestamp, "JMSPriority": fPriority,
	"JMSDeliveryMode": fDeliveryMode, "JMSExpiration": fExpiration,
}

// jmsHeaders are the JMS header names that read a STOMP header of another name.
var jmsHeaders = map[string]string{"JMSCorrelationID": "correlation-id", "JMSType": "type"}

func (p *parser) primary() (int32, class, error) {
	t := p.tok
	switch t.kind {
	case tInt:
		if t.text == minLongText {
			return 0, 0, &Error{Pos: t.pos, Msg: "integer literal out of range", Kind: ErrSyntax}
		}
		n, err := p.add(node{op: opLit, v: value{k: kInt, i: t.i}})
		return n, cNum, p.then(err)
	case tFloat:
		n, err := p.add(node{op: opLit, v: value{k: kFloat, f: t.f}})
		return n, cNum, p.then(err)
	case tString:
		n, err := p.add(node{op: opLit, v: value{k: kString, s: t.text}})
		return n, cString, p.then(err)
	case tIdent:
		nd := node{op: opHeader, name: t.text}
		if f, ok := jmsFields[t.text]; ok {
			nd = node{op: opField, field: f}
		} else if h, ok := jmsHeaders[t.text]; ok {
			nd.name = h
		}
		n, err := p.add(nd)
		return n, cAny, p.then(err)
	case tKeyword:
		switch t.text {
		case "TRUE", "FALSE":
			n, err := p.add(node{op: opLit, v: value{k: kBool, b: t.text == "TRUE"}})
			return n, cBool, p.then(err)
		case "NULL":
			return 0, 0, &Error{Pos: t.pos, Msg: "NULL is only valid in IS [NOT] NULL", Kind: ErrSyntax}
		}
	case tOp:
		if t.text == "(" {
			if err := p.enter(); err != nil {
				return 0, 0, err
			}
			if err := p.advance(); err != nil {
				return 0, 0, err
			}
			n, cl, err := p.orExpr()
			if err != nil {
				return 0, 0, err
			}
			if !p.is(tOp, ")") {
				return 0, 0, &Error{Pos: p.tok.pos, Msg: "expected )", Kind: ErrSyntax}
			}
			p.depth--
			return n, cl, p.advance()
		}
	}
	return 0, 0, p.unexpected()
}

// then advances past the token just used, unless err is already set.
func (p *parser) then(err error) error {
	if err != nil {
		return err
	}
	return p.advance()
}
