package pebblestore

import (
	"fmt"
	"log/slog"
)

// pebbleLogger routes Pebble's log output to slog: informational messages at Debug, errors
// at Error. Fatalf logs at Error and panics: Pebble calls it only for broken invariants and
// does not expect it to return.
type pebbleLogger struct{ l *slog.Logger }

func (p pebbleLogger) Infof(format string, args ...any) {
	p.l.Debug(fmt.Sprintf(format, args...), "component", "pebble")
}

func (p pebbleLogger) Errorf(format string, args ...any) {
	p.l.Error(fmt.Sprintf(format, args...), "component", "pebble")
}

func (p pebbleLogger) Fatalf(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	p.l.Error(msg, "component", "pebble", "fatal", true)
	panic("pebblestore: pebble fatal error: " + msg)
}

// discardLogger returns a logger that drops everything: the default when Options.Logger is nil.
func discardLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }
