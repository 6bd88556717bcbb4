package selector

import (
	"errors"
	"strconv"
)

// ErrSyntax is wrapped by the *Error Compile returns for a selector that is not a valid
// JMS message selector (JMS 2.0 §3.8.1): an unknown token, a missing operand, an operand
// of the wrong type where the grammar fixes it (a string literal after <, a non-string
// LIKE pattern), or NULL outside IS [NOT] NULL.
var ErrSyntax = errors.New("selector: syntax error")

// ErrTooLong is wrapped by the *Error Compile returns for a selector longer than MaxBytes.
var ErrTooLong = errors.New("selector: too long")

// ErrTooComplex is wrapped by the *Error Compile returns for a selector with more than
// MaxNodes operators and operands, or nested deeper than MaxDepth.
var ErrTooComplex = errors.New("selector: too complex")

// Error is a selector Compile refused: where and why. Unwrap returns ErrSyntax,
// ErrTooLong or ErrTooComplex.
type Error struct {
	// Pos is the byte offset in the selector where the problem was found (0-based; the
	// length of the selector for an unexpected end).
	Pos int
	// Msg says what was expected or found there, in a few words.
	Msg string
	// Kind is the sentinel: ErrSyntax, ErrTooLong or ErrTooComplex.
	Kind error
}

// Error returns "selector: <msg> at position <pos>" (positions count bytes from 0).
func (e *Error) Error() string {
	return "selector: " + e.Msg + " at position " + strconv.Itoa(e.Pos)
}

// Unwrap returns the sentinel: ErrSyntax, ErrTooLong or ErrTooComplex.
func (e *Error) Unwrap() error { return e.Kind }
