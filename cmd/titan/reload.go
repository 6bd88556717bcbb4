package main

import (
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/titan-broker/titan/internal/broker"
)

// reloadOnSIGHUP re-reads the users file on every SIGHUP until the returned stop is called.
// A reload swaps users and permissions atomically: connections stay open and their next
// frames are checked against the new file; a file that does not parse leaves the old one in
// force (the error is logged).
func reloadOnSIGHUP(b *broker.Broker, log *slog.Logger) (stop func()) {
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	done := make(chan struct{})
	go func() {
		for {
			select {
			case <-hup:
				if b.Auth().Open() {
					log.Info("SIGHUP: no users file is configured; nothing to reload")
					continue
				}
				_ = b.ReloadUsers() // logs success and failure itself
			case <-done:
				return
			}
		}
	}()
	return func() {
		signal.Stop(hup)
		close(done)
	}
}
