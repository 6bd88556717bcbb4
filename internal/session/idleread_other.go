//go:build !unix

package session

import "io"

// reader returns what the parser reads from: on this platform always the deadlineReader
// (the parser keeps its read buffer between frames).
func (s *Session) reader() io.Reader { return deadlineReader{s} }

// idleReader has no use on this platform (see idleread_unix.go).
type idleReader struct{}
