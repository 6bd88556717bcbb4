package selector

import (
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// tokKind is the kind of one lexical token.
type tokKind uint8

const (
	tEOF tokKind = iota
	tIdent
	tString
	tInt
	tFloat
	tOp      // = <> < > <= >= + - * / ( ) ,
	tKeyword // AND OR NOT LIKE ESCAPE IN BETWEEN IS NULL TRUE FALSE, upper-cased in text
)

// token is one lexical token: its kind, its text (an operator, an upper-cased keyword, an
// identifier, or a string literal's value with quotes removed), its numeric value and its
// byte offset in the selector.
type token struct {
	kind tokKind
	text string
	i    int64
	f    float64
	pos  int
}

// keywords are the reserved words, matched case-insensitively (JMS 2.0 §3.8.1.1).
var keywords = [...]string{"AND", "OR", "NOT", "LIKE", "ESCAPE", "IN", "BETWEEN", "IS", "NULL", "TRUE", "FALSE"}

// lexer splits a selector into tokens, one at a time.
type lexer struct {
	src string
	pos int
}

func isIdentStart(r rune) bool { return r == '_' || r == '$' || unicode.IsLetter(r) }
func isIdentPart(r rune) bool  { return isIdentStart(r) || unicode.IsDigit(r) }

// next returns the next token, or an *Error for text that is no token.
func (l *lexer) next() (token, error) {
	for l.pos < len(l.src) {
		c := l.src[l.pos]
		if c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' {
			l.pos++
			continue
		}
		break
	}
	start := l.pos
	if l.pos >= len(l.src) {
		return token{kind: tEOF, pos: start}, nil
	}
	c := l.src[l.pos]
	switch {
	case c == '\'':
		return l.str()
	case c >= '0' && c <= '9' || c == '.' && l.pos+1 < len(l.src) && isDigit(l.src[l.pos+1]):
		return l.number()
	}
	switch c {
	case '=', '+', '-', '*', '/', '(', ')', ',':
		l.pos++
		return token{kind: tOp, text: l.src[start:l.pos], pos: start}, nil
	case '<':
		l.pos++
		if l.pos < len(l.src) && (l.src[l.pos] == '>' || l.src[l.pos] == '=') {
			l.pos++
		}
		return token{kind: tOp, text: l.src[start:l.pos], pos: start}, nil
	case '>':
		l.pos++
		if l.pos < len(l.src) && l.src[l.pos] == '=' {
			l.pos++
		}
		return token{kind: tOp, text: l.src[start:l.pos], pos: start}, nil
	}
	r, n := utf8.DecodeRuneInString(l.src[l.pos:])
	if !isIdentStart(r) {
		return token{}, &Error{Pos: start, Msg: "unexpected character " + strconv.QuoteRune(r), Kind: ErrSyntax}
	}
	l.pos += n
	for l.pos < len(l.src) {
		r, n := utf8.DecodeRuneInString(l.src[l.pos:])
		if !isIdentPart(r) {
			break
		}
		l.pos += n
	}
	word := l.src[start:l.pos]
	for _, k := range keywords {
		if strings.EqualFold(word, k) {
			return token{kind: tKeyword, text: k, pos: start}, nil
		}
	}
	return token{kind: tIdent, text: word, pos: start}, nil
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

// str lexes a string literal: single quotes, two in a row standing for one.
func (l *lexer) str() (token, error) {
	start := l.pos
	l.pos++
	var b strings.Builder
	plain := true // no doubled quote so far: the value is a slice of the source
	from := l.pos
	for l.pos < len(l.src) {
		c := l.src[l.pos]
		if c != '\'' {
			if !plain {
				b.WriteByte(c)
			}
			l.pos++
			continue
		}
		if l.pos+1 < len(l.src) && l.src[l.pos+1] == '\'' {
			if plain {
				b.WriteString(l.src[from:l.pos])
				plain = false
			}
			b.WriteByte('\'')
			l.pos += 2
			continue
		}
		l.pos++
		if plain {
			return token{kind: tString, text: l.src[from : l.pos-1], pos: start}, nil
		}
		return token{kind: tString, text: b.String(), pos: start}, nil
	}
	return token{}, &Error{Pos: start, Msg: "unterminated string literal", Kind: ErrSyntax}
}

// number lexes a numeric literal as Artemis's grammar does: decimal, hex (0x…) and octal
// (0…) integers with an optional L suffix, and decimals with an optional exponent.
func (l *lexer) number() (token, error) {
	start := l.pos
	s := l.src
	bad := func(msg string) (token, error) {
		return token{}, &Error{Pos: start, Msg: msg, Kind: ErrSyntax}
	}
	// Hex.
	if s[l.pos] == '0' && l.pos+1 < len(s) && (s[l.pos+1] == 'x' || s[l.pos+1] == 'X') {
		l.pos += 2
		d := l.pos
		for l.pos < len(s) && isHex(s[l.pos]) {
			l.pos++
		}
		if l.pos == d {
			return bad("invalid hex literal")
		}
		u, err := strconv.ParseUint(s[d:l.pos], 16, 64)
		if err != nil || u > 1<<63-1 {
			return bad("integer literal out of range")
		}
		l.suffixL()
		return l.endNumber(token{kind: tInt, i: int64(u), pos: start})
	}
	for l.pos < len(s) && isDigit(s[l.pos]) {
		l.pos++
	}
	intEnd := l.pos
	isFloat := false
	if l.pos < len(s) && s[l.pos] == '.' {
		isFloat = true
		l.pos++
		for l.pos < len(s) && isDigit(s[l.pos]) {
			l.pos++
		}
	}
	if l.pos < len(s) && (s[l.pos] == 'e' || s[l.pos] == 'E') {
		e := l.pos + 1
		if e < len(s) && (s[e] == '+' || s[e] == '-') {
			e++
		}
		if e < len(s) && isDigit(s[e]) {
			isFloat = true
			l.pos = e
			for l.pos < len(s) && isDigit(s[l.pos]) {
				l.pos++
			}
		}
	}
	if isFloat {
		f, err := strconv.ParseFloat(s[start:l.pos], 64)
		if err != nil {
			return bad("decimal literal out of range")
		}
		return l.endNumber(token{kind: tFloat, f: f, pos: start})
	}
	digits := s[start:intEnd]
	base := 10
	if len(digits) > 1 && digits[0] == '0' {
		base = 8
		digits = digits[1:]
	}
	u, err := strconv.ParseUint(digits, base, 64)
	if err != nil {
		if base == 8 {
			return bad("invalid octal literal")
		}
		return bad("integer literal out of range")
	}
	if u > 1<<63 {
		return bad("integer literal out of range")
	}
	t := token{kind: tInt, i: int64(u), pos: start}
	if u == 1<<63 {
		// Only valid negated (-9223372036854775808, as in Java): the parser checks.
		t.text = minLongText
	}
	l.suffixL()
	return l.endNumber(t)
}

// minLongText marks the int token 9223372036854775808, valid only after a unary minus.
const minLongText = "2^63"

// suffixL skips an integer literal's optional L or l.
func (l *lexer) suffixL() {
	if l.pos < len(l.src) && (l.src[l.pos] == 'l' || l.src[l.pos] == 'L') {
		l.pos++
	}
}

// endNumber refuses a number glued to an identifier character (12abc).
func (l *lexer) endNumber(t token) (token, error) {
	if l.pos < len(l.src) {
		r, _ := utf8.DecodeRuneInString(l.src[l.pos:])
		if isIdentPart(r) || r == '.' {
			return token{}, &Error{Pos: t.pos, Msg: "invalid numeric literal", Kind: ErrSyntax}
		}
	}
	return t, nil
}

func isHex(c byte) bool { return isDigit(c) || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F' }
