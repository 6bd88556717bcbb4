package pebblestore

import (
	"fmt"
	"log/slog"
	"strings"
)

// pebbleLogger routes Pebble's log output to slog: informational messages at Debug, errors
// at Error. Fatalf logs at Error and, for a failed MANIFEST write (Pebble declares those
// fatal: a full or read-only disk), calls fault and returns, so that the store goes down and
// recovers instead of the process dying; Pebble then returns the error to its caller. Any
// other Fatalf is a broken invariant: it panics.
type pebbleLogger struct {
	l     *slog.Logger
	fault func(msg string)
}

func (p pebbleLogger) Infof(format string, args ...any) {
	p.l.Debug(fmt.Sprintf(format, args...), "component", "pebble")
}

func (p pebbleLogger) Errorf(format string, args ...any) {
	p.l.Error(fmt.Sprintf(format, args...), "component", "pebble")
}

func (p pebbleLogger) Fatalf(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	p.l.Error(msg, "component", "pebble", "fatal", true)
	if p.fault != nil && strings.HasPrefix(msg, "MANIFEST ") {
		p.fault(msg)
		return
	}
	panic("pebblestore: pebble fatal error: " + msg)
}

// discardLogger returns a logger that drops everything: the default when Options.Logger is nil.
func discardLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }
